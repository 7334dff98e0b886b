"""The storage example: F16 buffers, memory64 transfers and GC-array transfers.

Run: python -m examples.storage [--kind f16|memory64|gc] [--cpu] [--require-gpu] [--allow-software-adapter]

f16 increments one binary16 element (1.0 -> 2.0) with kernel 1, on the GPU or through the guest's
CPU runner. memory64 and gc move one f32 (7.0) into a buffer and back, from a 64-bit memory or a
mutable GC array; they dispatch nothing (transfers only, as in the reference).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from examples.common import base_parser, check_flags, device_line, record_reason, status_name
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu import GpuRequiredError

HERE = Path(__file__).parent
KINDS = ("f16", "memory64", "gc")
EXPECTED = {"f16": 2.0, "memory64": 7.0, "gc": 7.0}


def kernel(kind: str) -> KernelConfig:
    """Kernel 1, one READ_WRITE slot: F16 for f16, F32 otherwise (the transfer guests never dispatch it)."""
    etype = ElementType.F16 if kind == "f16" else ElementType.F32
    return KernelConfig(1, "wago_gpu.kernel.inc", "wago_gpu.cpu.inc", [BindingConfig(0, etype, Access.READ_WRITE)],
                        relaxed_float=True)


@dataclass
class StorageResult:
    kind: str
    device: str
    status: int  # run()'s return: 0, or the status of the first import that failed
    value: float | None  # the element read back after the round trip
    dispatch_status: int | None = None  # f16: 0 GPU, 1 CPU fallback
    outcome: str = ""  # f16: buffer_snapshot().last of the dispatch
    reason_code: str = ""
    reason: str = ""
    moved_bytes: tuple[int, int] = (0, 0)  # guest -> buffer, buffer -> guest (snapshot totals)
    leftover_bytes: int = 0  # runtime_buffer_bytes after the instance closed

    @property
    def ok(self) -> bool:
        return (self.status == 0 and self.value == EXPECTED[self.kind] and self.leftover_bytes == 0
                and (self.kind != "f16" or self.dispatch_status in (0, 1)))

    @property
    def path(self) -> str:
        if self.dispatch_status is None:
            return "no dispatch (transfers only)"
        if self.dispatch_status == 0:
            return "GPU"
        if self.dispatch_status == 1:
            return f"CPU fallback ({record_reason(self.reason_code, self.reason)})"
        return f"error {status_name(self.dispatch_status)}"


def run(kind: str = "f16", cpu: bool = False, require_gpu: bool = False,
        allow_software_adapter: bool = False) -> StorageResult:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    config = Config(kernels=[kernel(kind)], disabled=cpu, require_gpu=require_gpu,
                    allow_software_adapter=allow_software_adapter)
    with Host(config) as host:
        inst = host.instantiate(host.compile((HERE / f"{kind}.wat").read_text()))
        status = inst.call("run")
        out = StorageResult(kind, device_line(host), status, None)
        if kind == "f16":
            last = host.buffer_snapshot().last  # still the dispatch: nothing recorded after it
            if last.import_name == "dispatch":
                out.outcome, out.reason_code, out.reason = last.outcome, last.reason_code, last.reason
                out.dispatch_status = last.status
        if status == 0:
            out.value = inst.call("value")
        if kind == "f16" and status == 0:
            freed = inst.call("free")
            out.status = freed
        totals = host.buffer_snapshot().totals
        out.moved_bytes = (totals.guest_set_bytes, totals.guest_copy_bytes)
        inst.close()
        out.leftover_bytes = host.buffer_snapshot().runtime_buffer_bytes
        return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.storage")
    parser.add_argument("--kind", choices=KINDS, default="f16", help="which storage to show (default f16)")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if args.require_gpu and args.kind != "f16":
        parser.error(f"--require-gpu needs --kind f16 ({args.kind} dispatches nothing)")
    try:
        out = run(args.kind, args.cpu, args.require_gpu, args.allow_software_adapter)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out.device)
    if out.kind == "f16":
        print(f"F16 dispatch status {out.dispatch_status} (0=GPU, 1=CPU): {out.path}")
    else:
        print(f"{out.kind}: {out.path}; {out.moved_bytes[0]} bytes set, {out.moved_bytes[1]} bytes copied back")
    if out.status != 0:
        print(f"error: the guest's run() failed with {status_name(out.status)}", file=sys.stderr)
        return 1
    if not out.ok:
        print(f"error: {out.kind} result {out.value} (expected {EXPECTED[out.kind]:g}), "
              f"{out.leftover_bytes} buffer bytes left", file=sys.stderr)
        return 1
    print(f"{out.kind} result verified: {out.value:g}")
    if args.require_gpu and out.dispatch_status != 0:
        print("error: --require-gpu but the kernel ran on the CPU", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
