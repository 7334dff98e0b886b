"""The fresh-input round trip at large sizes, step by step: set, dispatch and copy-back as separate
guest calls and as one call, with the device layer's own sub-timings. JSONL, medians.

python -m bench.fresh_path [--n 10000000] [--kernel twice] [--reps 15] [--allow-software-adapter]

Each variant is one TransferTuning of the host's large-transfer paths, on its own host; the variants
are alternated in blocks inside this one process so that they see the same machine state; results
are checked after the timers. copy_threads_x2 doubles the thread count of every large host copy
(memcopy.copy_threads) while its blocks run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from bench.buffer_bench import BenchError, check, kernel_configs
from bench.common import CallTimer, emit, environment
from examples.progress import Progress
from bench.host_overhead import device_layer
from bench.work_guest import KERNEL_IDS, input_values, reference, wat
from wagogpu import Config, Host, memcopy
from wagogpu.buffers import TransferTuning
from wagogpu.buffers import residency as residency_module
from wagogpu.host import transfers as transfers_module

OFF = 1 << 62
_copy_threads = memcopy.copy_threads


def _twice_the_threads(default: int = 8) -> int:
    return _copy_threads(2 * default)


#: (name, tuning, doubles the host copies' threads); the first is the default configuration.
VARIANTS: list[tuple[str, TransferTuning, bool]] = [
    ("default", TransferTuning(), False),
    ("no_prestage", TransferTuning(prestage_min_bytes=OFF), False),
    ("no_park", TransferTuning(park_min_bytes=OFF), False),
    ("no_in_place", TransferTuning(in_place_outputs=False), False),
    ("set_threads_8_8", TransferTuning(set_copy_threads=(8, 8)), False),
    ("set_threads_4_8", TransferTuning(set_copy_threads=(4, 8)), False),
    ("set_threads_8_4", TransferTuning(set_copy_threads=(8, 4)), False),
    ("set_threads_12_12", TransferTuning(set_copy_threads=(12, 12)), False),
    ("set_threads_4_4", TransferTuning(set_copy_threads=(4, 4)), False),
    ("from_4_mib", TransferTuning(prestage_min_bytes=4 << 20, park_min_bytes=4 << 20), False),
    ("copy_threads_x2", TransferTuning(), True),
    ("readback_pieces_4", TransferTuning(readback_pieces=4), False),
    ("readback_pieces_8", TransferTuning(readback_pieces=8), False),
    ("none_of_them", TransferTuning(prestage_min_bytes=OFF, park_min_bytes=OFF, in_place_outputs=False), False),
]


@contextmanager
def _copy_threads_doubled(on: bool) -> Iterator[None]:
    memcopy.copy_threads = _twice_the_threads if on else _copy_threads
    try:
        yield
    finally:
        memcopy.copy_threads = _copy_threads


@dataclass
class Variant:
    """One variant's host and guest, and what its steps measured."""

    name: str
    tuning: TransferTuning
    more_threads: bool
    host: Host
    inst: Any
    mem: np.ndarray
    rows: dict[str, list[float]] = field(default_factory=dict)
    allocations: list[int] = field(default_factory=list)


