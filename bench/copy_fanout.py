"""What a large host copy's fan-out to threads costs: wagogpu.memcopy's helper crew beside a
ThreadPoolExecutor handed the same pieces, in one run. JSONL, medians; host memory only.

python -m bench.copy_fanout [--sizes-mb 10,40] [--threads 4,8,16] [--repeats 25] > FILE.jsonl

Records:
  copy_fanout  per (size, threads): crew_ms (memcopy.copy_bytes) and pool_ms (the pieces of
               memcopy's own split, the first on the calling thread and the rest submitted to a
               ThreadPoolExecutor, then each result waited for: how memcopy fanned out before),
               the two taking turns in every repeat; pool_over_crew is their ratio.
  fanout_noop  per helper count: the same two fan-outs of 64-byte pieces (the hand-over alone).
Every copy's destination is checked against its source after the timers.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from bench.common import emit, environment
from wagogpu import memcopy

Piece = tuple[int, int, int]


def pool_copy(pool: ThreadPoolExecutor, pieces: list[Piece]) -> None:
    futures = [pool.submit(ctypes.memmove, *p) for p in pieces[1:]]
    ctypes.memmove(*pieces[0])
    for f in futures:
        f.result()


def turns(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds of each call, the calls taking turns in every repeat (after 3 untimed rounds)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(repeats + 3):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            if i >= 3:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="10,40")
    parser.add_argument("--threads", default="4,8,16")
    parser.add_argument("--repeats", type=int, default=25)
    args = parser.parse_args(argv)
    env = {**environment(), "cores": os.cpu_count()}
    pool = ThreadPoolExecutor(max_workers=memcopy.MAX_HELPERS + 1, thread_name_prefix="bench-pool")
    largest = max(int(s) for s in args.sizes_mb.split(",")) << 20
    src = np.random.default_rng(1).integers(0, 1 << 32, largest // 4, dtype=np.uint32)
    crew_dst, pool_dst = np.zeros_like(src), np.ones_like(src)
    failures = 0
    for mb in (int(s) for s in args.sizes_mb.split(",")):
        n = mb << 20
        for threads in (int(t) for t in args.threads.split(",")):
            crew_dst[:] = 0
            pool_dst[:] = 0
            pieces = memcopy._pieces(pool_dst.ctypes.data, src.ctypes.data, n, threads)
            got = turns({"crew": lambda: memcopy.copy_bytes(crew_dst.ctypes.data, src.ctypes.data, n, threads),
                         "pool": lambda: pool_copy(pool, pieces)}, args.repeats)
            ok = bool(np.array_equal(crew_dst[:n // 4], src[:n // 4]) and np.array_equal(pool_dst[:n // 4], src[:n // 4]))
            failures += not ok
            emit({"bench": "copy_fanout", "record": "copy_fanout", "mb": mb, "threads": threads, "pieces": len(pieces),
                  "crew_ms": got["crew"] * 1e3, "pool_ms": got["pool"] * 1e3, "pool_over_crew": got["pool"] / got["crew"],
                  "checked": ok, **env})
    for helpers in (1, 3, 7, memcopy.MAX_HELPERS):
        tiny = [(pool_dst.ctypes.data + 64 * i, src.ctypes.data + 64 * i, 64) for i in range(helpers + 1)]
        got = turns({"crew": lambda: memcopy._crew.copy(list(tiny)), "pool": lambda: pool_copy(pool, tiny)},
                    8 * args.repeats)
        emit({"bench": "copy_fanout", "record": "fanout_noop", "helpers": helpers, "crew_us": got["crew"] * 1e6,
              "pool_us": got["pool"] * 1e6, **env})
    pool.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
