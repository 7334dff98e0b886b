"""The start example: a WAT guest computes B = 2*A then A = B + 1 inside its start function.

Run: python -m examples.start [--cpu] [--require-gpu] [--allow-software-adapter]
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

from examples.common import base_parser, device_line, path_name
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

WAT = Path(__file__).with_name("start.wat")
EXPECTED = (3.0, 5.0, 7.0, 9.0)


def kernel(kernel_id: int, name: str, min_elements: int = 0) -> KernelConfig:
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                        relaxed_float=True, min_elements=min_elements)


def run(cpu: bool = False, require_gpu: bool = False, allow_software_adapter: bool = False,
        first_cpu: bool = False, second_cpu: bool = False) -> tuple[tuple[float, ...], tuple[int, int], str]:
    """Run the guest; returns (result, saved dispatch statuses, device line)."""
    config = Config(kernels=[kernel(1, "double", 5 if first_cpu else 0), kernel(2, "addOne", 5 if second_cpu else 0)],
                    disabled=cpu, require_gpu=require_gpu, allow_software_adapter=allow_software_adapter)
    with Host(config) as host:
        inst = host.instantiate(host.compile(WAT.read_text()))
        result = struct.unpack("<4f", inst.read_memory(16, 16))
        statuses = struct.unpack("<2I", inst.read_memory(32, 8))
        return result, statuses, device_line(host)


def main(argv: list[str] | None = None) -> int:
    args = base_parser(__doc__.splitlines()[0]).parse_args(argv)
    result, statuses, device = run(args.cpu, args.require_gpu, args.allow_software_adapter)
    print(device)
    for name, status in zip(("B = 2*A", "A = B + 1"), statuses):
        print(f"{name}: ran on {path_name(status)}")
    ok = result == EXPECTED
    print(f"result {list(result)} {'== expected' if ok else f'!= expected {list(EXPECTED)}'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