def open_variant(name: str, tuning: TransferTuning, more_threads: bool, config: Config, n: int,
                 x: np.ndarray) -> Variant:
    host = Host(config, tuning=tuning)
    inst = host.instantiate(host.compile(wat()))
    inst.call("grow_to", 12 * n // 65536 + 2)
    mem = inst.memory_view().view(np.float32)
    mem[:n] = x
    assert inst.call("setup", n) == 0
    return Variant(name, tuning, more_threads, host, inst, mem)


def _device_timing(dev: Any, name: str) -> dict[str, float]:
    """The device layer's own sub-timings of its last upload or read, where it keeps them."""
    return dict(getattr(dev, name, None) or {})


def one_rep(v: Variant, k: int, n: int, timer: CallTimer, breakdown: bool) -> tuple[list[tuple[str, float]], int]:
    """set, dispatch and copy-back as separate calls, then the one-call round trip; statuses checked."""
    inst, dev, mem = v.inst, v.host.device, v.mem
    mem[2 * n:3 * n] = 0
    t0 = time.perf_counter()
    timer.take()
    s1 = inst.call("upload", n)
    t1 = time.perf_counter()
    in_set = timer.take()
    for name in ("last_upload_timing", "last_read_timing"):  # what this call's steps leave there
        if hasattr(dev, name):
            setattr(dev, name, {})
    t1b = time.perf_counter()
    s2 = inst.call("dispatch", k, n)
    t2 = time.perf_counter()
    up = _device_timing(dev, "last_upload_timing")
    in_dispatch = timer.take()
    allocs = dev.stats.allocations_total
    t2b = time.perf_counter()
    s3 = inst.call("download", n, 8 * n)
    t3 = time.perf_counter()
    rd = _device_timing(dev, "last_read_timing")
    in_copy_back = timer.take()
    allocs = dev.stats.allocations_total - allocs
    mem[2 * n:3 * n] = 0
    t4 = time.perf_counter()
    s4 = inst.call("sample", k, n)
    t5 = time.perf_counter()
    if s1 or s2 or s3 or s4:
        raise SystemExit(f"{v.name}: statuses {s1} {s2} {s3} {s4}")
    steps = (("set", t1 - t0, in_set), ("dispatch", t2 - t1b, in_dispatch), ("copy_back", t3 - t2b, in_copy_back))
    row = [*((step, total) for step, total, _ in steps), ("steps_total", sum(total for _, total, _ in steps)),
           ("one_call_total", t5 - t4), *(("up_" + a, b) for a, b in up.items()),
           *(("rd_" + a, b) for a, b in rd.items() if a != "parts")]
    if breakdown:
        row += [(f"{step}_in_{label}", spent) for step, _, parts in steps for label, spent in parts.items()]
        row += [(f"{step}_in_host", total - sum(parts.values())) for step, total, parts in steps]
    return row, allocs


def measure(variants: list[Variant], kname: str, n: int, x: np.ndarray, args: argparse.Namespace,
            timer: CallTimer, progress: Progress) -> bool:
    """Every variant, blocks alternated; True when every copied-back output was right."""
    k = KERNEL_IDS[kname]
    want = reference(kname, x)
    ok = True
    for block in range(args.blocks):
        for v in variants:
            progress.step(f"{kname} block {block + 1} {v.name}")
            with _copy_threads_doubled(v.more_threads):
                for _ in range(2):  # settle hints for this setting
                    v.inst.call("sample", k, n)
                for _ in range(args.reps):
                    row, allocs = one_rep(v, k, n, timer, args.breakdown)
                    for key, value in row:
                        v.rows.setdefault(key, []).append(value)
                    v.allocations.append(allocs)
                    ok &= correct(kname, v.mem[2 * n:3 * n], want)  # checked outside the timers
    return ok


def correct(kname: str, got: np.ndarray, want: np.ndarray) -> bool:
    try:
        check(kname, got, want)
        return True
    except BenchError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--kernel", action="append", choices=sorted(KERNEL_IDS))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--variant", action="append", choices=[v for v, _, _ in VARIANTS])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--breakdown", action="store_true",
                        help="also split each step into device layer, host copies and the rest")
    args = parser.parse_args(argv)
    n = args.n
    x = input_values(n)
    config = Config(kernels=kernel_configs(), allow_software_adapter=args.allow_software_adapter,
                    require_gpu=not args.allow_software_adapter)
    variants = [open_variant(name, tuning, more, config, n, x) for name, tuning, more in VARIANTS
                if not args.variant or name in args.variant]
    info = variants[0].host.device.info
    adapter = f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"
    ok = True
    kernels = args.kernel or ["twice", "polynomial"]
    progress = Progress(len(kernels) * args.blocks * len(variants), "fresh_path")
    for kname in kernels:
        first = time.perf_counter()
        status = variants[0].inst.call("sample", KERNEL_IDS[kname], n)
        first = time.perf_counter() - first
        ok &= status == 0 and correct(kname, variants[0].mem[2 * n:3 * n], reference(kname, x))
        for v in variants:
            v.rows.clear()
            v.allocations.clear()
        targets = [(residency_module, "copy_bytes", "copy"), (residency_module, "copy_many", "copy"),
                   (transfers_module, "copy_bytes", "copy")]
        timer = CallTimer([t for v in variants for t in device_layer(v.host.device)] + targets)
        if args.breakdown:
            timer.start()
        ok &= measure(variants, kname, n, x, args, timer, progress)
        if args.breakdown:
            timer.stop()
        for v in variants:
            emit({"bench": "fresh_path", "kernel": kname, "elements": n, "variant": v.name,
                  "first_call_ms": round(first * 1e3, 3), "checked": ok,
                  **{f"{key}_ms": round(statistics.median(vals) * 1e3, 4) for key, vals in v.rows.items()},
                  "copy_back_allocations_median": statistics.median(v.allocations),
                  "samples": len(v.rows["set"]), "adapter": adapter, **environment()})
    progress.close()
    for v in variants:
        v.host.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
