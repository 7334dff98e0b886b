"""Mandelbrot on the device: the loop kernel (one dispatch) against direct Wasm on the CPU.

python -m bench.mandelbrot [--sizes 1920x1080,2560x1440] [--iterations 64] [--repeats 5]
                           [--skip-step] [--allow-software-adapter] [--out FILE]

The guest is examples/guests/mandelbrot.wasm (Zig). One JSONL record per (size, path):
  direct_cpu    render_direct: plain Wasm loops over guest memory, no buffers (the baseline);
  gpu_loop      render_loop on a GPU host: one dispatch of the loop kernel (kernel 2);
  cpu_fallback  render_loop on a host with the GPU disabled: kernel 2's CPU runner;
  gpu_step      render on a GPU host: max_iter dispatches of the one-step kernel (kernel 1) with a
                copy back after each, the per-step path the loop kernel replaces (--skip-step skips it).
Each path gets a fresh instance per size: cold_ms is its first render (guest memory growth, first
buffers, first use of the pipeline), warm_* are the median and minimum of the repeats after it.
Device opening and module compilation (pipelines included) are reported apart, per host. Images
are checked outside the timers: pixels whose escape count differs from render_direct (the CPU
paths must match exactly; the GPU may differ in a few pixels under relaxed_float). Every record
names the adapter; a GPU record whose dispatches fell back to the CPU is an error (exit 1), and
so is a software adapter unless --allow-software-adapter.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from examples.progress import Progress
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

GUEST = Path(__file__).resolve().parent.parent / "examples" / "guests" / "mandelbrot.wasm"
U32, F32 = ElementType.U32, ElementType.F32
STEP = KernelConfig(1, "wago_gpu.kernel.step", "wago_gpu.cpu.step",
                    [BindingConfig(0, F32, Access.READ), BindingConfig(1, F32, Access.READ),
                     BindingConfig(2, F32, Access.READ_WRITE), BindingConfig(3, F32, Access.READ_WRITE)],
                    relaxed_float=True)
MANDEL = KernelConfig(2, "wago_gpu.kernel.mandel", "wago_gpu.cpu.mandel",
                      [BindingConfig(0, U32, Access.READ), BindingConfig(1, U32, Access.WRITE)], relaxed_float=True)
TARGET_SPEEDUP = 10.0  # the target for gpu_loop over direct_cpu (warm, H200)


class BenchError(Exception):
    pass


def adapter_name(host: Host) -> str:
    info = host.device.info
    return f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"


class RenderPath:
    """One render export on one host: a fresh instance per size, timed cold then warm."""

    def __init__(self, name: str, export: str, host: Host, module, kernel: KernelConfig | None):
        self.name, self.export, self.host, self.module, self.kernel = name, export, host, module, kernel

    def run(self, width: int, height: int, iterations: int, repeats: int,
            reference: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
        with self.host.instantiate(self.module) as inst:
            def render() -> float:
                t0 = time.perf_counter()
                status = inst.call(self.export, width, height, iterations)
                seconds = time.perf_counter() - t0
                if status != 0:
                    raise BenchError(f"{self.name}: {self.export} returned {status}")
                return seconds

            def dispatches() -> tuple[int, int]:
                return inst.call("gpu_dispatches"), inst.call("cpu_dispatches")

            def counts() -> np.ndarray:
                n = width * height
                return np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * n), "<u4").copy()

            cold = render()
            first = counts()
            first_dispatches = dispatches()
            warm: list[float] = []
            for _ in range(repeats):
                warm.append(render())
            last = counts()
            last_dispatches = dispatches()
        if not np.array_equal(first, last):
            raise BenchError(f"{self.name}: repeated renders gave different images")
        record: dict[str, Any] = {
            "path": self.name, "export": self.export, "width": width, "height": height, "pixels": width * height,
            "iterations": iterations, "cold_ms": cold * 1e3, "warm_median_ms": statistics.median(warm) * 1e3,
            "warm_min_ms": min(warm) * 1e3, "repeats": len(warm), "mean_count": float(last.mean())}
        if self.kernel is not None:
            record["gpu_dispatches"], record["cpu_dispatches"] = last_dispatches
            record["first_render_dispatches"] = list(first_dispatches)
        if reference is not None:
            delta = np.abs(last.astype(np.int64) - reference.astype(np.int64))
            record["pixels_differing_from_direct"] = int(np.count_nonzero(delta))
            record["max_count_difference"] = int(delta.max(initial=0))
        return record, last


def open_host(kernels: list[KernelConfig], gpu: bool, allow_software: bool) -> tuple[Host, float]:
    t0 = time.perf_counter()
    host = Host(Config(kernels=kernels, disabled=not gpu, allow_software_adapter=allow_software,
                       require_gpu=gpu and not allow_software))
    return host, time.perf_counter() - t0


def compile_module(host: Host) -> tuple[Any, float]:
    t0 = time.perf_counter()
    module = host.compile(GUEST.read_bytes())
    return module, time.perf_counter() - t0


def check_gpu_record(record: dict[str, Any], expected_dispatches: int) -> list[str]:
    problems = []
    if record["cpu_dispatches"] or record["gpu_dispatches"] != expected_dispatches:
        problems.append(f"{record['path']} {record['width']}x{record['height']}: {record['gpu_dispatches']} GPU / "
                        f"{record['cpu_dispatches']} CPU dispatches, expected {expected_dispatches} on the GPU")
    if record["pixels_differing_from_direct"] > 0.01 * record["pixels"]:
        problems.append(f"{record['path']}: {record['pixels_differing_from_direct']} pixels differ from render_direct")
    return problems


def run_size(paths: list[tuple[RenderPath, int]], width: int, height: int, args: argparse.Namespace,
             gpu_host: Host, common: dict[str, Any], record: Callable[[dict[str, Any]], None],
             progress: Progress) -> list[str]:
    """Every path at one image size, each checked against render_direct; the problems found."""
    problems: list[str] = []
    reference = None
    direct_ms = None
    for path, gpu_dispatches in paths:
        progress.step(f"{path.name} {width}x{height}")
        rec, counts = path.run(width, height, args.iterations, args.repeats, reference)
        if path.name == "direct_cpu":
            reference = counts
            direct_ms = (rec["cold_ms"], rec["warm_median_ms"])
            rec["pixels_differing_from_direct"] = 0
        else:
            rec["speedup_over_direct_warm"] = direct_ms[1] / rec["warm_median_ms"]  # type: ignore[index]
            rec["speedup_over_direct_cold"] = direct_ms[0] / rec["cold_ms"]  # type: ignore[index]
        if path.host is gpu_host and path.kernel is not None:
            problems += check_gpu_record(rec, gpu_dispatches)
        elif path.kernel is not None and (rec["gpu_dispatches"] or rec["pixels_differing_from_direct"]):
            problems.append(f"{path.name}: the CPU path must match render_direct exactly, on the CPU")
        if path.name == "gpu_loop":
            rec["meets_target"] = rec["speedup_over_direct_warm"] >= TARGET_SPEEDUP
        record({**rec, **common, "host": "gpu" if path.host is gpu_host else "cpu (GPU disabled)"})
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1920x1080,2560x1440", help="WxH,... (default 1920x1080,2560x1440)")
    parser.add_argument("--iterations", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-step", action="store_true", help="leave out the per-step path (gpu_step)")
    parser.add_argument("--allow-software-adapter", action="store_true",
                        help="let the GPU paths run on lavapipe/llvmpipe (for trying the bench locally)")
    parser.add_argument("--out", type=Path, help="also append the records to this file")
    args = parser.parse_args(argv)
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]
    env = environment()
    out = args.out.open("a") if args.out else None
    problems: list[str] = []

    def record(rec: dict[str, Any]) -> None:
        rec = {"bench": "mandelbrot", **rec, **env}
        emit(rec)
        if out is not None:
            emit(rec, out)

    gpu_host, gpu_open = open_host([STEP, MANDEL], True, args.allow_software_adapter)
    cpu_host, cpu_open = open_host([STEP, MANDEL], False, False)
    try:
        if not gpu_host.gpu_active:
            raise BenchError(f"no GPU adapter: {gpu_host.device_reason}")
        adapter = adapter_name(gpu_host)
        software = gpu_host.device.info.is_software
        gpu_module, gpu_compile = compile_module(gpu_host)
        cpu_module, cpu_compile = compile_module(cpu_host)
        common = {"adapter": adapter, "software_adapter": software}
        record({"path": "setup", "gpu_host_open_ms": gpu_open * 1e3, "gpu_compile_ms": gpu_compile * 1e3,
                "cpu_host_open_ms": cpu_open * 1e3, "cpu_compile_ms": cpu_compile * 1e3,
                "loop_kernel_wgsl_bytes": len(gpu_module.contract.kernels[2].wgsl or ""),
                "loop_budget": gpu_module.contract.kernels[2].loop_budget, **common})
        paths: list[tuple[RenderPath, int]] = [
            (RenderPath("direct_cpu", "render_direct", cpu_host, cpu_module, None), 0),
            (RenderPath("gpu_loop", "render_loop", gpu_host, gpu_module, MANDEL), 1),
            (RenderPath("cpu_fallback", "render_loop", cpu_host, cpu_module, MANDEL), 0),
        ]
        if not args.skip_step:
            paths.append((RenderPath("gpu_step", "render", gpu_host, gpu_module, STEP), args.iterations))
        progress = Progress(len(sizes) * len(paths), "mandelbrot")
        for width, height in sizes:
            problems += run_size(paths, width, height, args, gpu_host, common, record, progress)
        progress.close()
        if software and not args.allow_software_adapter:
            problems.append("software adapter")
    except BenchError as exc:
        problems.append(str(exc))
    finally:
        gpu_host.close()
        cpu_host.close()
        if out is not None:
            out.close()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
