"""The buffers example: two chained F32 kernels, B = 2*A then A = B + 1, each one forcible to the CPU.

Run: python -m examples.buffers [--first-cpu] [--second-cpu] [--cpu] [--require-gpu] [--allow-software-adapter]

--first-cpu / --second-cpu give that kernel min_elements=5, above the job's 4 elements, so the
host answers its dispatch with status 1 and the guest runs its own CPU runner for that kernel only.
"""
from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from examples.common import base_parser, check_flags, device_line, record_reason, status_name
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu import GpuRequiredError

WAT = Path(__file__).with_name("buffers.wat")
EXPECTED = (3.0, 5.0, 7.0, 9.0)
FORCED_MIN_ELEMENTS = 5  # the job dispatches 4 elements
STEPS = ((1, "double", "first", "B = 2*A"), (2, "addOne", "second", "A = B + 1"))


def kernel(kernel_id: int, name: str, min_elements: int = 0) -> KernelConfig:
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                        relaxed_float=True, min_elements=min_elements)


@dataclass
class Dispatch:
    """One kernel's dispatch, from buffer_snapshot().last read right after its step returned."""

    kernel_id: int
    step: str
    status: int  # the status the guest saved: 0 GPU, 1 CPU fallback
    outcome: str  # last.outcome: GPU, CPU_FALLBACK_READY, ...
    reason_code: str
    reason: str
    dispatch_seconds: float  # last.total: the dispatch import itself
    step_seconds: float  # wall clock of the whole step (binds, dispatch, CPU runner)

    @property
    def path(self) -> str:
        if self.status == 0:
            return "GPU"
        if self.status == 1:
            return f"CPU fallback ({record_reason(self.reason_code, self.reason)})"
        return f"error {status_name(self.status)}"

    def line(self) -> str:
        return (f"kernel {self.kernel_id} ({self.step}): status {self.status} (0=GPU, 1=CPU fallback): {self.path}; "
                f"dispatch {self.dispatch_seconds * 1e3:.3f} ms, step {self.step_seconds * 1e3:.3f} ms")


@dataclass
class BuffersResult:
    device: str
    dispatches: list[Dispatch] = field(default_factory=list)
    result: tuple[float, ...] = ()
    error: str = ""  # a failed setup/finish step, or a missing dispatch record

    @property
    def statuses(self) -> tuple[int, ...]:
        return tuple(d.status for d in self.dispatches)

    @property
    def ok(self) -> bool:
        return not self.error and self.result == EXPECTED and self.statuses in ((0, 0), (0, 1), (1, 0), (1, 1))


def run(cpu: bool = False, require_gpu: bool = False, allow_software_adapter: bool = False,
        first_cpu: bool = False, second_cpu: bool = False) -> BuffersResult:
    """Run setup, both kernels and finish, reading the dispatch record after each kernel."""
    forced = {1: first_cpu, 2: second_cpu}
    kernels = [kernel(k, name, FORCED_MIN_ELEMENTS if forced[k] else 0) for k, name, _, _ in STEPS]
    config = Config(kernels=kernels, disabled=cpu, require_gpu=require_gpu,
                    allow_software_adapter=allow_software_adapter)
    with Host(config) as host:
        out = BuffersResult(device_line(host))
        inst = host.instantiate(host.compile(WAT.read_text()))
        status = inst.call("setup")
        if status:
            out.error = f"setup failed: {status_name(status)}"
            return out
        for kernel_id, _, export, step in STEPS:
            t0 = time.perf_counter()
            status = inst.call(export)
            step_seconds = time.perf_counter() - t0
            last = host.buffer_snapshot().last
            saved = struct.unpack("<I", inst.read_memory(28 + 4 * kernel_id, 4))[0]
            if status or last.import_name != "dispatch" or last.kernel_id != kernel_id:
                out.error = f"kernel {kernel_id}: step returned {status_name(status)}, last import {last.import_name}"
                return out
            out.dispatches.append(Dispatch(kernel_id, step, saved, last.outcome, last.reason_code, last.reason,
                                           last.total, step_seconds))
        status = inst.call("finish")
        if status:
            out.error = f"finish failed: {status_name(status)}"
        out.result = struct.unpack("<4f", inst.read_memory(16, 16))
        return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.buffers")
    parser.add_argument("--first-cpu", action="store_true", help="force kernel 1 (B = 2*A) to the CPU runner")
    parser.add_argument("--second-cpu", action="store_true", help="force kernel 2 (A = B + 1) to the CPU runner")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if args.require_gpu and (args.first_cpu or args.second_cpu):
        parser.error("--require-gpu cannot be combined with --first-cpu or --second-cpu")
    try:
        out = run(args.cpu, args.require_gpu, args.allow_software_adapter, args.first_cpu, args.second_cpu)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out.device)
    for d in out.dispatches:
        print(d.line())
    if out.error:
        print(f"error: {out.error}", file=sys.stderr)
        return 1
    if out.result != EXPECTED:
        print(f"wrong result: {list(out.result)} != {list(EXPECTED)}", file=sys.stderr)
        return 1
    print(f"verified: {list(out.result)}")
    if args.require_gpu and out.statuses != (0, 0):
        print("error: --require-gpu but a kernel ran on the CPU", file=sys.stderr)
        return 1
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
