"""CPU versus GPU: the same kernels through the guest's CPU runner and through the device, at sizes
that cross the workgroup and 2-D grid boundaries. Float kernels need relaxed_float and may differ by
8e-6 * max(1, |cpu|); copies and integer kernels must be bit-exact."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

from ..gpu_support import gpu_host

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

GUEST = (Path(__file__).resolve().parents[2] / "bench" / "guests" / "cpu_fallback.wat").read_text()
SIZES = [1, 4, 1000, 65537, 300000]


def kernels() -> list[KernelConfig]:
    binds = [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)]
    return [KernelConfig(1, "wago_gpu.kernel.twice", "wago_gpu.cpu.twice", binds, relaxed_float=True),
            KernelConfig(2, "wago_gpu.kernel.poly32", "wago_gpu.cpu.poly32", binds, relaxed_float=True)]


def run(host: Host, kernel_id: int, x: np.ndarray) -> tuple[int, np.ndarray]:
    n = x.size
    inst = host.instantiate(host.compile(GUEST))
    try:
        inst.call("reserve", n)
        inst.memory_view()[:4 * n].view(np.float32)[:] = x
        assert inst.call("setup", n) == 0
        status = inst.call("dispatch", kernel_id, n)
        if status == 1:
            inst.call("wago_gpu.cpu.twice" if kernel_id == 1 else "wago_gpu.cpu.poly32", n)
        assert inst.call("fetch", n) == 0
        return status, inst.memory_view()[4 * n:8 * n].view(np.float32).copy()
    finally:
        inst.close()


@pytest.fixture(scope="module")
def hosts():
    cpu = Host(Config(kernels=kernels(), disabled=True))
    gpu = gpu_host(kernels=kernels())
    yield cpu, gpu
    cpu.close()
    gpu.close()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kernel_id", [1, 2])
def test_cpu_and_gpu_agree(hosts, kernel_id, n):
    cpu, gpu = hosts
    x = np.random.default_rng(n).uniform(-1.5, 1.5, n).astype(np.float32)
    cpu_status, want = run(cpu, kernel_id, x)
    gpu_status, got = run(gpu, kernel_id, x)
    assert (cpu_status, gpu_status) == (1, 0)
    if kernel_id == 1:
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # x*2 is exact
    else:
        tol = 8e-6 * np.maximum(1.0, np.abs(want))
        assert np.all(np.abs(got - want) <= tol), float(np.max(np.abs(got - want) / tol))
