"""CPU kernels beside a GPU (lavapipe in CI): threshold placement sends counts below min_elements
to the CPU kernel and the rest to the GPU; measured placement tries both devices, then keeps a
model per device that the snapshot shows, every answer the guest's runner's."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, ElementType, KernelConfig
from wagogpu.host.costmodel import MIN_SAMPLES

from ..gpu_support import Guest, gpu_host
from ..guests import looped_kernel

pytestmark = pytest.mark.gpu

E, A = ElementType, Access
BODY = ("(call $writeBufferI32 (call $getBuffer (i32.const 1)) (local.get $i) (i32.mul (i32.const 3)"
        " (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i))))")
KERNEL = KernelConfig(1, "wago_gpu.kernel.triple", "wago_gpu.cpu.triple",
                      [BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.WRITE)], min_elements=1000)


def dispatches(host, counts):
    g = Guest(host, kernels=looped_kernel("triple", BODY))
    src, dst = g.create(E.I32, max(counts)), g.create(E.I32, max(counts))
    x = np.arange(max(counts), dtype=np.int32) - 77
    g.inst.write_buffer(src, x)
    g.bind(src, dst)
    outcomes = []
    for n in counts:
        g.inst.write_buffer(dst, np.zeros(max(counts), np.int32))
        assert g.dispatch(1, n) == 0
        outcomes.append(str(host.buffer_snapshot().last_dispatch.outcome))
        got = g.inst.read_buffer(dst)
        assert np.array_equal(got[:n], x[:n] * 3) and not got[n:].any()
    return outcomes


def test_threshold_placement_uses_min_elements():
    host = gpu_host(kernels=[KERNEL], cpu_kernels=True)
    try:
        assert dispatches(host, [10, 999, 1000, 5000]) == ["CPU", "CPU", "GPU", "GPU"]
    finally:
        host.close()


def test_measured_placement_explores_then_models_both_devices():
    host = gpu_host(kernels=[KERNEL], cpu_kernels=True, placement="measured")
    try:
        counts = [64, 4096] * (2 * MIN_SAMPLES + 2)
        outcomes = dispatches(host, counts)
        assert {"CPU", "GPU"} <= set(outcomes)
        (model,) = [k.placement for k in host.buffer_snapshot().kernels if k.kernel_id == 1]
        assert model["CPU"]["samples"] >= MIN_SAMPLES and model["GPU"]["samples"] >= MIN_SAMPLES
        assert model["decisions"] == len(counts) and len(model["last"]) == 8
    finally:
        host.close()
