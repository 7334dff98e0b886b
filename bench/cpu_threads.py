"""Where a threaded CPU kernel's time goes: one dispatch's phases on 1..N threads, for both
schedules (the Wasm queue and the Python pieces it replaced), side by side in one run.

python -m bench.cpu_threads [--sizes 1000000,10000000] [--threads 1,2,4,8,16] [--kernels poly32,hash]
                            [--schedules queue,pieces] [--spins 0,100000] [--chunking 16/4096,64/1024]
                            [--mandelbrot 2560x1440]
                            [--repeats 7] > FILE.jsonl

Kernels poly32 and hash are bench/cpu_kernels.py's (CPU-only hosts, buffers resident in the shared
accessor memory, so a dispatch's transfers are the staging copies alone); Mandelbrot is
examples/guests/mandelbrot.wasm's render_loop (one dispatch of its loop kernel). One JSONL record
per (kernel, size, schedule, spin_looks, threads):
  dispatch_ms  median wall time of the guest's dispatch call, untraced (what the speed-up uses);
  speedup      the 1-thread dispatch's median over this one; efficiency = speedup / threads;
  restarted_ms the same dispatch with the pool recalled before each (its threads started from
               Python, as when they have waited LINGER_NS for nothing), restarted_speedup;
  started      the pool threads a dispatch started (the others were waiting in Wasm for it);
  main_share   the fraction of the elements the dispatching thread ran itself (queue);
  phase_us     medians over traced warm repeats (host/cputhreads.TRACE): stage (the restore copies
               of the written buffers), ready (the pool's lock, the stores prepared), launch
               (starting the threads not already waiting), wake_first/wake_last (a started
               thread's first Python after launch), main (this thread's lead: publish, its own
               chunks, the wait for the rest; pieces: its share), join (its end -> every element
               done), commit (versions, or the restore), run (begin to end: all of the above),
               outside (the timed call less the run: the dispatch's checks, residency and
               snapshot; for Mandelbrot also the guest's own work around its dispatch).
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
from wagogpu.host.cputhreads import SPIN_LOOKS, Schedule, Trace

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
           "run": us(at["begin"], at["end"]), "outside": dispatch_ns / 1e3 - us(at["begin"], at["end"])}
    if wakes:
        out["wake_first"], out["wake_last"] = us(launched, min(wakes)), us(launched, max(wakes))
        out["finish_skew"] = us(main_done, max(finishes)) if finishes else 0.0
    return out


def main_share(events: list[Event], count: int) -> float:
    """The fraction of the elements the dispatching thread ran itself (queue schedule)."""
    return sum(elements for e, w, _ns, elements in events if e == "main_done" and w == 0) / count


def started(events: list[Event]) -> int:
    """The pool threads a traced dispatch started (the others were waiting in Wasm for it)."""
    return sum(elements for e, w, _ns, elements in events if e == "launched" and w == 0)


def _once(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - t0) / 1e9


def measure_all(calls: dict[int, Callable[[], Any]], hosts: dict[int, Host], repeats: int,
                count: int) -> dict[int, dict[str, Any]]:
    """Per thread count: warm dispatch times (after an untimed one, so the pool's threads wait in
    Wasm for it as in a loop), the same with the pool recalled first (every thread started from
    Python; the recall untimed), and the median phases of traced warm dispatches. The thread
    counts take turns in every repeat, so a change in the host's speed meets them all alike."""
    got: dict[int, dict[str, Any]] = {t: {"times": [], "restarted": [], "per": {}, "starts": [], "mains": []}
                                      for t in calls}
    for call in calls.values():
        call()  # stores, instances, pages
    for _ in range(repeats):
        for t, call in calls.items():
            g, pool = got[t], hosts[t].context.cpu_pool
            call()
            g["times"].append(_once(call))
            if pool is not None:
                with pool.lock:
                    pool.settle()
                g["restarted"].append(_once(call))
                call()
            cputhreads.TRACE = trace = Trace()
            elapsed = _once(call)
            cputhreads.TRACE = None
            for k, v in phases(trace.events, int(elapsed * 1e9)).items():
                g["per"].setdefault(k, []).append(v)
            g["starts"].append(started(trace.events))
            g["mains"].append(main_share(trace.events, count))
    return {t: {"times": g["times"], "restarted": g["restarted"],
                "phase_us": {k: round(statistics.median(v), 1) for k, v in g["per"].items()},
                "started": statistics.median(g["starts"]), "main_share": round(statistics.median(g["mains"]), 4)}
            for t, g in got.items()}


def hosts_for(threads: list[int], kernels: list[Any]) -> dict[int, Host]:
    return {t: Host(Config(kernels=kernels, disabled=True, cpu_kernels=True, cpu_threads=t)) for t in threads}


