"""The compiled example: Zig and C guests that do the whole job inside their own run().

Run: python -m examples.compiled [--guest zig|c|all] [--cpu] [--require-gpu] [--allow-software-adapter]

Each guest (examples/guests/double.wasm from Zig, double_c.wasm from C) allocates two F32 buffers
with createBufferPacked, uploads [1, 2, 3, 4], dispatches B = 2*A, runs its CPU runner on status 1,
copies B back, checks [2, 4, 6, 8] and frees both buffers. run() returns 0 (GPU), 1 (CPU runner),
99 (wrong output) or the status of the first import that failed. The host checks that return and
that the guest left no buffer behind.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from examples.common import base_parser, check_flags, device_line, explain, status_name
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu import GpuRequiredError

GUEST_DIR = Path(__file__).resolve().parent.parent / "guests"
GUESTS = {"zig": ("Zig", "double.wasm"), "c": ("C", "double_c.wasm")}
COUNT = 4  # elements the guests dispatch
DOUBLE = KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double",
                      [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                      relaxed_float=True)


@dataclass
class CompiledResult:
    guest: str
    returned: int  # run(): 0 GPU, 1 CPU runner, 99 wrong output, else a failing status
    path: str  # "GPU", "CPU fallback (why)", ...
    live_buffers: int  # buffers the instance still held after run()
    held_bytes: int  # runtime_buffer_bytes after run(): only the idle GPU scratch the host keeps for reuse
    pool_bytes: int  # runtime_pool_bytes after run()
    leftover_bytes: int  # runtime_buffer_bytes once the instance closed
    seconds: float  # wall clock of compile + instantiate + run()

    @property
    def clean(self) -> bool:
        return self.live_buffers == 0 and self.held_bytes == self.pool_bytes and self.leftover_bytes == 0

    @property
    def ok(self) -> bool:
        return self.returned in (0, 1) and self.clean


def describe_return(returned: int) -> str:
    if returned == 99:
        return "99 (the guest found a wrong output)"
    if returned in (0, 1):
        return f"{returned} ({'GPU' if returned == 0 else 'CPU runner'})"
    return f"{returned} ({status_name(returned)} from an import)"


def run_guest(host: Host, guest: str, kernel: KernelConfig = DOUBLE) -> CompiledResult:
    """Compile, instantiate and run one guest on an open host, then close its instance and module."""
    label, filename = GUESTS[guest]
    t0 = time.perf_counter()
    module = host.compile((GUEST_DIR / filename).read_bytes())
    inst = host.instantiate(module)
    returned = inst.call("run")
    seconds = time.perf_counter() - t0
    snap = host.buffer_snapshot()
    mine = [d for d in snap.instances if d.instance == inst.id]
    path = explain(host, module, kernel, returned, COUNT) if returned in (0, 1) else "no result"
    inst.close()
    module.close()
    leftover = host.buffer_snapshot().runtime_buffer_bytes
    return CompiledResult(label, returned, path, sum(d.buffers for d in mine), snap.runtime_buffer_bytes,
                          snap.runtime_pool_bytes, leftover, seconds)


def run(guests: list[str], cpu: bool = False, require_gpu: bool = False,
        allow_software_adapter: bool = False) -> tuple[str, list[CompiledResult]]:
    """Run the guests one after another on one host; returns (device line, results)."""
    config = Config(kernels=[DOUBLE], disabled=cpu, require_gpu=require_gpu,
                    allow_software_adapter=allow_software_adapter)
    with Host(config) as host:
        return device_line(host), [run_guest(host, g) for g in guests]


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.compiled")
    parser.add_argument("--guest", choices=(*GUESTS, "all"), default="all", help="which guest to run (default all)")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    guests = list(GUESTS) if args.guest == "all" else [args.guest]
    try:
        device, results = run(guests, args.cpu, args.require_gpu, args.allow_software_adapter)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(device)
    failed = False
    for r in results:
        print(f"{r.guest} guest: run() returned {describe_return(r.returned)}: {r.path}; "
              f"{r.seconds * 1e3:.1f} ms for compile, instantiate and run")
        print(f"{r.guest} guest: {r.live_buffers} live buffers after run(), {r.held_bytes - r.pool_bytes} bytes "
              f"outside the reuse pool ({r.pool_bytes} pooled), {r.leftover_bytes} bytes after close")
        if not r.ok:
            failed = True
            why = "left buffers behind" if r.returned in (0, 1) else f"returned {describe_return(r.returned)}"
            print(f"error: the {r.guest} guest {why}", file=sys.stderr)
        elif args.require_gpu and r.returned != 0:
            failed = True
            print(f"error: --require-gpu but the {r.guest} guest ran on the CPU", file=sys.stderr)
        else:
            print(f"{r.guest} result verified: [2, 4, 6, 8] (checked by the guest); no buffers left")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
