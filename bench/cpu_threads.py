"""Where a threaded CPU kernel's time goes: one dispatch's phases on 1..N threads, for both
schedules (the Wasm queue and the Python pieces it replaced), side by side in one run.

python -m bench.cpu_threads [--sizes 1000000,10000000] [--threads 1,2,4,8,16] [--kernels poly32,hash]
                            [--schedules queue,pieces] [--mandelbrot 2560x1440] [--repeats 7] > FILE.jsonl

Kernels poly32 and hash are bench/cpu_kernels.py's (CPU-only hosts, buffers resident in the shared
accessor memory, so a dispatch's transfers are the staging copies alone); Mandelbrot is
examples/guests/mandelbrot.wasm's render_loop (one dispatch of its loop kernel). One JSONL record
per (kernel, size, schedule, threads):
  dispatch_ms  median wall time of the guest's dispatch call, untraced (what the speed-up uses);
  speedup      the 1-thread dispatch's median over this one; efficiency = speedup / threads;
  phase_us     medians over traced repeats (host/cputhreads.TRACE): stage (the restore copies of
               the written buffers), ready (settling the last run, worker stores armed and looked
               up), launch (submitting to the pool), wake_first/wake_last (a worker's start after
               launch), main (this thread's share), finish_skew (the last worker's return to Python
               after this thread's share ended), join (this thread's share ended -> every element
               done), commit (versions, or the restore), outside (the dispatch call less the run:
               checks, residency, snapshot);
  share_min/share_max  the smallest and largest fraction of the elements one thread ran.
Every output is checked outside the timers, bit for bit against the 1-thread host's.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from bench.cpu_kernels import KERNELS, guest_wat, kernel_config
from bench.mandelbrot import GUEST as MANDEL_GUEST, MANDEL, STEP
from wagogpu import Config, Host
from wagogpu.host import cputhreads
from wagogpu.host.cputhreads import Schedule, Trace

Event = tuple[str, int, int, int]


def phases(events: list[Event], dispatch_ns: int) -> dict[str, float]:
    """One traced dispatch's phases in microseconds (see the module docstring)."""
    at = {e: ns for e, w, ns, _ in events if w == 0}
    wakes = [ns for e, w, ns, _ in events if e == "wake" and w > 0]
    finishes = [ns for e, w, ns, _ in events if e == "finish" and w > 0]
    launched = at.get("launched", at.get("staged", 0))
    main_done = at.get("main_done", at.get("joined", 0))
    us = lambda a, b: (b - a) / 1e3  # noqa: E731
    out = {"stage": us(at["begin"], at["staged"]), "ready": us(at["staged"], at.get("ready", at["staged"])),
           "launch": us(at.get("ready", at["staged"]), launched), "main": us(launched, main_done),
           "join": us(main_done, at["joined"]), "commit": us(at["joined"], at["end"]),
           "outside": dispatch_ns / 1e3 - us(at["begin"], at["end"])}
    if wakes:
        out["wake_first"], out["wake_last"] = us(launched, min(wakes)), us(launched, max(wakes))
        out["finish_skew"] = us(main_done, max(finishes)) if finishes else 0.0
    return out


def shares(events: list[Event], count: int) -> tuple[float, float]:
    done: dict[int, int] = {}
    for e, w, _ns, elements in events:
        if e in ("piece", "finish"):
            done[w] = done.get(w, 0) + elements
    if not any(done.values()):
        return 1.0, 1.0
    return min(done.values()) / count, max(done.values()) / count


def measure(call: Callable[[], Any], host: Host, repeats: int,
            count: int) -> tuple[list[float], dict[str, float], tuple[float, float]]:
    """Untraced dispatch times, then the median phases and shares of as many traced repeats (each
    traced one waits, after its timer, for the pool's threads to be back, so their finish counts)."""
    call()  # warm: stores, instances, pages
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - t0) / 1e9)
    per: dict[str, list[float]] = {}
    share_lists: list[tuple[float, float]] = []
    pool = host.context.cpu_pool
    for _ in range(repeats):
        if pool is not None:
            pool.settle()  # the last run's threads back first: their finish belongs to it
        cputhreads.TRACE = trace = Trace()
        t0 = time.perf_counter_ns()
        call()
        elapsed = time.perf_counter_ns() - t0
        pool = host.context.cpu_pool
        if pool is not None:
            pool.settle()
        cputhreads.TRACE = None
        for k, v in phases(trace.events, elapsed).items():
            per.setdefault(k, []).append(v)
        share_lists.append(shares(trace.events, count))
    med = {k: round(statistics.median(v), 1) for k, v in per.items()}
    return times, med, (min(s for s, _ in share_lists), max(s for _, s in share_lists))