#: The schedule, its pool threads' SPIN_LOOKS (queue), and its chunking: CHUNKS_PER_THREAD, MIN_CHUNK.
Variant = tuple[Schedule, int, int, int]
DEFAULT_VARIANT: Variant = (Schedule.QUEUE, SPIN_LOOKS, cputhreads.CHUNKS_PER_THREAD, cputhreads.MIN_CHUNK)


def use(variant: Variant, hosts: dict[int, Host]) -> None:
    """Every later run on `variant`: each pool's threads back first (they read SPIN_LOOKS when started)."""
    cputhreads.SCHEDULE, cputhreads.SPIN_LOOKS, cputhreads.CHUNKS_PER_THREAD, cputhreads.MIN_CHUNK = variant
    for h in hosts.values():
        pool = h.context.cpu_pool
        if pool is not None:
            with pool.lock:
                pool.settle()


def emit_one(base: dict[str, Any], variant: Variant, t: int, m: dict[str, Any], one: float, ok: bool) -> float:
    schedule, spins, per_thread, min_chunk = variant
    times, restarted = m["times"], m["restarted"]
    med = statistics.median(times)
    one = one or med
    cold = statistics.median(restarted) if restarted else med
    emit({**base, "schedule": schedule.value, "spin_looks": spins, "chunks_per_thread": per_thread,
          "min_chunk": min_chunk, "threads": t, "dispatch_ms": med * 1e3, "min_ms": min(times) * 1e3,
          "runs": len(times), "speedup": one / med, "efficiency": one / med / t, "restarted_ms": cold * 1e3,
          "restarted_speedup": one / cold, "phase_us": m["phase_us"], "started": m["started"], "main_share": m["main_share"],
          "checked": ok})
    return one


def elementwise(names: list[str], sizes: list[int], threads: list[int], schedules: list[Variant], repeats: int,
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
                    use(schedule, hosts)
                    one, want = 0.0, None
                    calls = {t: (lambda inst=inst: inst.call("dispatch", kernel_id, n)) for t, inst in insts.items()}
                    measured = measure_all(calls, hosts, repeats, n)
                    for t, inst in insts.items():
                        m = measured[t]
                        last = hosts[t].buffer_snapshot().last_dispatch
                        assert inst.call("fetch", n) == 0
                        got = inst.memory_view()[4 * n:8 * n].tobytes()
                        want = got if want is None else want
                        ok = last.status == 0 and str(last.outcome) == "CPU" and got == want
                        failures += not ok
                        one = emit_one(base, schedule, t, m, one, ok)
            for inst in insts.values():
                assert inst.call("teardown") == 0
    finally:
        use(DEFAULT_VARIANT, hosts)
        for h in hosts.values():
            h.close()
    return failures


def mandelbrot(sizes: list[tuple[int, int]], threads: list[int], schedules: list[Variant], repeats: int,
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
                use(schedule, hosts)
                one, want = 0.0, None
                calls = {t: (lambda inst=inst: inst.call("render_loop", width, height, 64)) for t, inst in insts.items()}
                measured = measure_all(calls, hosts, repeats, n)
                for t, inst in insts.items():
                    m = measured[t]
                    last = hosts[t].buffer_snapshot().last_dispatch
                    got = inst.read_memory(inst.call("counts_ptr"), 4 * n)
                    want = got if want is None else want
                    ok = last.status == 0 and str(last.outcome) == "CPU" and got == want
                    failures += not ok
                    one = emit_one(base, schedule, t, m, one, ok)
    finally:
        use(DEFAULT_VARIANT, hosts)
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
    parser.add_argument("--spins", default=str(SPIN_LOOKS), help="the queue's SPIN_LOOKS values to compare, e.g. 0,100000")
    parser.add_argument("--chunking", default=f"{DEFAULT_VARIANT[2]}/{DEFAULT_VARIANT[3]}",
                        help="the queue's CHUNKS_PER_THREAD/MIN_CHUNK pairs to compare, e.g. 16/4096,64/1024")
    args = parser.parse_args(argv)
    threads = sorted({1, *(int(t) for t in args.threads.split(","))})
    spins = [int(v) for v in args.spins.split(",")]
    chunking = [tuple(int(v) for v in pair.split("/")) for pair in args.chunking.split(",")]
    schedules: list[Variant] = [(Schedule(s), n, per, least) for s in args.schedules.split(",")
                                for n in (spins if Schedule(s) is Schedule.QUEUE else [0])
                                for per, least in (chunking if Schedule(s) is Schedule.QUEUE else [DEFAULT_VARIANT[2:]])]
    env = {**environment(), "cores": cputhreads.cpu_thread_count(0)}
    failures = elementwise(args.kernels.split(","), [int(s) for s in args.sizes.split(",")], threads, schedules,
                           args.repeats, env)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.mandelbrot.split(",") if s]
    failures += mandelbrot([(w, h) for w, h in sizes], threads, schedules, args.repeats, env)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
