"""Run the jobs through one real wagogpu.Host: the GPU path by `dispatch`, the CPU path by the
guest's own CPU runner, both on the same buffers. Only wagogpu's public API is used.

Per function, one guest instance and one buffer per parameter and result (slot k for parameter k,
the results after them), each `returns + 1` elements long:

* the assert_return cases run as one batch: inputs set, outputs filled with SENTINEL, `dispatch`
  over the batch (status and reason recorded, results read back when it returned 0); then the
  outputs are refilled and the CPU runner computes the same batch;
* each assert_trap case runs after the whole return batch, at the last element: `dispatch` over
  every element must return 1 with every output word still SENTINEL (nothing of the batch
  published), then the CPU runner over the same elements must trap with the spec's trap.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import wasmtime

from wagogpu import (Access, BindingConfig, CompileError, Config, ElementType, Host, KernelConfig, Status,
                     compile_buffer_wgsl)

from .binary import ValType
from .guest import signature_name
from .plan import FunctionJob
from .wast import Case

STATUS_OK = Status["OK"]  # wagogpu's enums are built from the ABI table: members by name
SENTINEL = 0xA5A5_5A5A  # output words before every dispatch: a quiet NaN as f32, no spec result
ELEMENT = {ValType.I32: ElementType["I32"], ValType.F32: ElementType["F32"]}

# The spec's assert_trap messages and the wasmtime trap code each means.
TRAP_CODES: dict[str, wasmtime.TrapCode] = {
    "integer divide by zero": wasmtime.TrapCode.INTEGER_DIVISION_BY_ZERO,
    "integer overflow": wasmtime.TrapCode.INTEGER_OVERFLOW,
    "invalid conversion to integer": wasmtime.TrapCode.BAD_CONVERSION_TO_INTEGER,
    "unreachable": wasmtime.TrapCode.UNREACHABLE,
}


def kernel_configs(jobs: list[FunctionJob], strict_float: bool = False) -> dict[str, KernelConfig]:
    """One kernel per function signature, IDs from 1: params READ, results WRITE (a kernel with
    neither declares an unused slot 0, since a kernel needs one binding); every kernel
    strict_float when asked (the exact integer-coded f32 rows)."""
    configs: dict[str, KernelConfig] = {}
    for job in jobs:
        sig = signature_name(job.ftype)
        if sig in configs:
            continue
        types = job.ftype.params + job.ftype.results
        bindings = [BindingConfig(slot, ELEMENT[ValType(t)], Access["READ"] if slot < len(job.ftype.params)
                                  else Access["WRITE"]) for slot, t in enumerate(types)]
        bindings = bindings or [BindingConfig(0, ElementType["I32"], Access["READ"])]
        configs[sig] = KernelConfig(len(configs) + 1, f"wago_gpu.kernel.{sig}", f"wago_gpu.cpu.{sig}",
                                    tuple(bindings), relaxed_float=True, strict_float=strict_float)
    return configs


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    case: Case
    status: int  # dispatch's status
    reason: str  # the dispatch's reason code
    gpu: tuple[int, ...] | None  # result words of the GPU path (status 0 only)
    cpu: tuple[int, ...] | None  # result words of the CPU runner (None when it trapped)
    cpu_trap: str  # the CPU runner's trap code name, "" when it did not trap
    published: bool  # a trap case: some output word changed by the failed dispatch


@dataclass(slots=True)
class JobOutcome:
    job: FunctionJob
    eligible: bool  # compile_buffer_wgsl accepted the kernel
    reason: str  # why not, when not
    returns: list[CaseOutcome] = field(default_factory=list)
    traps: list[CaseOutcome] = field(default_factory=list)


class _Buffers:
    """The job's buffers in one instance, moved through guest memory at offset 0."""

    def __init__(self, inst, kernel: KernelConfig, elements: int):
        self.inst = inst
        self.elements = elements
        self.handles: dict[int, int] = {}
        for b in kernel.bindings:
            handle, status = inst.call("createBuffer", int(b.type), elements)
            if status != STATUS_OK or inst.call("bindBuffer", b.slot, handle) != STATUS_OK:
                raise RuntimeError(f"buffer set-up failed with status {status}")
            self.handles[b.slot] = handle

    def write(self, slot: int, words: list[int]) -> None:
        self.inst.write_memory(0, np.asarray(words, dtype=np.uint32).tobytes())
        status = self.inst.call("put", self.handles[slot], 0, 0, len(words))
        if status != STATUS_OK:
            raise RuntimeError(f"setBuffer32 returned {status}")

    def read(self, slot: int, count: int) -> np.ndarray:
        status = self.inst.call("get", self.handles[slot], 0, 0, count)
        if status != STATUS_OK:
            raise RuntimeError(f"copyBuffer32 returned {status}")
        return np.frombuffer(self.inst.read_memory(0, 4 * count), dtype=np.uint32).copy()


