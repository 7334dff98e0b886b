"""The crossover ladder: one kernel at sizes around the GPU's crossover, dispatched under four
placements: GPU only, CPU kernels only, threshold (min_elements) and measured (the cost model).

python -m bench.placement_ladder [--kernel poly32] [--sizes 1024,4096,...,4194304] [--repeats 7]
                                 [--explore 12] [--min-elements 65536] [--allow-software-adapter] > FILE.jsonl

The guest is bench/cpu_kernels.py's (twice, poly32, hash over F32 buffers). Per (placement, size)
one JSONL record: the warm median and minimum of `repeats` dispatches after `explore` untimed ones
(the measured model's exploration), how many of the timed ones ran on the GPU and on the CPU, and
measured_over_best: measured's median over the faster of GPU only and CPU only at that size (the
issue's target: <= 1.2 at every size). Results are checked against numpy outside the timers (bit
equality, or relaxed_float's 16 ulps where a float kernel's output came from the GPU); every
record names the adapter.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np

from bench.common import emit, environment, summary
from bench.cpu_kernels import KERNELS, guest_wat, kernel_config
from wagogpu import Config, Host

PLACEMENTS = ("gpu_only", "cpu_only", "threshold", "measured")
# A float kernel on the GPU under relaxed_float may contract and reorder (docs/gpu.md): it is held to
# tests/corpus/kernels.py's RELAXED_REL, 16 f32 ulps of max(|expected|, the output's scale); the CPU
# kernels and the integer hash are held to bit equality.
RELAXED_REL = 2.0**-19


def matches(got: np.ndarray, want: np.ndarray, relaxed: bool) -> bool:
    if not relaxed:
        return bool(np.array_equal(got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32)))
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    bound = RELAXED_REL * np.maximum(np.abs(want), scale)
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= bound))


def host_for(placement: str, kernel_id: int, name: str, min_elements: int, software: bool) -> Host:
    k = kernel_config(kernel_id, name)
    gpu = {"allow_software_adapter": software}
    if placement == "gpu_only":
        return Host(Config(kernels=[k], **gpu))
    if placement == "cpu_only":
        return Host(Config(kernels=[k], disabled=True, cpu_kernels=True))
    if placement == "threshold":
        return Host(Config(kernels=[replace(k, min_elements=min_elements)], cpu_kernels=True, **gpu))
    return Host(Config(kernels=[k], cpu_kernels=True, placement="measured", **gpu))


def ladder(host: Host, placement: str, name: str, kernel_id: int, sizes: list[int], repeats: int, explore: int,
           env: dict[str, Any]) -> dict[int, float]:
    reference = KERNELS[name][1]
    inst = host.instantiate(host.compile(guest_wat()))
    snap = host.buffer_snapshot()
    adapter = snap.device or "none (CPU only)"
    medians: dict[int, float] = {}
    for n in sizes:
        x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
        inst.call("reserve", n)
        inst.memory_view()[:4 * n].view(np.float32)[:] = x
        assert inst.call("setup", n) == 0
        outcomes: list[str] = []
        warm: list[float] = []

        def dispatch() -> None:  # the outcome is read from the snapshot outside the timer
            started = time.perf_counter()
            assert inst.call("dispatch", kernel_id, n) == 0
            warm.append(time.perf_counter() - started)
            outcomes.append(str(host.buffer_snapshot().last_dispatch.outcome))

        for _ in range(explore):
            dispatch()
        outcomes.clear()
        warm.clear()
        for _ in range(repeats):
            dispatch()
        assert inst.call("fetch", n) == 0
        on_gpu = outcomes[-1] == "GPU"  # the output fetched is the last timed dispatch's
        ok = matches(inst.memory_view()[4 * n:8 * n].view(np.float32), reference(x), relaxed=on_gpu and name != "hash")
        s = summary(warm)
        medians[n] = s["median_ms"]
        emit({"bench": "placement_ladder", "kernel": name, "placement": placement, "elements": n,
              "median_ms": s["median_ms"], "min_ms": s["min_ms"], "runs": s["runs"], "gpu_runs": outcomes.count("GPU"),
              "cpu_runs": outcomes.count("CPU"), "explore_dispatches": explore, "checked": ok,
              "check": "relaxed_float" if on_gpu and name != "hash" else "exact", "warm": True,
              "adapter": adapter, **env})
        assert inst.call("teardown") == 0
    if placement == "measured":
        (model,) = [k.placement for k in host.buffer_snapshot().kernels if k.kernel_id == kernel_id]
        emit({"bench": "placement_ladder", "kernel": name, "placement": "measured_model", "model": model,
              "adapter": adapter, **env})
    inst.close()
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="poly32", choices=sorted(KERNELS))
    parser.add_argument("--sizes", default="1024,4096,16384,65536,262144,1048576,4194304")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--explore", type=int, default=12)
    parser.add_argument("--min-elements", type=int, default=65536)
    parser.add_argument("--allow-software-adapter", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kernel_id = KERNELS[args.kernel][0]
    env = environment()
    results: dict[str, dict[int, float]] = {}
    for placement in PLACEMENTS:
        with host_for(placement, kernel_id, args.kernel, args.min_elements, args.allow_software_adapter) as host:
            if placement != "cpu_only" and not host.gpu_active:
                raise SystemExit(f"{placement}: no GPU adapter opened ({host.device_reason}); "
                                 "--allow-software-adapter runs it on lavapipe")
            results[placement] = ladder(host, placement, args.kernel, kernel_id, sizes, args.repeats, args.explore, env)
    worst = 0.0
    for n in sizes:
        best = min(results["gpu_only"][n], results["cpu_only"][n])
        ratio = results["measured"][n] / best
        worst = max(worst, ratio)
        emit({"bench": "placement_ladder", "kernel": args.kernel, "placement": "summary", "elements": n,
              "measured_over_best": ratio, "threshold_over_best": results["threshold"][n] / best,
              "faster_device": "GPU" if results["gpu_only"][n] < results["cpu_only"][n] else "CPU", **env})
    emit({"bench": "placement_ladder", "kernel": args.kernel, "placement": "worst", "measured_over_best": worst,
          "target": 1.2, **env})
    return 0


if __name__ == "__main__":
    sys.exit(main())
