"""The fixed cost of one CPU-kernel dispatch: a resident kernel dispatched over and over at small
counts on CPU-only hosts (Config(cpu_kernels=True), 1 and 2 threads), rounds of the hosts
interleaved, beside the same kernel's Wasm loop run directly (the part of a dispatch that is the
kernel itself, cffi's call included).

python -m bench.cpu_dispatch_cost [--kernels twice,hash] [--sizes 1,1024,16384] [--threads 1,2]
                                  [--rounds 9] [--batch 300] [--after-long 1000000] [--label NAME] > FILE.jsonl

With --after-long N (0: skip), one more record per kernel and thread count: a 1,024-element
dispatch timed alone right after an untimed N-element one of the same kernel on the same buffers
(cold_us), and right after an untimed 1,024-element one (warm_us), medians over `rounds` x 20
pairs: what the Python around a dispatch costs once a long Wasm run has left the interpreter cold
(bench/cpu_threads.py's `outside` phase at large counts).

Per (kernel, size, threads) one JSONL record: the guest's dispatch call, median and minimum of the
per-dispatch mean over `rounds` rounds of `batch` dispatches (median_us, min_us), and overhead_us,
the median less the direct Wasm loop's median at that size. Outputs are checked bit for bit against
the 1-thread host's after the timers. Run it on other code with that code first on PYTHONPATH and
this file run as a script (`--label` names the code in the records).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from bench.cpu_kernels import KERNELS, guest_wat, kernel_config
from wagogpu import Config, Host


def checked(host: Host, inst: Any, n: int, want: bytes | None) -> tuple[bool, bytes]:
    """Whether the last dispatch ran as a CPU kernel and its n outputs equal `want` (the first
    host's, when None), and the bytes the next host must match."""
    last = host.buffer_snapshot().last_dispatch
    assert inst.call("fetch", n) == 0
    out = inst.memory_view()[4 * n:8 * n].tobytes()
    want = out if want is None else want
    return last.status == 0 and str(last.outcome) == "CPU" and out == want, want


def per_call(call: Callable[[], Any], batch: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(batch):
        call()
    return (time.perf_counter_ns() - t0) / batch / 1e3


def _timed(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - t0) / 1e3


def after_long(names: list[str], n: int, insts: dict[int, Any], hosts: dict[int, Host], rounds: int,
               env: dict[str, Any]) -> int:
    """The --after-long records (module docstring); outputs checked against the 1-thread host's."""
    failures = 0
    x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
    for inst in insts.values():
        inst.call("reserve", n)
        inst.memory_view()[:4 * n].view(np.float32)[:] = x
        assert inst.call("setup", n) == 0
    for name in names:
        kid = KERNELS[name][0]
        want = None
        for t, inst in insts.items():
            small, long = partial(inst.call, "dispatch", kid, 1024), partial(inst.call, "dispatch", kid, n)
            cold, warm = [], []
            long()
            for _ in range(rounds * 20):
                long()
                cold.append(_timed(small))
                small()
                warm.append(_timed(small))
            long()
            ok, want = checked(hosts[t], inst, n, want)
            failures += not ok
            emit({"bench": "cpu_dispatch_cost", "mode": "after_long", "kernel": name, "elements": 1024,
                  "long_elements": n, "threads": t, **env, "cold_us": statistics.median(cold),
                  "warm_us": statistics.median(warm), "pairs": len(cold), "checked": ok})
    for inst in insts.values():
        assert inst.call("teardown") == 0
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="twice,hash")
    parser.add_argument("--sizes", default="1,1024,16384")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--after-long", type=int, default=1000000)
    parser.add_argument("--label", default="", help="names the code measured (e.g. main, branch) in every record")
    args = parser.parse_args(argv)
    names, sizes = args.kernels.split(","), [int(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    configs = [kernel_config(KERNELS[n][0], n) for n in names]
    hosts = {t: Host(Config(kernels=configs, disabled=True, cpu_kernels=True, cpu_threads=t)) for t in threads}
    direct_host = Host(Config(kernels=configs, disabled=True))
    env = {**environment(), "label": args.label}
    failures = 0
    try:
        wat = guest_wat()
        insts = {t: h.instantiate(h.compile(wat)) for t, h in hosts.items()}
        direct = direct_host.instantiate(direct_host.compile(wat))
        for n in sizes:
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            for inst in [*insts.values(), direct]:
                inst.call("reserve", n)
                inst.memory_view()[:4 * n].view(np.float32)[:] = x
                assert inst.call("setup", n) == 0
            for name in names:
                kid = KERNELS[name][0]
                calls: dict[Any, Callable[[], Any]] = {t: partial(inst.call, "dispatch", kid, n) for t, inst in insts.items()}
                calls["direct"] = partial(direct.call, f"direct_{name}", n)
                got: dict[Any, list[float]] = {k: [] for k in calls}
                for call in calls.values():
                    per_call(call, 20)
                for _ in range(args.rounds):
                    for k, call in calls.items():
                        got[k].append(per_call(call, args.batch))
                base = statistics.median(got["direct"])
                want = None
                for t, inst in insts.items():
                    ok, want = checked(hosts[t], inst, n, want)
                    failures += not ok
                    med = statistics.median(got[t])
                    emit({"bench": "cpu_dispatch_cost", "kernel": name, "elements": n, "threads": t, **env,
                          "median_us": med, "min_us": min(got[t]), "direct_us": base, "overhead_us": med - base,
                          "rounds": args.rounds, "batch": args.batch, "checked": ok})
            for inst in [*insts.values(), direct]:
                assert inst.call("teardown") == 0
        if args.after_long:
            failures += after_long(names, args.after_long, insts, hosts, args.rounds, env)
    finally:
        for h in [*hosts.values(), direct_host]:
            h.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
