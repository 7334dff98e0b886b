"""Running a corpus kernel end to end through a wagogpu Host, and comparing answers.

Every module's driver (src/*/driver.*) exports `corpus_staging() -> address` and
`corpus_run(kernel_id, count, layout) -> status`: the host writes each read slot's inputs into
the staging area (slot s at address + s * SLOT_BYTES), the guest creates, fills and binds the
buffers, dispatches, runs its CPU runner on status 1 and copies every buffer back to the staging
area, where the host reads the written slots.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import wasmtime

from wagogpu import ElementType, Host, Instance

from .kernels import DTYPES, EXACT, RELAXED_REL, Arrays, Bound, Kernel

SLOT_BYTES = 8 * 1024  # the drivers' staging stride: 1024 elements of up to 8 bytes
MAX_ELEMENTS = 1024
UNWRITTEN = 0xA5  # what a write-only slot holds before the kernel runs


@dataclass
class Run:
    """One corpus_run: the guest's status, which path the dispatch took, the written slots."""

    status: int
    outcome: str
    outputs: Arrays


def _instantiate(host: Host, wasm: bytes) -> Instance:
    """Instantiate with WASI where the module imports it (the Go cells): through the `wasi`
    keyword of DESIGN.md's surface when this wagogpu has it; older Hosts add WASI themselves."""
    module = host.compile(wasm)
    needs_wasi = b"wasi_snapshot_preview1" in wasm
    if needs_wasi and "wasi" in inspect.signature(host.instantiate).parameters:
        return host.instantiate(module, wasi=wasmtime.WasiConfig())  # type: ignore[call-arg, unused-ignore]
    return host.instantiate(module)


class CellInstance:
    """One instance of a cell's module on a host, reused for every kernel of the cell."""

    def __init__(self, host: Host, wasm: bytes) -> None:
        self.host = host
        self.inst = _instantiate(host, wasm)
        try:
            self.inst.call("_initialize")  # reactors (C, Go)
        except KeyError:
            pass
        self.staging = int(self.inst.call("corpus_staging"))

    def __enter__(self) -> CellInstance:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.inst.close()

    def run(self, kernel_id: int, kernel: Kernel, inputs: Arrays, n: int) -> Run:
        """Stage the inputs, run the kernel over n elements, read back every written slot."""
        assert 0 < n <= MAX_ELEMENTS
        for s in kernel.slots:
            data = inputs[s.slot].tobytes() if s.slot in inputs else bytes([UNWRITTEN]) * (n * _width(s.type))
            self.inst.write_memory(self.staging + s.slot * SLOT_BYTES, data)
        status = int(self.inst.call("corpus_run", kernel_id, n, kernel.layout))
        outcome = self.host.buffer_snapshot().last_dispatch.outcome
        outputs: Arrays = {}
        for s in kernel.written():
            raw = self.inst.read_memory(self.staging + s.slot * SLOT_BYTES, n * _width(s.type))
            outputs[s.slot] = np.frombuffer(raw, dtype=DTYPES[s.type]).copy()
        return Run(status, outcome, outputs)


def _width(etype: ElementType) -> int:
    return int(np.dtype(DTYPES[etype]).itemsize)


def expected(kernel: Kernel, inputs: Arrays) -> Arrays:
    """The kernel's numpy answer (overflow and invalid-value warnings are part of the maths)."""
    with np.errstate(all="ignore"):
        return kernel.reference(inputs)


def mismatches(actual: np.ndarray, want: np.ndarray, bound: Bound, limit: int = 5) -> list[str]:
    """The first `limit` elements where `actual` is not within `bound` of `want`: integers within
    its slack; floats equal, or both NaN, or within the bound (and never inf against finite)."""
    if actual.dtype.kind != "f":
        off = actual != want if bound.slack == 0 else np.abs(actual.astype(np.int64) - want) > bound.slack
        bad = np.flatnonzero(off)
    else:
        a, w = actual.astype(np.float64), want.astype(np.float64)
        with np.errstate(all="ignore"):
            near = np.abs(a - w) <= bound.rel * np.maximum(bound.floor, np.abs(w))
        ok = (a == w) | (np.isnan(a) & np.isnan(w)) | (np.isfinite(a) & np.isfinite(w) & near)
        bad = np.flatnonzero(~ok)
    return [f"[{i}] got {actual[i]!r} want {want[i]!r}" for i in bad[:limit]]


def gpu_bound(kernel: Kernel) -> Bound:
    """GPU vs CPU: integer kernels bit-exact; float kernels within relaxed_float's bound, scaled by
    the magnitude of the kernel's operands (fused or flushed arithmetic errs relative to them),
    and their integer results (quantisation) within one: an ulp can move a rounding or truncation."""
    return Bound(RELAXED_REL, kernel.scale, slack=1) if kernel.is_float else EXACT
