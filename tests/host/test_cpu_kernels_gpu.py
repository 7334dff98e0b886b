"""CPU kernels beside a GPU (lavapipe in CI): threshold placement sends counts below min_elements
to the CPU kernel and the rest to the GPU; measured placement tries both devices, then keeps a
model per device that the snapshot shows, every answer the guest's runner's."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, ElementType, KernelConfig
from wagogpu.host.costmodel import MIN_SAMPLES, SETTLE

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
        counts = [64, 4096] * (2 * (MIN_SAMPLES + SETTLE) + 2)
        outcomes = dispatches(host, counts)
        assert {"CPU", "GPU"} <= set(outcomes)
        (model,) = [k.placement for k in host.buffer_snapshot().kernels if k.kernel_id == 1]
        assert model["CPU"]["samples"] >= MIN_SAMPLES and model["GPU"]["samples"] >= MIN_SAMPLES
        assert model["decisions"] == len(counts) and len(model["last"]) == 8
    finally:
        host.close()


def measured_guest(**overrides):
    host = gpu_host(kernels=[KERNEL], cpu_kernels=True, placement="measured", **overrides)
    g = Guest(host, kernels=looped_kernel("triple", BODY))
    src, dst = g.create(E.I32, 4096), g.create(E.I32, 4096)
    g.inst.write_buffer(src, np.arange(4096, dtype=np.int32))
    g.bind(src, dst)
    return host, g, src, dst


def test_measured_copy_lines_are_fed_by_the_dispatches_own_copies():
    """Exploring the GPU uploads the input; the first CPU dispatch after it reads the GPU's output
    back: each direction's line holds measured copies (not the default) without any other import."""
    host, g, _src, dst = measured_guest()
    try:
        costs = host.context.costs
        outcomes = []
        for _ in range(2 * (MIN_SAMPLES + SETTLE)):  # a new band: GPU (transients + samples), then CPU
            assert g.dispatch(1, 4096) == 0
            outcomes.append(str(host.buffer_snapshot().last_dispatch.outcome))
            if outcomes[-1] == "CPU":
                break
        assert outcomes[0] == "GPU" and outcomes[-1] == "CPU"
        assert host.buffer_snapshot().last_dispatch.download_count == 1  # the CPU kernel read dst back
        assert costs.to_gpu.copies >= 1 and costs.to_cpu.copies == 1
        copies = host.buffer_snapshot().kernels[0].placement["copies"]
        assert copies["to_CPU"]["copies"] == 1 and copies["to_GPU"]["copies"] >= 1
        assert np.array_equal(g.inst.read_buffer(dst), np.arange(4096, dtype=np.int32) * 3)
    finally:
        host.close()


def test_a_dispatchs_upload_is_not_in_its_kernel_sample():
    """Profile mode keeps the stage times in the record: the GPU band's sample of a dispatch that
    uploaded its input is at most the dispatch's total less its upload."""
    host, g, src, _dst = measured_guest(profile_stages=True)
    try:
        for _ in range(SETTLE):  # the band's first GPU dispatches: transients (the first is cold), not samples
            assert g.dispatch(1, 4096) == 0
        g.inst.write_buffer(src, np.arange(4096, dtype=np.int32) + 1)  # only the CPU copy is current now
        assert g.dispatch(1, 4096) == 0
        op = host.buffer_snapshot().last_dispatch
        assert str(op.outcome) == "GPU" and op.upload_count == 1 and op.upload > 0
        band = host.context.costs.model(g.inst.module.id, 1).bands[(4096).bit_length()]
        assert len(band.gpu.seconds) == 1
        assert 0 < band.gpu.seconds[-1] <= op.total - op.upload
    finally:
        host.close()
