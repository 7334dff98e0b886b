"""`wagogpu demo`: the start, buffers and compiled examples, saying per kernel which path ran and why.

The guests travel as package data, so the demo runs from a plain `pip install .` too:
start.wat and buffers.wat are copies of examples/start/start.wat and examples/buffers/buffers.wat,
double.wasm and double_c.wasm copies of the Zig and C builds in examples/guests/
(tests/host/test_examples.py checks that the copies match). The examples themselves live in the
checkout: `python -m examples.<name>`.

Jobs, all on one host (one device) except the forced-fallback one, which needs its own config:
  start          the WAT guest does everything inside its start function (B = 2*A, A = B + 1)
  buffers        the same two kernels, one export per step, so each dispatch record is read live
  buffers, kernel 2 forced to CPU   kernel 2 gets min_elements=5 (the job has 4 elements)
  compiled Zig / compiled C         the guests' own run(): allocate, upload, dispatch, fall back, check, free
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from importlib import resources

from ..abi.table import Access, ElementType, Status
from ..config import BindingConfig, Config, KernelConfig
from ..diagnostics import ReasonCode
from ..host import Host, Module
from ..host.cputhreads import cpu_thread_count
from ..host.placement import Placement, Where, place

EXPECTED = (3.0, 5.0, 7.0, 9.0)  # start and buffers: A = 2*[1, 2, 3, 4] + 1
COUNT = 4  # elements every demo dispatch covers
FORCED_MIN_ELEMENTS = 5
STEPS = {1: ("double", "B = 2*A"), 2: ("addOne", "A = B + 1")}


def guest(name: str) -> bytes:
    """The bytes of a packaged demo guest (start.wat, buffers.wat, double.wasm, double_c.wasm)."""
    return resources.files(__name__).joinpath(name).read_bytes()


def kernel(kernel_id: int, min_elements: int = 0) -> KernelConfig:
    name = STEPS[kernel_id][0]
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        (BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)),
                        relaxed_float=True, min_elements=min_elements)


@dataclass
class KernelRun:
    kernel_id: int
    name: str  # "double (B = 2*A)"
    status: int  # the dispatch status: 0 GPU, 1 CPU fallback, else an error
    reason_code: str = "NONE"  # why it did not run on the GPU: DISABLED, NO_DEVICE, BELOW_THRESHOLD, ...
    reason: str = ""
    forced_cpu: bool = False  # the job pushes this kernel to the CPU on purpose
    dispatch_ms: float | None = None  # buffer_snapshot().last.total, where the record was still there
    pipeline_ms: float | None = None  # building this module's GPU pipeline for the kernel (compile time)
    outcome: str = "GPU"  # of a status 0: GPU, or CPU (a CPU kernel ran it, Config.cpu_kernels)

    @property
    def path(self) -> str:
        if self.status == Status.OK:
            return "CPU kernel (compiled Wasm)" if self.outcome == "CPU" else "GPU"
        if self.status == Status.CPU_FALLBACK:
            return f"CPU fallback ({self.reason_code}: {self.reason})"
        return f"error {_status_name(self.status)}"


@dataclass
class Job:
    name: str
    guest: str
    ok: bool
    detail: str  # what was checked, or what went wrong
    wall_ms: float  # compile + instantiate + run
    kernels: list[KernelRun] = field(default_factory=list)


@dataclass
class DemoReport:
    device: str  # adapter name, "" without one
    state: str  # READY, UNAVAILABLE, DISABLED, FAILED
    reason: str  # why there is no device
    device_init_ms: float
    require_gpu: bool
    jobs: list[Job] = field(default_factory=list)
    mode: str = ""  # CPU kernels and placement: "cpu_kernels off", or on with threads and placement

    @property
    def problems(self) -> list[str]:
        out = [f"{j.name}: {j.detail}" for j in self.jobs if not j.ok]
        if self.require_gpu:
            out += [f"{j.name}: kernel {k.kernel_id} ran on the CPU with --require-gpu"
                    for j in self.jobs for k in j.kernels if k.status != 0 and not k.forced_cpu]
        return out

    @property
    def ok(self) -> bool:
        return bool(self.jobs) and not self.problems


def _status_name(status: int) -> str:
    try:
        return Status(status).name
    except ValueError:
        return f"status {status}"


def _placement(host: Host, module: Module, k: KernelConfig) -> Placement:
    """Where the host placed a dispatch of COUNT elements of k (the dispatch path's own decision,
    host.placement.place), once the guest's dispatch record itself is gone."""
    plan = module.contract.kernels.get(k.id)
    if plan is None:
        return Placement(Where.GUEST, ReasonCode.CONTRACT_UNVERIFIED, module.contract.reason)
    return place(host.context, module, k, plan, COUNT)


