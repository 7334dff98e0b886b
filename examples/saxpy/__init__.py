"""The SAXPY guest, the same program in WAT, C, Zig and AssemblyScript (the guide's worked example).

Each guest computes y := 2.5*x + y over n f32 elements with x[i] = i and y[i] = n - i: it creates
two F32 buffers, sets them, binds x to slot 0 and y to slot 1, dispatches kernel 1, runs its CPU
runner when dispatch answers 1, copies y back and checks it. run(n) returns 0 (GPU), 1 (CPU
runner), the status of the first failing import, 99 (a wrong element) or 100 (n outside 1..4096).
The WAT guest is compiled from its text; the others are the checked-in builds of
examples/guests/build.sh.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wagogpu import Access, BindingConfig, ElementType, Host, KernelConfig

HERE = Path(__file__).resolve().parent
A = 2.5
MAX_N = 4096
WRONG_ELEMENT = 99
BAD_COUNT = 100

SAXPY = KernelConfig(1, "wago_gpu.kernel.saxpy", "wago_gpu.cpu.saxpy",
                     (BindingConfig(0, ElementType.F32, Access.READ),         # x
                      BindingConfig(1, ElementType.F32, Access.READ_WRITE)),  # y, updated in place
                     relaxed_float=True)


class Language(enum.StrEnum):
    """The guest's source language; the value is the command-line name."""

    WAT = "wat"
    C = "c"
    ZIG = "zig"
    ASSEMBLYSCRIPT = "as"


FILES: dict[Language, str] = {Language.WAT: "saxpy.wat", Language.C: "saxpy_c.wasm",
                              Language.ZIG: "saxpy_zig.wasm", Language.ASSEMBLYSCRIPT: "saxpy_as.wasm"}
LABELS: dict[Language, str] = {Language.WAT: "WAT", Language.C: "C", Language.ZIG: "Zig",
                               Language.ASSEMBLYSCRIPT: "AssemblyScript"}


def guest_source(language: Language) -> str | bytes:
    """What Host.compile takes: the WAT text, or the built module's bytes."""
    path = HERE / FILES[language]
    return path.read_text() if path.suffix == ".wat" else path.read_bytes()


def expected(n: int) -> np.ndarray:
    """y after the job, computed here: 2.5*i + (n - i), exact in f32 for n <= 4096."""
    i = np.arange(n, dtype=np.float32)
    return np.float32(A) * i + (np.float32(n) - i)


@dataclass
class SaxpyRun:
    """One run(n) of one guest and what the host recorded about its dispatch."""

    language: Language
    n: int
    returned: int
    outcome: str  # last_dispatch.outcome: GPU, CPU_FALLBACK_READY, ERROR, ...
    reason_code: str  # last_dispatch.reason_code: NONE, DISABLED, BELOW_THRESHOLD, ...
    result: np.ndarray  # y as the guest left it in its memory
    live_buffers: int  # buffers the instance still held after run()
    dispatched: bool  # run(n) reached dispatch (outcome and reason_code describe this run's dispatch)

    @property
    def correct(self) -> bool:
        return self.returned in (0, 1) and self.live_buffers == 0 and np.array_equal(self.result, expected(self.n))


def run(host: Host, language: Language, n: int) -> SaxpyRun:
    """Compile and instantiate one guest on `host`, call run(n), read y back, close the instance.

    The host should have no other live instance: live_buffers counts every instance's buffers.
    """
    module = host.compile(guest_source(language))
    inst = host.instantiate(module)
    before = host.buffer_snapshot().last_dispatch.sequence
    try:
        returned = inst.call("run", n)
        snap = host.buffer_snapshot()
        dispatch = snap.last_dispatch
        size = n if 1 <= n <= MAX_N else 0
        result = np.frombuffer(inst.read_memory(inst.call("result_ptr"), 4 * size), dtype=np.float32).copy()
        return SaxpyRun(language, n, returned, dispatch.outcome, dispatch.reason_code, result,
                        sum(d.buffers for d in snap.instances), dispatch.sequence > before)
    finally:
        inst.close()
        module.close()