def hosts_for(threads: list[int], kernels: list[Any]) -> dict[int, Host]:
    return {t: Host(Config(kernels=kernels, disabled=True, cpu_kernels=True, cpu_threads=t)) for t in threads}


def emit_one(base: dict[str, Any], schedule: Schedule, t: int, times: list[float], ph: dict[str, float],
             sh: tuple[float, float], one: float, ok: bool) -> float:
    med = statistics.median(times)
    one = one or med
    emit({**base, "schedule": schedule.value, "threads": t, "dispatch_ms": med * 1e3, "min_ms": min(times) * 1e3,
          "runs": len(times), "speedup": one / med, "efficiency": one / med / t, "phase_us": ph,
          "share_min": round(sh[0], 4), "share_max": round(sh[1], 4), "checked": ok})
    return one


def elementwise(names: list[str], sizes: list[int], threads: list[int], schedules: list[Schedule], repeats: int,
                env: dict[str, Any]) -> int:
    hosts = hosts_for(threads, [kernel_config(KERNELS[n][0], n) for n in names])
    failures = 0
    try:
        insts = {t: h.instantiate(h.compile(guest_wat())) for t, h in hosts.items()}
        for n in sizes:
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            for inst in insts.values():
                inst.call("reserve", n)
                inst.memory_view()[:4 * n].view(np.float32)[:] = x
                assert inst.call("setup", n) == 0
            for name in names:
                kernel_id = KERNELS[name][0]
                base = {"bench": "cpu_threads", "kernel": name, "elements": n, **env}
                for schedule in schedules:
                    cputhreads.SCHEDULE = schedule
                    one, want = 0.0, None
                    for t, inst in insts.items():
                        call = lambda inst=inst: inst.call("dispatch", kernel_id, n)  # noqa: E731
                        times, ph, sh = measure(call, hosts[t], repeats, n)
                        last = hosts[t].buffer_snapshot().last_dispatch
                        assert inst.call("fetch", n) == 0
                        got = inst.memory_view()[4 * n:8 * n].tobytes()
                        want = got if want is None else want
                        ok = last.status == 0 and str(last.outcome) == "CPU" and got == want
                        failures += not ok
                        one = emit_one(base, schedule, t, times, ph, sh, one, ok)
            for inst in insts.values():
                assert inst.call("teardown") == 0
    finally:
        cputhreads.SCHEDULE = Schedule.QUEUE
        for h in hosts.values():
            h.close()
    return failures


def mandelbrot(sizes: list[tuple[int, int]], threads: list[int], schedules: list[Schedule], repeats: int,
               env: dict[str, Any]) -> int:
    hosts = hosts_for(threads, [STEP, MANDEL])
    failures = 0
    wasm = MANDEL_GUEST.read_bytes()
    try:
        insts = {t: h.instantiate(h.compile(wasm)) for t, h in hosts.items()}
        for width, height in sizes:
            n = width * height
            base = {"bench": "cpu_threads", "kernel": "mandelbrot", "elements": n, "width": width, "height": height,
                    **env}
            for schedule in schedules:
                cputhreads.SCHEDULE = schedule
                one, want = 0.0, None
                for t, inst in insts.items():
                    call = lambda inst=inst: inst.call("render_loop", width, height, 64)  # noqa: E731
                    times, ph, sh = measure(call, hosts[t], repeats, n)
                    last = hosts[t].buffer_snapshot().last_dispatch
                    got = inst.read_memory(inst.call("counts_ptr"), 4 * n)
                    want = got if want is None else want
                    ok = last.status == 0 and str(last.outcome) == "CPU" and got == want
                    failures += not ok
                    one = emit_one(base, schedule, t, times, ph, sh, one, ok)
    finally:
        cputhreads.SCHEDULE = Schedule.QUEUE
        for h in hosts.values():
            h.close()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--kernels", default="poly32,hash")
    parser.add_argument("--schedules", default="queue,pieces")
    parser.add_argument("--mandelbrot", default="2560x1440", help="WxH,...; empty: skip")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    threads = sorted({1, *(int(t) for t in args.threads.split(","))})
    schedules = [Schedule(s) for s in args.schedules.split(",")]
    env = {**environment(), "cores": cputhreads.cpu_thread_count(0)}
    failures = elementwise(args.kernels.split(","), [int(s) for s in args.sizes.split(",")], threads, schedules,
                           args.repeats, env)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.mandelbrot.split(",") if s]
    failures += mandelbrot([(w, h) for w, h in sizes], threads, schedules, args.repeats, env)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