def _kernel_run(host: Host, module: Module, k: KernelConfig, status: int) -> KernelRun:
    placed = _placement(host, module, k)
    run = KernelRun(k.id, _kernel_name(k.id), status, pipeline_ms=_pipeline_ms(host, module, k),
                    outcome="CPU" if placed.where is Where.CPU else "GPU")
    if status == Status.CPU_FALLBACK:
        run.reason_code, run.reason = str(placed.reason_code), placed.reason
    return run


def _pipeline_ms(host: Host, module: Module, k: KernelConfig) -> float | None:
    for d in host.buffer_snapshot().kernels:
        if d.module == module.id and d.kernel_id == k.id and d.state == "PIPELINE_READY":
            return d.pipeline * 1e3
    return None


def _kernel_name(kernel_id: int) -> str:
    name, what = STEPS[kernel_id]
    return f"{name} ({what})"


def start_job(host: Host, kernels: list[KernelConfig]) -> Job:
    """Instantiate start.wat: its start function runs both kernels; read what it left in memory."""
    t0 = time.perf_counter()
    module = host.compile(guest("start.wat"))
    inst = host.instantiate(module)
    wall = (time.perf_counter() - t0) * 1e3
    result = struct.unpack("<4f", inst.read_memory(16, 16))
    statuses = struct.unpack("<2I", inst.read_memory(32, 8))
    runs = [_kernel_run(host, module, k, s) for k, s in zip(kernels, statuses)]
    inst.close()
    module.close()
    ok = result == EXPECTED and all(s in (0, 1) for s in statuses)
    detail = f"result {_floats(result)}" + (" verified" if ok else f", expected {_floats(EXPECTED)}")
    return Job("start", "start.wat (start function)", ok, detail, wall, runs)


def buffers_job(host: Host, kernels: list[KernelConfig], name: str = "buffers") -> Job:
    """Run buffers.wat step by step, reading buffer_snapshot().last right after each dispatch."""
    t0 = time.perf_counter()
    module = host.compile(guest("buffers.wat"))
    inst = host.instantiate(module)
    runs: list[KernelRun] = []
    problem = ""
    status = inst.call("setup")
    if status:
        problem = f"setup failed: {_status_name(status)}"
    for k, export in zip(kernels, ("first", "second")):
        if problem:
            break
        status = inst.call(export)
        last = host.buffer_snapshot().last
        if status or last.import_name != "dispatch":
            problem = f"kernel {k.id} step failed: {_status_name(status)}"
            break
        runs.append(KernelRun(k.id, _kernel_name(k.id), last.status, last.reason_code, last.reason,
                              forced_cpu=k.min_elements > COUNT, dispatch_ms=last.total * 1e3,
                              pipeline_ms=_pipeline_ms(host, module, k), outcome=str(last.outcome)))
    if not problem:
        status = inst.call("finish")
        if status:
            problem = f"finish failed: {_status_name(status)}"
    wall = (time.perf_counter() - t0) * 1e3
    result = struct.unpack("<4f", inst.read_memory(16, 16))
    inst.close()
    module.close()
    ok = not problem and result == EXPECTED
    detail = problem or f"result {_floats(result)}" + (" verified" if ok else f", expected {_floats(EXPECTED)}")
    return Job(name, "buffers.wat (one export per step)", ok, detail, wall, runs)


def compiled_job(host: Host, language: str, filename: str, k: KernelConfig) -> Job:
    """The guest's run() does the whole job; check its return and that it freed every buffer."""
    t0 = time.perf_counter()
    module = host.compile(guest(filename))
    inst = host.instantiate(module)
    returned = inst.call("run")
    wall = (time.perf_counter() - t0) * 1e3
    snap = host.buffer_snapshot()
    live = sum(d.buffers for d in snap.instances if d.instance == inst.id)
    held = snap.runtime_buffer_bytes - snap.runtime_pool_bytes  # the pool keeps idle GPU scratch for reuse
    runs = []
    if returned in (0, 1):
        runs.append(_kernel_run(host, module, k, returned))
    inst.close()
    module.close()
    leftover = host.buffer_snapshot().runtime_buffer_bytes
    if returned == 99:
        ok, detail = False, "run() returned 99: the guest found a wrong output"
    elif returned not in (0, 1):
        ok, detail = False, f"run() returned {returned} ({_status_name(returned)} from an import)"
    elif live or held or leftover:
        ok, detail = False, f"{live} buffers / {held} bytes left after run(), {leftover} bytes after close"
    else:
        ok, detail = True, f"run() returned {returned}: [2, 4, 6, 8] checked by the guest, every buffer freed"
    return Job(f"compiled {language}", f"{filename} ({language})", ok, detail, wall, runs)


