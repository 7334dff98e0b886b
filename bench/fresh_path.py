"""The fresh-input round trip at large sizes, step by step: set, dispatch and copy-back as separate
guest calls and as one call, with the device layer's own sub-timings. JSONL, medians.

python -m bench.fresh_path [--n 10000000] [--kernel twice] [--reps 15] [--allow-software-adapter]

Each variant is one setting of the host's large-transfer switches, alternated in blocks inside this
one process so that the variants see the same machine state; results are checked after the timers.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from bench.buffer_bench import BenchError, check, kernel_configs
from bench.common import CallTimer, emit, environment
from bench.host_overhead import device_layer
from bench.work_guest import KERNEL_IDS, input_values, reference, wat
from wagogpu import Config, Host, buffers, imports, memcopy, residency

OFF = 1 << 62
_release_idle = buffers.InstanceBuffers.release_idle


def _evict_everything(self: buffers.InstanceBuffers, need: int | None = None) -> int:
    """The eviction before this change: any shortfall drops every idle resource."""
    return _release_idle(self, None)


_copy_threads = memcopy.copy_threads


def _twice_the_threads(default: int = 8) -> int:
    return _copy_threads(2 * default)


#: (name, [(object, attribute, value)]); the first is the default configuration.
VARIANTS: list[tuple[str, list[tuple[object, str, object]]]] = [
    ("default", []),
    ("no_prestage", [(residency, "PRESTAGE_MIN_BYTES", OFF)]),
    ("no_park", [(residency, "PARK_MIN_BYTES", OFF)]),
    ("no_in_place", [(residency, "IN_PLACE_OUTPUTS", False)]),
    ("no_in_place_evict_all", [(residency, "IN_PLACE_OUTPUTS", False),
                               (buffers.InstanceBuffers, "release_idle", _evict_everything)]),
    ("set_threads_8_8", [(residency, "SET_COPY_THREADS", (8, 8))]),
    ("from_4_mib", [(residency, "PRESTAGE_MIN_BYTES", 4 << 20), (residency, "PARK_MIN_BYTES", 4 << 20)]),
    ("copy_threads_x2", [(memcopy, "copy_threads", _twice_the_threads)]),

    ("none_of_them", [(residency, "PRESTAGE_MIN_BYTES", OFF), (residency, "PARK_MIN_BYTES", OFF),
                      (residency, "IN_PLACE_OUTPUTS", False),
                      (buffers.InstanceBuffers, "release_idle", _evict_everything)]),
]
_SAVED = {(id(obj), attr): (obj, attr, getattr(obj, attr)) for _, sw in VARIANTS for obj, attr, _ in sw}


def _apply(switches: list[tuple[object, str, object]]) -> None:
    for obj, attr, value in _SAVED.values():
        setattr(obj, attr, value)
    for obj, attr, value in switches:
        setattr(obj, attr, value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--kernel", action="append", choices=sorted(KERNEL_IDS))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--variant", action="append", choices=[v for v, _ in VARIANTS])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--breakdown", action="store_true",
                        help="also split each step into device layer, host copies and the rest")
    args = parser.parse_args(argv)
    n = args.n
    host = Host(Config(kernels=kernel_configs(), allow_software_adapter=args.allow_software_adapter,
                       require_gpu=not args.allow_software_adapter))
    inst = host.instantiate(host.compile(wat()))
    inst.call("grow_to", 12 * n // 65536 + 2)
    x = input_values(n)
    mem = inst.memory_view().view(np.float32)
    mem[:n] = x
    assert inst.call("setup", n) == 0
    dev = host.device
    timer = CallTimer(device_layer(dev) + [(residency, "copy_bytes", "copy"), (residency, "copy_many", "copy"),
                                           (imports, "copy_bytes", "copy")])
    if args.breakdown:
        timer.start()
    info = dev.info
    adapter = f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"
    ok = True

    def correct(got: np.ndarray, want: np.ndarray) -> bool:
        try:
            check(kname, got, want)
            return True
        except BenchError:
            return False
    for kname in args.kernel or ["twice", "polynomial"]:
        k = KERNEL_IDS[kname]
        want = reference(kname, x)
        t0 = time.perf_counter()
        status = inst.call("sample", k, n)
        first = time.perf_counter() - t0
        ok &= status == 0 and correct(mem[2 * n:3 * n], want)
        rows: dict[str, dict[str, list[float]]] = {}
        counts: dict[str, list[int]] = {}  # device allocations during each copy-back
        for block in range(args.blocks):
            for vname, switches in VARIANTS:
                if args.variant and vname not in args.variant:
                    continue
                _apply(switches)
                row = rows.setdefault(vname, {})
                for _ in range(2):  # settle hints for this setting
                    inst.call("sample", k, n)
                for _ in range(args.reps):
                    mem[2 * n:3 * n] = 0
                    t0 = time.perf_counter()
                    host._residency.last_set_timing = {}
                    timer.take()
                    s1 = inst.call("upload", n)
                    t1 = time.perf_counter()
                    in_set = timer.take()
                    dev.last_upload_timing = dev.last_read_timing = {}
                    t1b = time.perf_counter()
                    s2 = inst.call("dispatch", k, n)
                    t2 = time.perf_counter()
                    in_dispatch = timer.take()
                    allocs = dev.stats.allocations_total
                    t2b = time.perf_counter()
                    s3 = inst.call("download", n, 8 * n)
                    t3 = time.perf_counter()
                    in_copy_back = timer.take()
                    allocs = dev.stats.allocations_total - allocs
                    up, rd = dev.last_upload_timing, dev.last_read_timing
                    st = host._residency.last_set_timing
                    # Checked outside the timers.
                    ok &= correct(mem[2 * n:3 * n], want)
                    mem[2 * n:3 * n] = 0
                    t4 = time.perf_counter()
                    s4 = inst.call("sample", k, n)
                    t5 = time.perf_counter()
                    if s1 or s2 or s3 or s4:
                        raise SystemExit(f"{kname} {vname}: statuses {s1} {s2} {s3} {s4}")
                    for key, v in (("set", t1 - t0), ("dispatch", t2 - t1b), ("copy_back", t3 - t2b),
                                   ("steps_total", t3 - t2b + t2 - t1b + t1 - t0), ("one_call_total", t5 - t4),
                                   *(("up_" + a, b) for a, b in up.items()),
                                   *(("set_" + a, b) for a, b in st.items()),
                                   *(("rd_" + a, b) for a, b in rd.items() if a != "parts"),
                                   *((f"{step}_in_{label}", spent) for step, parts in (
                                       ("set", in_set), ("dispatch", in_dispatch), ("copy_back", in_copy_back))
                                     for label, spent in parts.items() if args.breakdown),
                                   *((f"{step}_in_host", total - sum(parts.values())) for step, total, parts in (
                                       ("set", t1 - t0, in_set), ("dispatch", t2 - t1b, in_dispatch),
                                       ("copy_back", t3 - t2b, in_copy_back)) if args.breakdown)):
                        row.setdefault(key, []).append(v)
                    counts.setdefault(vname, []).append(allocs)
                    ok &= correct(mem[2 * n:3 * n], want)
        _apply([])
        for vname, row in rows.items():
            emit({"bench": "fresh_path", "kernel": kname, "elements": n, "variant": vname,
                  "first_call_ms": round(first * 1e3, 3), "checked": ok,
                  **{f"{key}_ms": round(statistics.median(v) * 1e3, 4) for key, v in row.items()},
                  "copy_back_allocations_median": statistics.median(counts[vname]),
                  "samples": len(row["set"]), "adapter": adapter, **environment()})
    if args.breakdown:
        timer.stop()
    host.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
