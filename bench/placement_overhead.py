"""What measured placement's own bookkeeping costs per dispatch: one resident kernel dispatched over
and over at a small count, on hosts that differ only in placement, rounds interleaved.

python -m bench.placement_overhead [--kernel twice] [--sizes 1024,16384] [--rounds 9] [--batch 300]
                                   [--allow-software-adapter] [--label NAME] > FILE.jsonl

Hosts: cpu_only (no device open), threshold_cpu (a device open, the count below min_elements: the
CPU kernel), threshold_gpu (min_elements 0: the GPU) and measured (after 40 warm-up dispatches that
end its exploration). Per (host, size) one JSONL record: the per-dispatch median and minimum over
`rounds` rounds of `batch` dispatches (the rounds of the hosts interleaved, so load shifts hit all
alike; a round's mean counts any probe of the other device in it). The summary record gives
measured's overhead in µs over the threshold host of the device it used (median against median)
and where `batch` more dispatches of the measured host ran (an untimed pass after the rounds).
Outputs are checked against numpy after the timers. Run it on other code with that code first on
PYTHONPATH and this file run as a script (`--label` names the code in the records).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from bench.common import emit, environment
from bench.cpu_kernels import KERNELS, guest_wat, kernel_config
from bench.placement_ladder import matches
from wagogpu import Config, Host

HOSTS = ("cpu_only", "threshold_cpu", "threshold_gpu", "measured")
WARM = 40


def config_for(name: str, kernel_id: int, kernel: str, n: int, software: bool) -> Config:
    k = kernel_config(kernel_id, kernel)
    gpu = {"allow_software_adapter": software, "cpu_kernels": True}
    if name == "cpu_only":
        return Config(kernels=[k], disabled=True, cpu_kernels=True)
    if name == "threshold_cpu":
        return Config(kernels=[replace(k, min_elements=n + 1)], **gpu)
    if name == "threshold_gpu":
        return Config(kernels=[replace(k, min_elements=0)], **gpu)
    return Config(kernels=[k], placement="measured", **gpu)


def one_size(kernel: str, n: int, rounds: int, batch: int, software: bool, env: dict[str, Any]) -> None:
    kernel_id, reference = KERNELS[kernel]
    x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
    hosts: dict[str, Host] = {}
    insts: dict[str, Any] = {}
    try:
        for name in HOSTS:
            host = hosts[name] = Host(config_for(name, kernel_id, kernel, n, software))
            if name != "cpu_only" and not host.gpu_active:
                raise SystemExit(f"{name}: no GPU adapter opened ({host.device_reason}); "
                                 "--allow-software-adapter runs it on lavapipe")
            inst = insts[name] = host.instantiate(host.compile(guest_wat()))
            inst.call("reserve", n)
            inst.memory_view()[:4 * n].view(np.float32)[:] = x
            assert inst.call("setup", n) == 0
            for _ in range(WARM):
                assert inst.call("dispatch", kernel_id, n) == 0
        per: dict[str, list[float]] = {name: [] for name in HOSTS}
        for _ in range(rounds):
            for name in HOSTS:
                call = insts[name].call
                started = time.perf_counter()
                for _ in range(batch):
                    call("dispatch", kernel_id, n)
                per[name].append((time.perf_counter() - started) / batch)
        used = _devices(hosts["measured"], insts["measured"], kernel_id, n, batch)
        medians = {}
        for name in HOSTS:
            inst = insts[name]
            assert inst.call("fetch", n) == 0
            on_gpu = str(hosts[name].buffer_snapshot().last_dispatch.outcome) == "GPU"
            ok = matches(inst.memory_view()[4 * n:8 * n].view(np.float32), reference(x), relaxed=on_gpu)
            medians[name] = statistics.median(per[name])
            emit({"bench": "placement_overhead", "kernel": kernel, "host": name, "elements": n,
                  "median_us": medians[name] * 1e6, "min_us": min(per[name]) * 1e6, "rounds": rounds,
                  "batch": batch, "checked": ok, "adapter": hosts[name].buffer_snapshot().device or "none", **env})
        device = "GPU" if used["GPU"] > used["CPU"] else "CPU"
        base = medians["threshold_gpu" if device == "GPU" else "threshold_cpu"]
        emit({"bench": "placement_overhead", "kernel": kernel, "host": "summary", "elements": n,
              "measured_device": device, "after_gpu_dispatches": used["GPU"], "after_cpu_dispatches": used["CPU"],
              "overhead_us": (medians["measured"] - base) * 1e6, "measured_over_threshold": medians["measured"] / base,
              "measured_over_cpu_only": medians["measured"] / medians["cpu_only"], **env})
    finally:
        for host in hosts.values():
            host.close()


def _devices(host: Host, inst: Any, kernel_id: int, n: int, count: int) -> dict[str, int]:
    """Where `count` more dispatches of the measured host run (an untimed pass after the timed
    rounds: reading each dispatch's outcome inside them would time that too)."""
    log = host.context.log
    used = {"GPU": 0, "CPU": 0}
    for _ in range(count):
        assert inst.call("dispatch", kernel_id, n) == 0
        used[str(log.last_dispatch.outcome)] += 1
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="twice", choices=sorted(KERNELS))
    parser.add_argument("--sizes", default="1024,16384")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--label", default="", help="names the code measured (e.g. main, branch) in every record")
    args = parser.parse_args(argv)
    env = {**environment(), "label": args.label}
    for n in [int(s) for s in args.sizes.split(",")]:
        one_size(args.kernel, n, args.rounds, args.batch, args.allow_software_adapter, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
