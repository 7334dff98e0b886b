"""Which backend a device runs on: the raw wgpu-native path, or wgpu-py's public API when the
environment asks for it or the installed wgpu is not the tested version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wagogpu.gpu import GpuDevice, GpuUnavailable
from wagogpu.gpu.api import load_api
from wagogpu.gpu.backend import PUBLIC_ENV, DeviceApi

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

ROOT = Path(__file__).resolve().parents[2]


def test_the_raw_path_is_the_default_and_the_environment_picks_the_public_one(monkeypatch) -> None:
    monkeypatch.delenv(PUBLIC_ENV, raising=False)
    with GpuDevice.open(allow_software_adapter=True) as dev:
        assert dev.api is DeviceApi.RAW and "(raw)" in repr(dev)
    monkeypatch.setenv(PUBLIC_ENV, "1")
    with GpuDevice.open(allow_software_adapter=True) as dev:
        assert dev.api is DeviceApi.PUBLIC
    with GpuDevice.open(allow_software_adapter=True, api="raw") as dev:  # asked for by name: still raw
        assert dev.api is DeviceApi.RAW
    with pytest.raises(ValueError):
        load_api("fastest")


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PUBLIC_ENV}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_an_untested_wgpu_version_falls_back_to_the_public_api() -> None:
    """The raw module refuses a wgpu other than 0.32.x at import; the device then opens on the
    public path and gives the same answer (run in a fresh interpreter with the version faked)."""
    code = """
import numpy as np, wgpu
wgpu.__version__ = "0.99.0"
try:
    import wagogpu.gpu._native
except ImportError as exc:
    print("refused:", exc)
from wagogpu.gpu import ExecutePlan, GpuDevice, GpuUnavailable
from tests.gpu.kernels import WGSL_X2, grid, params
dev = GpuDevice.open(allow_software_adapter=True)
pipe = dev.pipeline(WGSL_X2, [True, False])
a, b, u, st = dev.create_storage(400), dev.create_storage(400), dev.create_uniform(), dev.create_staging(400)
x = np.arange(100, dtype=np.uint32)
dev.execute(ExecutePlan(pipe, u, params(100), [a, b], uploads=[(a, 0, x)], workgroups=grid(100)), 10.0)
print("api:", dev.api, "ok:", bool(np.array_equal(dev.read(b, st, 400, 10.0), 2 * x)))
try:
    GpuDevice.open(allow_software_adapter=True, api="raw")
except GpuUnavailable as exc:
    print("raw:", exc.reason)
"""
    done = _run(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "refused: wgpu 0.99.0 is installed and the raw path was tested with 0.32.x", lines
    assert lines[1] == "api: public ok: True", lines
    assert lines[2].startswith("raw: the raw wgpu-native path is unavailable: wgpu 0.99.0"), lines


def test_importing_the_gpu_package_loads_no_wgpu() -> None:
    done = _run("import sys, wagogpu.gpu, wagogpu.gpu.faults; from wagogpu.gpu import DeviceTuning, list_adapters; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] == 'wgpu'))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_raw_request_without_wgpu_internals_is_unavailable(monkeypatch) -> None:
    import wagogpu.gpu as gpu_pkg

    monkeypatch.setitem(sys.modules, "wagogpu.gpu._native", None)  # the import now raises ImportError
    monkeypatch.delattr(gpu_pkg, "_native", raising=False)
    assert load_api(None)[0] is DeviceApi.PUBLIC
    with pytest.raises(GpuUnavailable, match="raw wgpu-native path is unavailable"):
        load_api(DeviceApi.RAW)
