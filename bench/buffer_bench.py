"""The reference's buffer benchmark, for wagogpu: kernels copy, twice, square and polynomial at
1,024 / 16,384 / 1,000,000 / 10,000,000 elements; direct Wasm CPU, the bulk CPU runner, first GPU
call, repeated GPU calls, a resident dispatch and a one-element prefix; numpy beside them.

python -m bench.buffer_bench [--kernels twice,polynomial] [--sizes ...] [--repeats 5]
       [--ladder polynomial|twice] [--require-gpu | --allow-software-adapter] [--profile] [--pipelined]
       [--out FILE]

One JSONL record per (kernel, size) with the reference's field names where they apply (durations in
integer nanoseconds) plus the adapter, wgpu and Python versions. Results are checked after each
timer stops. A GPU sample that fell back, or a missing GPU, is an error, never a result.
"""
from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from dataclasses import fields
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from examples.progress import Progress
from bench.work_guest import EXACT, KERNEL_IDS, input_values, reference, wat
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.diagnostics import BufferOperation
from wagogpu import GpuRequiredError

DEFAULT_SIZES = (1024, 16384, 1_000_000, 10_000_000)
LADDERS = {"polynomial": (2048, 4096, 8192, 12288, 16384, 32768),
           "twice": tuple(2 ** k for k in range(10, 24))}  # up to 8,388,608 (max_elements is 10M)
TOLERANCE = 8e-6


class BenchError(RuntimeError):
    pass


def kernel_configs() -> list[KernelConfig]:
    binds = [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)]
    return [KernelConfig(i, f"wago_gpu.kernel.{k}", f"wago_gpu.cpu.{k}", binds, relaxed_float=True)
            for k, i in KERNEL_IDS.items()]


def _camel(name: str) -> str:
    special = {"gpu": "GPU", "id": "ID", "ns": "NS"}
    return "".join(special.get(p, p.capitalize()) for p in name.split("_"))


def op_record(op: BufferOperation) -> dict[str, Any]:
    """A BufferOperation with the reference's field names, durations in integer ns."""
    out: dict[str, Any] = {}
    for f in fields(op):
        value = getattr(op, f.name)
        key = "Import" if f.name == "import_name" else _camel(f.name)
        out[key] = int(round(value * 1e9)) if isinstance(value, float) else value
    return out


def check(name: str, got: np.ndarray, want: np.ndarray) -> float:
    """Max absolute difference; raises when the result is wrong."""
    if name in EXACT:
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            raise BenchError(f"{name}: GPU result differs from CPU bit for bit")
        return 0.0
    diff = np.abs(got.astype(np.float64) - want)
    if not np.all(np.isfinite(got)) or np.any(diff > TOLERANCE * np.maximum(1.0, np.abs(want))):
        raise BenchError(f"{name}: GPU result outside {TOLERANCE}*max(1,|cpu|)")
    return float(diff.max(initial=0.0))


