"""Where each step of a fresh round trip spends its time: the time inside each host function and
device-layer entry point, per step (set, dispatch, copy-back), medians. Nested functions count in
both their own and their callers' lines; what no line covers is the guest call and the Python in
between.

python -m bench.step_profile [--n 10000000] [--calls 20] [--no-gc] [--allow-software-adapter]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import numpy as np

from bench.buffer_bench import kernel_configs
from bench.common import CallTimer
from bench.host_overhead import device_layer
from bench.work_guest import KERNEL_IDS, input_values, wat
from wagogpu import Config, Host, buffers, host as hostmod, imports, residency

HOST_FUNCTIONS = [
    (residency.Residency, ("run_dispatch", "_prepare_gpu_copy", "_small_buffers", "_unpark", "set_copy",
                           "keep_stage", "copy_source", "check_loss", "make_cpu_current", "_readback",
                           "release_device_buffer"), "R."),
    (imports.InstanceImports, ("_enter", "_finish", "transfer", "dispatch"), "I."),
    (buffers.InstanceBuffers, ("reserve", "release", "note_cpu_write", "release_idle"), "B."),
    (hostmod.Host, ("_gpu_decision",), "H."),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--no-gc", action="store_true")
    parser.add_argument("--allow-software-adapter", action="store_true")
    args = parser.parse_args(argv)
    if args.no_gc:
        gc.disable()
    host = Host(Config(kernels=kernel_configs(), allow_software_adapter=args.allow_software_adapter,
                       require_gpu=not args.allow_software_adapter))
    inst = host.instantiate(host.compile(wat()))
    n = args.n
    inst.call("grow_to", 12 * n // 65536 + 2)
    inst.memory_view().view(np.float32)[:n] = input_values(n)
    assert inst.call("setup", n) == 0
    k = KERNEL_IDS["twice"]
    targets = [(obj, name, "dev." + name) for obj, name, _ in device_layer(host.device)]
    targets += [(host.device, name, "dev." + name) for name in ("release", "is_lost")]
    targets += [(residency, "copy_bytes", "copy"), (residency, "copy_many", "copy"), (imports, "copy_bytes", "copy")]
    targets += [(cls, name, prefix + name) for cls, names, prefix in HOST_FUNCTIONS for name in names]
    for _ in range(3):
        inst.call("sample", k, n)
    steps = (("set", lambda: inst.call("upload", n)), ("dispatch", lambda: inst.call("dispatch", k, n)),
             ("copy_back", lambda: inst.call("download", n, 8 * n)))
    rows: dict[str, list[float]] = {}
    with CallTimer(targets) as timer:
        for _ in range(args.calls):
            for step, fn in steps:
                timer.take()
                t0 = time.perf_counter()
                if fn():
                    raise SystemExit(f"{step} failed")
                total = time.perf_counter() - t0
                rows.setdefault(f"{step} total", []).append(total)
                for label, spent in timer.take().items():
                    if spent:
                        rows.setdefault(f"{step} {label}", []).append(spent)
    info = host.device.info
    print(f"n={n} calls={args.calls} gc={'off' if args.no_gc else 'on'} adapter={info.name}; {info.backend}")
    for label, v in rows.items():
        print(f"{label:34s} {statistics.median(v) * 1e6:9.1f} us  (n={len(v)})")
    host.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
