"""One run of the testsuite on one Host: plan every file, run every job, sum up per file."""
from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path

import wagogpu

from .check import FileResult, summarize
from .plan import plan_file
from .runner import JobRunner, kernel_configs, open_host

TESTSUITE = Path(__file__).resolve().parent.parent / "testsuite"


@dataclass(frozen=True, slots=True)
class SuiteRun:
    adapter: dict  # the JSONL adapter record
    results: list[FileResult]

    @property
    def name(self) -> str:
        return str(self.adapter["adapter"])


def wast_files(names: list[str] | None = None) -> list[Path]:
    """The copied `.wast` files, all of them or those named."""
    if not names:
        return sorted(TESTSUITE.glob("*.wast"))
    paths = [TESTSUITE / (n if n.endswith(".wast") else n + ".wast") for n in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"no such testsuite file: {', '.join(missing)} (in {TESTSUITE})")
    return paths


def _wgpu_info(device: str) -> dict:
    """Backend and driver of the adapter named `device`, from wgpu's adapter list (Vulkan first)."""
    import wgpu

    found = [dict(a.info) for a in wgpu.gpu.enumerate_adapters_sync() if a.info["device"] == device]
    found.sort(key=lambda info: info.get("backend_type") != "Vulkan")
    return found[0] if found else {}


def run_suite(files: list[Path], allow_software_adapter: bool = True, require_gpu: bool = False,
              strict_float: bool = False) -> SuiteRun:
    """Plan and run `files` on one Host whose GPU path must be live (RuntimeError if it is not);
    strict_float: every kernel in the exact float mode."""
    start = time.perf_counter()
    plans = [plan_file(p) for p in files]
    configs = kernel_configs([j for p in plans for j in p.jobs], strict_float)
    host = open_host(configs, allow_software_adapter, require_gpu)
    try:
        runner = JobRunner(host, configs)
        results = [summarize(plan, [runner.run(job) for job in plan.jobs]) for plan in plans]
        device = host.buffer_snapshot().device
    finally:
        host.close()
    info = _wgpu_info(device)
    commit = (TESTSUITE / "SOURCE_COMMIT").read_text(encoding="utf-8").split()[0]
    adapter = {"record": "adapter", "adapter": device, "backend": info.get("backend_type", "?"),
               "driver": info.get("description", "?"), "adapter_type": info.get("adapter_type", "?"),
               "wagogpu": wagogpu.__version__, "python": platform.python_version(),
               "testsuite_commit": commit, "files": len(files), "seconds": round(time.perf_counter() - start, 2)}
    if strict_float:
        adapter["strict_float"] = True
    return SuiteRun(adapter, results)