def _floats(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def run_demo(cpu: bool = False, require_gpu: bool = False, allow_software_adapter: bool = False,
             power_preference: str = "high-performance", adapter: int | str | None = None,
             backend: str | None = None, cpu_kernels: bool = False, placement: str = "threshold") -> DemoReport:
    """Run every demo job; raises wagogpu.GpuRequiredError when require_gpu finds no hardware GPU and
    ConfigError when adapter or backend matches no adapter."""
    settings = Config(kernels=(kernel(1), kernel(2)), disabled=cpu, require_gpu=require_gpu,
                      allow_software_adapter=allow_software_adapter, power_preference=power_preference,
                      adapter=adapter, backend=backend, cpu_kernels=cpu_kernels, placement=placement)
    kernels = list(settings.kernels)
    with Host(settings) as host:
        snap = host.buffer_snapshot()
        report = DemoReport(snap.device, snap.state, snap.reason, snap.device_init * 1e3, require_gpu,
                            mode=_mode(settings))
        report.jobs.append(start_job(host, kernels))
        report.jobs.append(buffers_job(host, kernels))
        report.jobs.append(compiled_job(host, "Zig", "double.wasm", kernels[0]))
        report.jobs.append(compiled_job(host, "C", "double_c.wasm", kernels[0]))
    forced = [kernel(1), kernel(2, FORCED_MIN_ELEMENTS)]
    with Host(settings.with_changes(kernels=tuple(forced))) as host:
        report.jobs.insert(2, buffers_job(host, forced, "buffers, kernel 2 forced to CPU"))
    return report


def _mode(config: Config) -> str:
    if not config.cpu_kernels:
        return "CPU kernels off: below the GPU the guests' own runners answer (status 1)"
    return (f"CPU kernels on ({cpu_thread_count(config.cpu_threads)} threads), placement {config.placement}: "
            "eligible kernels off the GPU run as compiled Wasm (status 0)")


def _ms(value: float) -> str:
    return f"{value:.1f} ms" if value >= 1 else f"{value:.3f} ms"


def report_lines(report: DemoReport) -> list[str]:
    """The demo's text output."""
    if report.device:
        lines = [f"device: {report.device} ({report.state}), opened in {_ms(report.device_init_ms)}"]
    else:
        lines = [f"device: none ({report.state}: {report.reason})",
                 "every dispatch answers 1 (CPU fallback): the guests run their own CPU runners"
                 if not report.mode.startswith("CPU kernels on") else
                 "every eligible dispatch runs as a CPU kernel (status 0); the others answer 1"]
    if report.mode:
        lines.append(f"mode: {report.mode}")
    for job in report.jobs:
        lines.append("")
        lines.append(f"{job.name}: {'ok' if job.ok else 'FAILED'} ({job.guest}; {_ms(job.wall_ms)} wall clock for "
                     f"compile, instantiate and run)")
        for k in job.kernels:
            path = k.path
            if k.status == Status.CPU_FALLBACK and k.reason == report.reason and report.reason:
                path = f"CPU fallback ({k.reason_code}: see the device line)"
            timing = []
            if k.dispatch_ms is not None:
                timing.append(f"dispatch {_ms(k.dispatch_ms)}")
            if k.pipeline_ms is not None:
                timing.append(f"pipeline built in {_ms(k.pipeline_ms)}")
            lines.append(f"  kernel {k.kernel_id} {k.name}: {path}" + (f"; {', '.join(timing)}" if timing else ""))
        lines.append(f"  {job.detail}")
    lines.append("")
    problems = report.problems
    if problems:
        lines += [f"demo FAILED: {p}" for p in problems]
    else:
        runs = [k for j in report.jobs for k in j.kernels]
        gpu = sum(k.status == 0 and k.outcome != "CPU" for k in runs)
        compiled = sum(k.status == 0 and k.outcome == "CPU" for k in runs)
        cpu = sum(k.status == 1 for k in runs)
        kernels = f", {compiled} as CPU kernels" if compiled else ""
        lines.append(f"demo ok: {len(report.jobs)} jobs verified; {gpu} kernel runs on the GPU{kernels}, {cpu} on the CPU")
    return lines