class Case:
    """One host, module and instance for a (kernel, size), as the reference's procedure has it."""

    def __init__(self, kernel: str, n: int, args: argparse.Namespace):
        self.kernel, self.n, self.id = kernel, n, KERNEL_IDS[kernel]
        self.software_ok = args.allow_software_adapter
        try:
            self.host = Host(Config(kernels=kernel_configs(), profile_stages=args.profile,
                                    allow_software_adapter=args.allow_software_adapter,
                                    require_gpu=not args.allow_software_adapter, pipelined=args.pipelined))
        except GpuRequiredError as exc:
            raise BenchError(f"{exc} (a missing GPU is an error, not a result)") from exc
        if not self.host.gpu_active:
            raise BenchError(f"no GPU: {self.host.device_reason}")
        t0 = time.perf_counter()
        module = self.host.compile(wat())
        self.compile_ns = int((time.perf_counter() - t0) * 1e9)
        self.inst = self.host.instantiate(module)
        self.inst.call("grow_to", math.ceil(12 * n / 65536) + 1)
        self.x = input_values(n)
        self.view()[:n] = self.x
        if self.inst.call("setup", n) != 0:
            raise BenchError("setup failed")
        self.want = reference(kernel, self.x)

    def view(self) -> np.ndarray:
        return self.inst.memory_view().view(np.float32)

    def timed(self, fn) -> int:
        t0 = time.perf_counter_ns()
        fn()
        return time.perf_counter_ns() - t0

    def direct(self) -> int:
        ns = self.timed(lambda: self.inst.call(f"direct.{self.kernel}", self.n))
        check(self.kernel, self.view()[self.n:2 * self.n], self.want)
        return ns

    def buffer_cpu(self) -> int:
        assert self.inst.call("upload", self.n) == 0
        ns = self.timed(lambda: self.inst.call(f"wago_gpu.cpu.{self.kernel}", self.n))
        self.download_checked()
        return ns

    def download_checked(self, keep_tail_of: np.ndarray | None = None) -> float:
        assert self.inst.call("download", self.n, 8 * self.n) == 0
        got = self.view()[2 * self.n:3 * self.n]
        return check(self.kernel, got, self.want)

    def gpu_sample(self) -> dict[str, Any]:
        """upload + dispatch + download, timed together; checked afterwards."""
        n = self.n
        t0 = time.perf_counter_ns()
        status = self.inst.call("sample", self.id, n)
        total = time.perf_counter_ns() - t0
        snap = self.host.buffer_snapshot()
        dispatch, copy = snap.last_dispatch, snap.last
        if status != 0 or dispatch.outcome != "GPU":
            raise BenchError(f"GPU sample did not run on the GPU: status {status} {dispatch.reason_code} {dispatch.reason}")
        if not dispatch.hardware_submitted and not self.software_ok:
            raise BenchError("GPU sample was not submitted to hardware")
        diff = check(self.kernel, self.view()[2 * n:3 * n], self.want)
        return measurement(total, dispatch, copy, diff)

    def resident(self, count: int, repeats: int) -> dict[str, Any]:
        """Dispatches with the input already on the device (median of repeats); the download and
        check after them are untimed."""
        self.view()[2 * self.n:3 * self.n] = np.nan
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            status = self.inst.call("dispatch", self.id, count)
            times.append(time.perf_counter_ns() - t0)
            if status != 0:
                break
        dispatch = self.host.buffer_snapshot().last
        if status != 0 or dispatch.outcome != "GPU":
            raise BenchError(f"resident dispatch fell back: {dispatch.reason_code}")
        diff = self.download_checked()  # the prefix keeps the tail: the full output still matches
        record = measurement(int(np.median(times)), dispatch, self.host.buffer_snapshot().last, diff)
        record["MinNS"], record["Samples"] = min(times), len(times)
        # Pipelined, each sample only records its dispatch: the device's time is in the copy-back.
        record["IncludesDeviceWait"] = not self.host.config.pipelined
        return record

    def close(self) -> dict[str, Any]:
        snap = self.host.buffer_snapshot()
        mine = [d for d in snap.kernels if d.kernel_id == self.id]
        facts = {"DeviceInitNS": int(self.host.device_init * 1e9), "CompileTotalNS": self.compile_ns,
                 "TranslationNS": int(sum(d.translate for d in mine) * 1e9),
                 "PipelineNS": int(sum(d.pipeline for d in mine) * 1e9),
                 "PeakTrackedBytes": snap.peak_runtime_buffer_bytes,
                 "RetainedBytes": snap.runtime_pool_bytes, "Device": device_string(self.host),
                 "TimestampsSupported": snap.timestamps_supported}
        self.host.close()
        return facts


def device_string(host: Host) -> str:
    info = host.device.info
    return f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"


def measurement(total_ns: int, dispatch: BufferOperation, copy: BufferOperation, diff: float) -> dict[str, Any]:
    return {"TotalNS": total_ns, "UploadNS": int(dispatch.upload * 1e9), "DeviceCopyNS": int(dispatch.device_copy * 1e9),
            "ComputeNS": int(dispatch.compute * 1e9), "DownloadNS": int(copy.download * 1e9),
            "DeviceComputeNS": int(dispatch.device_compute * 1e9), "TimestampsValid": dispatch.timestamps_valid,
            "MaxAbsDiff": diff, "Dispatch": op_record(dispatch), "Copy": op_record(copy)}


def numpy_ns(kernel: str, x: np.ndarray, repeats: int) -> int:
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        reference(kernel, x)
        t = time.perf_counter_ns() - t0
        best = t if best is None else min(best, t)
    return int(best or 0)


