"""The start example: a WAT guest computes B = 2*A then A = B + 1 inside its start function.

Run: python -m examples.start [--cpu] [--require-gpu] [--allow-software-adapter]
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from examples.common import base_parser, check_flags, device_line, explain
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu import GpuRequiredError

WAT = Path(__file__).with_name("start.wat")
EXPECTED = (3.0, 5.0, 7.0, 9.0)
STEPS = ("B = 2*A", "A = B + 1")
COUNT = 4  # elements per dispatch


def kernel(kernel_id: int, name: str, min_elements: int = 0) -> KernelConfig:
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                        relaxed_float=True, min_elements=min_elements)


@dataclass
class StartResult:
    result: tuple[float, ...]  # the four f32 at bytes 16..31
    statuses: tuple[int, int]  # dispatch statuses the guest saved at bytes 32 and 36
    device: str  # the device line
    paths: tuple[str, str]  # per kernel: "GPU", "CPU fallback (why)" or "error ..."

    @property
    def ok(self) -> bool:
        return self.result == EXPECTED and all(s in (0, 1) for s in self.statuses)


def run(cpu: bool = False, require_gpu: bool = False, allow_software_adapter: bool = False,
        first_cpu: bool = False, second_cpu: bool = False) -> StartResult:
    """Instantiate the guest (its start function does the whole job) and read what it left in memory."""
    kernels = [kernel(1, "double", 5 if first_cpu else 0), kernel(2, "addOne", 5 if second_cpu else 0)]
    config = Config(kernels=kernels, disabled=cpu, require_gpu=require_gpu,
                    allow_software_adapter=allow_software_adapter)
    with Host(config) as host:
        module = host.compile(WAT.read_text())
        inst = host.instantiate(module)
        result = struct.unpack("<4f", inst.read_memory(16, 16))
        statuses = struct.unpack("<2I", inst.read_memory(32, 8))
        paths = tuple(explain(host, module, k, s, COUNT) for k, s in zip(kernels, statuses))
        return StartResult(result, statuses, device_line(host), paths)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.start")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    try:
        out = run(args.cpu, args.require_gpu, args.allow_software_adapter)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out.device)
    for step, status, path in zip(STEPS, out.statuses, out.paths):
        print(f"{step}: status {status}, ran on {path}")
    print(f"result {list(out.result)} {'== expected' if out.result == EXPECTED else f'!= expected {list(EXPECTED)}'}")
    if args.require_gpu and out.statuses != (0, 0):
        print("error: --require-gpu but a kernel ran on the CPU", file=sys.stderr)
        return 1
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
