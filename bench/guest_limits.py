"""What the guest limits cost (Config.call_timeout: epoch interruption; Config.fuel; the store
limits) on the polynomial and Mandelbrot benchmarks' CPU paths, and how late an interrupt lands.

python -m bench.guest_limits [--elements 1000000] [--size 640x360] [--iterations 64] [--repeats 7]
                             [--timeouts 0.05,0.2,1] [--samples 5] > FILE.jsonl

Modes, one Host each (the engine is compiled with the checks each needs): off (no limit), epoch
(call_timeout), fuel, store (max_memory_bytes and max_table_elements only: no compiled check) and
all. Workloads, each a warm call timed per mode, the modes interleaved repeat by repeat so that
load on the machine falls on every mode alike:
  poly32_cpu_runner   bench/guests/cpu_fallback.wat's wago_gpu.cpu.poly32 over plugin buffers
  poly32_direct       the same polynomial over guest memory (plain Wasm loops)
  mandel_cpu_runner   examples/guests/mandelbrot.wasm's render_loop with the GPU disabled
  mandel_direct       its render_direct
  empty_call          Instance.call of an export that returns at once (the per-call cost of arming)
One JSONL record per (workload, mode): median and minimum, and the ratio of medians to "off".
Results are checked outside the timers (each mode's output equals the off mode's). Then one record
per call_timeout in --timeouts: how far past it a spinning guest's LimitTrap came (median, max).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment, timed
from bench.cpu_fallback import GUEST as POLY_GUEST
from bench.cpu_fallback import kernel_config
from bench.mandelbrot import GUEST as MANDEL_GUEST
from bench.mandelbrot import MANDEL, STEP
from wagogpu import Config, Host, KernelConfig, LimitTrap

MODES: dict[str, dict[str, Any]] = {
    "off": {},
    "epoch": {"call_timeout": 600.0},
    "fuel": {"fuel": 1 << 62},
    "store": {"max_memory_bytes": 1 << 31, "max_table_elements": 1 << 20},
    "all": {"call_timeout": 600.0, "fuel": 1 << 62, "max_memory_bytes": 1 << 31, "max_table_elements": 1 << 20},
}
SPIN = '(module (func (export "spin") (loop $l (br $l))) (func (export "empty")))'


class Workload:
    """One timed call per mode, on an instance per mode; output() reads what it produced."""

    def __init__(self, name: str, call: Callable[[Any], Any], output: Callable[[Any], bytes]) -> None:
        self.name, self.call, self.output = name, call, output


def poly_instances(hosts: dict[str, Host], n: int) -> dict[str, Any]:
    x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
    out = {}
    for mode, host in hosts.items():
        inst = host.instantiate(host.compile(POLY_GUEST.read_text()))
        inst.call("reserve", n)
        inst.memory_view()[:4 * n].view(np.float32)[:] = x
        if inst.call("setup", n) != 0:
            raise SystemExit(f"{mode}: setup failed")
        out[mode] = inst
    return out


def open_hosts(kernels: list[KernelConfig]) -> dict[str, Host]:
    return {mode: Host(Config(kernels=kernels, disabled=True, **limits)) for mode, limits in MODES.items()}


def workloads(poly_hosts: dict[str, Host], mandel_hosts: dict[str, Host],
              args: argparse.Namespace) -> list[tuple[Workload, dict[str, Any]]]:
    n = args.elements
    width, height = (int(v) for v in args.size.split("x"))
    poly = poly_instances(poly_hosts, n)
    mandel = {mode: host.instantiate(host.compile(MANDEL_GUEST)) for mode, host in mandel_hosts.items()}
    spin = {mode: host.instantiate(host.compile(SPIN)) for mode, host in poly_hosts.items()}

    def poly_out(inst: Any) -> bytes:
        assert inst.call("fetch", n) == 0
        return inst.read_memory(4 * n, 4 * n)

    def mandel_out(inst: Any) -> bytes:
        return inst.read_memory(inst.call("counts_ptr"), 4 * width * height)

    def render(export: str) -> Callable[[Any], Any]:
        return lambda inst: inst.call(export, width, height, args.iterations)

    return [
        (Workload("poly32_cpu_runner", lambda inst: inst.call("wago_gpu.cpu.poly32", n), poly_out), poly),
        (Workload("poly32_direct", lambda inst: inst.call("direct_poly32", n), lambda inst: inst.read_memory(4 * n, 4 * n)),
         poly),
        (Workload("mandel_cpu_runner", render("render_loop"), mandel_out), mandel),
        (Workload("mandel_direct", render("render_direct"), mandel_out), mandel),
        (Workload("empty_call", lambda inst: [inst.call("empty") for _ in range(1000)], lambda inst: b""), spin),
    ]


def measure(work: Workload, instances: dict[str, Any], repeats: int, env: dict[str, Any]) -> int:
    """Interleaved repeats per mode; one record per mode. Returns the number of failed checks."""
    times: dict[str, list[float]] = {mode: [] for mode in instances}
    for inst in instances.values():
        work.call(inst)  # warm: first use of the instance and its buffers
    for _ in range(repeats):
        for mode, inst in instances.items():
            times[mode] += timed(lambda: work.call(inst), 1)
    outputs = {mode: work.output(inst) for mode, inst in instances.items()}
    base = statistics.median(times["off"])
    failures = 0
    for mode, seconds in times.items():
        checked = outputs[mode] == outputs["off"]
        failures += not checked
        per = 1000 if work.name == "empty_call" else 1
        emit({"bench": "guest_limits", "workload": work.name, "mode": mode, "limits": sorted(MODES[mode]),
              "median_ms": statistics.median(seconds) * 1e3 / per, "min_ms": min(seconds) * 1e3 / per,
              "ratio_to_off": statistics.median(seconds) / base, "runs": len(seconds), "checked": checked,
              "per": "call" if per > 1 else "run", "warm": True, "adapter": "none (CPU path)", **env})
    return failures


def interrupt_latency(timeout: float, samples: int, env: dict[str, Any]) -> None:
    """How long after call_timeout a spinning guest's LimitTrap arrives."""
    late: list[float] = []
    with Host(Config(disabled=True, call_timeout=timeout)) as host:
        inst = host.instantiate(host.compile(SPIN))
        for _ in range(samples):
            t0 = time.perf_counter()
            try:
                inst.call("spin")
            except LimitTrap:
                late.append(time.perf_counter() - t0 - timeout)
            else:
                raise SystemExit("the spinning guest returned")
    emit({"bench": "guest_limits", "workload": "interrupt_latency", "call_timeout_s": timeout,
          "late_median_ms": statistics.median(late) * 1e3, "late_max_ms": max(late) * 1e3,
          "late_min_ms": min(late) * 1e3, "samples": len(late), **env})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--iterations", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--timeouts", default="0.05,0.2,1")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    env = environment()
    # The two guests number their kernels alike (1 and 2): a Host per guest and mode.
    poly_hosts = open_hosts([kernel_config(1, "twice"), kernel_config(2, "poly32")])
    mandel_hosts = open_hosts([STEP, MANDEL])
    failures = 0
    try:
        for work, instances in workloads(poly_hosts, mandel_hosts, args):
            failures += measure(work, instances, args.repeats, env)
    finally:
        for host in [*poly_hosts.values(), *mandel_hosts.values()]:
            host.close()
    for timeout in (float(t) for t in args.timeouts.split(",")):
        interrupt_latency(timeout, args.samples, env)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