def run_case(kernel: str, n: int, args: argparse.Namespace, env: dict[str, Any]) -> dict[str, Any]:
    case = Case(kernel, n, args)
    try:
        direct = case.direct()
        buffer_cpu = case.buffer_cpu()
        first = case.gpu_sample()
        direct_repeated = [case.direct() for _ in range(args.repeats)]
        repeated = [case.gpu_sample() for _ in range(args.repeats)]
        resident = case.resident(n, max(args.repeats, 9))
        prefix = case.resident(1, max(args.repeats, 9))
        np_ns = numpy_ns(kernel, case.x, args.repeats)
    finally:
        facts = case.close()
    gpu_median = float(np.median([r["TotalNS"] for r in repeated]))
    direct_median = float(np.median(direct_repeated))
    return {"bench": "buffer_bench", "Kernel": kernel, "Count": n, "OS": platform.system(), "Arch": platform.machine(),
            "Python": platform.python_version(), "ProfileStages": args.profile, "Pipelined": args.pipelined, **facts,
            "DirectCPUNS": direct, "BufferCPUNS": buffer_cpu, "DirectCPURepeatedNS": direct_repeated,
            "NumpyNS": np_ns, "DirectCPU": {"TotalNS": direct}, "BufferCPU": {"TotalNS": buffer_cpu},
            "First": first, "Repeated": repeated, "Resident": resident, "SmallPrefix": prefix,
            "GPUMedianNS": gpu_median, "DirectCPUMedianNS": direct_median,
            "SpeedupGPUOverDirect": direct_median / gpu_median, "SpeedupResidentOverDirect":
                direct_median / max(1, resident["TotalNS"]),
            "adapter": facts["Device"], **env}


def best_window(fn, min_window_s: float, windows: int) -> float:
    """Fastest per-call time over `windows` windows of at least min_window_s each (after a warm-up)."""
    fn()
    best = math.inf
    for _ in range(windows):
        calls = 0
        t0 = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_window_s:
                break
        best = min(best, elapsed / calls)
    return best


def run_ladder(kernel: str, args: argparse.Namespace, env: dict[str, Any],
               progress: Callable[[str], None]) -> list[dict[str, Any]]:
    records = []
    for n in LADDERS[kernel]:
        case = Case(kernel, n, args)
        try:
            direct_s = best_window(lambda: case.inst.call(f"direct.{kernel}", n), 0.02, args.windows)
            check(kernel, case.view()[n:2 * n], case.want)

            def gpu() -> None:
                if case.inst.call("sample", case.id, n) != 0:
                    raise BenchError("ladder sample fell back")

            gpu_s = best_window(gpu, 0.02, args.windows)
            diff = check(kernel, case.view()[2 * n:3 * n], case.want)
            resident_s = best_window(lambda: case.inst.call("dispatch", case.id, n), 0.02, args.windows)
        finally:
            facts = case.close()
        records.append({"bench": "crossover", "Kernel": kernel, "Count": n, "Pipelined": args.pipelined, "DirectCPUNS": int(direct_s * 1e9),
                        "GPUTotalNS": int(gpu_s * 1e9), "ResidentNS": int(resident_s * 1e9), "GPUWins": gpu_s < direct_s,
                        "MaxAbsDiff": diff, "Windows": args.windows, "MinWindowS": 0.02, "adapter": facts["Device"], **env})
        progress(f"ladder {kernel} {n}")
    wins = [r["Count"] for r in records if r["GPUWins"]]
    for r in records:
        r["Crossover"] = min(wins) if wins else None
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="copy,twice,square,polynomial")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--ladder", action="append", choices=sorted(LADDERS), default=[])
    parser.add_argument("--no-cases", action="store_true", help="only the crossover ladders")
    parser.add_argument("--profile", action="store_true", help="profile_stages=True (separate, waited stages)")
    parser.add_argument("--pipelined", action="store_true",
                        help="pipelined=True: dispatches return once recorded; the copy-back waits")
    gpu = parser.add_mutually_exclusive_group()
    gpu.add_argument("--require-gpu", action="store_true",
                     help="fail unless a hardware adapter runs every GPU sample (the default)")
    gpu.add_argument("--allow-software-adapter", action="store_true",
                     help="let lavapipe/llvmpipe stand in (figures then name the software adapter)")
    parser.add_argument("--out", help="also append the JSONL records to this file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    kernels = [k for k in args.kernels.split(",") if k]
    for k in kernels:
        if k not in KERNEL_IDS:
            parser.error(f"unknown kernel {k!r}; choose from {', '.join(KERNEL_IDS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    env = environment()
    out = open(args.out, "a") if args.out else None
    jobs = [] if args.no_cases else [(k, n) for k in kernels for n in sizes]
    progress = Progress(len(jobs) + sum(len(LADDERS[k]) for k in args.ladder), "buffer_bench")

    def publish(record: dict[str, Any]) -> None:
        emit(record)
        if out:
            emit(record, out)

    try:
        for kernel, n in jobs:
            publish(run_case(kernel, n, args, env))
            progress.step(f"{kernel} {n}")
        for kernel in args.ladder:
            for record in run_ladder(kernel, args, env, progress.step):
                publish(record)
    except BenchError as exc:
        progress.close()
        print(f"buffer_bench: error: {exc}", file=sys.stderr)
        return 1
    finally:
        progress.close()
        if out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
