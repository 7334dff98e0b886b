"""CPU fallback speed: a guest's per-element CPU runner over plugin buffers (scalar imports served
by the generated Wasm accessor module) against the same loop over the guest's own memory ("direct").

python -m bench.cpu_fallback [--sizes 1024,16384,1000000,10000000] [--repeats 5]
Prints one JSONL record per (kernel, size) with both times and their ratio; results are checked
against numpy outside the timers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench.common import emit, environment, poly32_numpy, summary, timed
from examples.progress import Progress
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

GUEST = Path(__file__).parent / "guests" / "cpu_fallback.wat"
KERNELS = {"twice": (1, lambda x: x * np.float32(2)), "poly32": (2, poly32_numpy)}


def kernel_config(kernel_id: int, name: str) -> KernelConfig:
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                        relaxed_float=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,16384,1000000,10000000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    env = environment()
    config = Config(kernels=[kernel_config(i, n) for n, (i, _) in KERNELS.items()], disabled=True)
    failures = 0
    with Host(config) as host, Progress(len(sizes) * len(KERNELS), "cpu_fallback") as progress:
        inst = host.instantiate(host.compile(GUEST.read_text()))
        for n in sizes:
            inst.call("reserve", n)
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            inst.memory_view()[:4 * n].view(np.float32)[:] = x
            if inst.call("setup", n) != 0:
                raise SystemExit(f"setup failed at n={n}")
            for name, (kernel_id, reference) in KERNELS.items():
                progress.step(f"{name} {n}")
                want = reference(x)
                repeats = max(1, min(args.repeats, int(2e7 // max(n, 1))))
                plugin = timed(lambda: inst.call(f"wago_gpu.cpu.{name}", n), repeats)
                assert inst.call("fetch", n) == 0
                got_plugin = inst.memory_view()[4 * n:8 * n].view(np.float32).copy()
                direct = timed(lambda: inst.call(f"direct_{name}", n), repeats)
                got_direct = inst.memory_view()[4 * n:8 * n].view(np.float32).copy()
                numpy_times = timed(lambda: reference(x), repeats)
                ok = bool(np.array_equal(got_plugin, want) and np.array_equal(got_direct, want))
                failures += not ok
                p, d, nm = summary(plugin), summary(direct), summary(numpy_times)
                emit({"bench": "cpu_fallback", "kernel": name, "elements": n, "checked": ok,
                      "plugin_cpu_ms": p["median_ms"], "direct_cpu_ms": d["median_ms"], "numpy_ms": nm["median_ms"],
                      "ratio_plugin_over_direct": p["median_ms"] / d["median_ms"],
                      "plugin_ns_per_element": p["median_ms"] * 1e6 / n, "runs": p["runs"],
                      "warm": True, "adapter": "none (CPU path)", **env})
            assert inst.call("teardown") == 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