class JobRunner:
    """Executes jobs on one Host (see the module docstring for the sequence)."""

    def __init__(self, host: Host, configs: dict[str, KernelConfig]):
        self.host = host
        self.configs = configs

    def run(self, job: FunctionJob) -> JobOutcome:
        kernel = self.configs[job.guest.signature]
        try:
            compile_buffer_wgsl(job.guest.wasm, kernel)
            outcome = JobOutcome(job, True, "")
        except CompileError as exc:
            outcome = JobOutcome(job, False, exc.message)
        module = self.host.compile(job.guest.wasm)
        try:
            with self.host.instantiate(module) as inst:
                self._cases(inst, kernel, job, outcome)
        finally:
            module.close()
        return outcome

    def _cases(self, inst, kernel: KernelConfig, job: FunctionJob, outcome: JobOutcome) -> None:
        nparams, nresults = len(job.ftype.params), len(job.ftype.results)
        bufs = _Buffers(inst, kernel, len(job.returns) + 1)
        outputs = range(nparams, nparams + nresults)
        batch = [[c.args[k].bits or 0 for c in job.returns] for k in range(nparams)]
        if job.returns:
            count = len(job.returns)
            status, reason, gpu = self._dispatch(bufs, kernel, batch, outputs, count)
            cpu, trap = self._cpu(bufs, kernel, outputs, count)
            for i, case in enumerate(job.returns):
                outcome.returns.append(CaseOutcome(
                    case, status, reason, tuple(int(g[i]) for g in gpu) if status == STATUS_OK else None,
                    tuple(int(c[i]) for c in cpu) if not trap else None, trap, False))
        for case in job.traps:
            inputs = [column + [case.args[k].bits or 0] for k, column in enumerate(batch)]
            count = len(job.returns) + 1
            status, reason, after = self._dispatch(bufs, kernel, inputs, outputs, count)
            published = any(bool((words != SENTINEL).any()) for words in after)
            _, trap = self._cpu(bufs, kernel, outputs, count)
            outcome.traps.append(CaseOutcome(case, status, reason, None, None, trap, published))

    def _dispatch(self, bufs: _Buffers, kernel: KernelConfig, inputs: list[list[int]], outputs: range,
                  count: int) -> tuple[int, str, list[np.ndarray]]:
        """Set inputs, fill outputs with SENTINEL, dispatch; the status, reason and output words."""
        for slot, words in enumerate(inputs):
            bufs.write(slot, words)
        for slot in outputs:
            bufs.write(slot, [SENTINEL] * bufs.elements)
        status = bufs.inst.call("dispatch", kernel.id, count)
        reason = self.host.buffer_snapshot().last_dispatch.reason_code
        return status, reason, [bufs.read(slot, count) for slot in outputs]

    def _cpu(self, bufs: _Buffers, kernel: KernelConfig, outputs: range,
             count: int) -> tuple[list[np.ndarray], str]:
        """Refill the outputs, run the guest's CPU runner; its output words and trap code name."""
        for slot in outputs:
            bufs.write(slot, [SENTINEL] * bufs.elements)
        try:
            bufs.inst.call(kernel.cpu_export, count)
        except wasmtime.Trap as exc:
            code = exc.trap_code
            return [], code.name if code is not None else "UNKNOWN"
        return [bufs.read(slot, count) for slot in outputs], ""


def open_host(configs: dict[str, KernelConfig], allow_software_adapter: bool, require_gpu: bool) -> Host:
    """The one Host of a run; raises RuntimeError when its GPU path is not live."""
    host = Host(Config(kernels=tuple(configs.values()), allow_software_adapter=allow_software_adapter,
                       require_gpu=require_gpu))
    snapshot = host.buffer_snapshot()
    if snapshot.state != "READY":
        reason = snapshot.reason
        host.close()
        raise RuntimeError(f"no GPU adapter opened: {reason}")
    return host
