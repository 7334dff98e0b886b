"""The fixed cost of one CPU-kernel dispatch: a resident kernel dispatched over and over at small
counts on CPU-only hosts (Config(cpu_kernels=True), 1 and 2 threads), rounds of the hosts
interleaved, beside the same kernel's Wasm loop run directly (the part of a dispatch that is the
kernel itself, cffi's call included).

python -m bench.cpu_dispatch_cost [--kernels twice,hash] [--sizes 1,1024,16384] [--threads 1,2]
                                  [--rounds 9] [--batch 300] [--label NAME] > FILE.jsonl

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
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from bench.cpu_kernels import KERNELS, guest_wat, kernel_config
from wagogpu import Config, Host


def per_call(call: Callable[[], Any], batch: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(batch):
        call()
    return (time.perf_counter_ns() - t0) / batch / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="twice,hash")
    parser.add_argument("--sizes", default="1,1024,16384")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch", type=int, default=300)
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
                calls: dict[Any, Callable[[], Any]] = {t: (lambda i=inst: i.call("dispatch", kid, n)) for t, inst in insts.items()}
                calls["direct"] = lambda: direct.call(f"direct_{name}", n)
                got: dict[Any, list[float]] = {k: [] for k in calls}
                for call in calls.values():
                    per_call(call, 20)
                for _ in range(args.rounds):
                    for k, call in calls.items():
                        got[k].append(per_call(call, args.batch))
                base = statistics.median(got["direct"])
                want = None
                for t, inst in insts.items():
                    last = hosts[t].buffer_snapshot().last_dispatch
                    assert inst.call("fetch", n) == 0
                    out = inst.memory_view()[4 * n:8 * n].tobytes()
                    want = out if want is None else want
                    ok = last.status == 0 and str(last.outcome) == "CPU" and out == want
                    failures += not ok
                    med = statistics.median(got[t])
                    emit({"bench": "cpu_dispatch_cost", "kernel": name, "elements": n, "threads": t, **env,
                          "median_us": med, "min_us": min(got[t]), "direct_us": base, "overhead_us": med - base,
                          "rounds": args.rounds, "batch": args.batch, "checked": ok})
            for inst in [*insts.values(), direct]:
                assert inst.call("teardown") == 0
    finally:
        for h in [*hosts.values(), direct_host]:
            h.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
