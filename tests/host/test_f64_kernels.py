"""f64 kernels through real Hosts: native f64 arithmetic runs on the GPU where the device has shader-f64 and
shader-int64 (lavapipe has both), and on the CPU with the reason where it has not (the device's feature set
faked off); kernels whose f64 code is all exact integer code (comparisons, roundings, conversions, min/max)
need neither and run on the GPU anyway. Every answer is the CPU runner's."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.gpu.device import GpuDevice
from wagogpu.host.context import F64_REASON

from ..gpu_support import Guest, gpu_host
from ..guests import looped_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access
X = "(call $readBufferF64 (call $getBuffer (i32.const 0)) (local.get $i))"


def out(value: str) -> str:
    return f"(call $writeBufferF64 (call $getBuffer (i32.const 1)) (local.get $i) {value})"


KERNELS = (looped_kernel("arith", out(f"(f64.add (f64.mul {X} {X}) (f64.div (f64.const 1) (f64.sqrt (f64.abs {X}))))"))
           + looped_kernel("exact", out(f"(f64.min (f64.nearest (f64.promote_f32 (f32.demote_f64 {X})))"
                                        f" (f64.convert_i64_s (i64.trunc_sat_f64_s {X})))")))
BINDS = [BindingConfig(0, E.F64, A.READ), BindingConfig(1, E.F64, A.WRITE)]
CONFIGS = [KernelConfig(1, "wago_gpu.kernel.arith", "wago_gpu.cpu.arith", BINDS, relaxed_float=True),
           KernelConfig(2, "wago_gpu.kernel.exact", "wago_gpu.cpu.exact", BINDS, relaxed_float=True)]
RUNNERS = {1: "wago_gpu.cpu.arith", 2: "wago_gpu.cpu.exact"}


def run(host: Host, kernel_id: int, x: np.ndarray):
    g = Guest(host, kernels=KERNELS)
    n = x.size
    src, dst = g.create(E.F64, n), g.create(E.F64, n)
    assert g.set_raw(src, x.tobytes(), n) == 0
    g.bind(src, dst)
    status = g.dispatch(kernel_id, n)
    last = host.buffer_snapshot().last_dispatch
    if status == 1:
        g.inst.call(RUNNERS[kernel_id], n)
    assert g.inst.call("copyBuffer32", dst, 0, 0, 0, n) == 0
    return status, np.frombuffer(g.inst.read_memory(0, 8 * n), dtype=np.uint64).copy(), last


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-1e6, 1e6, 500), rng.uniform(-2, 2, 500),
                        [0.0, -0.0, 0.5, -2.5, 1e300, -1e-300, np.inf, -np.inf, np.nan, 2.0 ** 63, -(2.0 ** 70)]])
    return x.astype(np.float64)


@pytest.fixture(scope="module")
def cpu():
    host = Host(Config(kernels=CONFIGS, disabled=True))
    yield host
    host.close()


def same(got: np.ndarray, want: np.ndarray, ulps: int = 0) -> bool:
    """Equal bits up to `ulps` (same sign), NaN matching NaN (a NaN's payload and sign may differ)."""
    nan = np.isnan(got.view(np.float64)) & np.isnan(want.view(np.float64))
    g, w = got[~nan], want[~nan]
    close = (g >> np.uint64(63) == w >> np.uint64(63)) & (np.abs(g.astype(np.int64) - w.astype(np.int64)) <= ulps)
    return bool(np.all(close))


@pytest.mark.parametrize("kernel_id", [1, 2])
def test_f64_kernels_run_on_a_device_with_f64(cpu, values, kernel_id):
    gpu = gpu_host(kernels=CONFIGS)
    try:
        assert gpu.device is not None and gpu.device.has_f64
        want_status, want, _ = run(cpu, kernel_id, values)
        status, got, last = run(gpu, kernel_id, values)
        assert (want_status, status, str(last.outcome)) == (1, 0, "GPU")
        # lavapipe's f64 is exact IEEE; a hardware GPU's division and square root may be a few ulps off
        assert same(got, want, 0 if kernel_id == 2 or gpu.device.info.is_software else 8)
    finally:
        gpu.close()


def test_without_f64_the_arithmetic_kernel_runs_on_the_cpu(cpu, values, monkeypatch):
    monkeypatch.setattr(GpuDevice, "has_f64", property(lambda self: False))
    gpu = gpu_host(kernels=CONFIGS)
    try:
        _, want, _ = run(cpu, 1, values)
        status, got, last = run(gpu, 1, values)
        assert (status, str(last.reason_code), last.reason) == (1, "UNSUPPORTED_KERNEL", F64_REASON)
        assert same(got, want)
        _, want, _ = run(cpu, 2, values)
        status, got, last = run(gpu, 2, values)  # integer code only: on the GPU without the feature
        assert (status, str(last.outcome)) == (0, "GPU") and same(got, want)
    finally:
        gpu.close()
