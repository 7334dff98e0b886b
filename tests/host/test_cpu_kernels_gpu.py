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


def _kernel(kid: int, name: str, min_elements: int) -> KernelConfig:
    return KernelConfig(kid, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.WRITE)], min_elements=min_elements)


SRC = "(call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i))"
OUT = "(call $writeBufferI32 (call $getBuffer (i32.const 1)) (local.get $i) {})"
OUTPUT_KERNELS = {  # name: (id, min_elements, body): "triple" on the GPU, the rest CPU kernels
    "triple": (1, 1, BODY),
    "plus": (2, 1 << 20, OUT.format(f"(i32.add {SRC} (i32.const 1))")),
    "evens": (3, 1 << 20, f"(if (i32.eqz (i32.and (local.get $i) (i32.const 1))) (then {OUT.format(SRC)}))"),
    "quotient": (4, 1 << 20, OUT.format(f"(i32.div_s (i32.const 1000) {SRC})")),
}


def test_a_cpu_kernel_reads_back_only_the_outputs_it_does_not_replace_whole():
    kernels = [_kernel(kid, name, low) for name, (kid, low, _) in OUTPUT_KERNELS.items()]
    host = gpu_host(kernels=kernels, cpu_kernels=True)
    try:
        g = Guest(host, kernels="".join(looped_kernel(name, body) for name, (_, _, body) in OUTPUT_KERNELS.items()))
        n = 4096
        src, dst = g.create(E.I32, n), g.create(E.I32, n)
        x = np.arange(n, dtype=np.int32) - 77  # x[77] == 0: "quotient" divides by it
        g.inst.write_buffer(src, x)
        g.bind(src, dst)

        def run(kid: int, count: int) -> tuple[int, int, str]:
            assert g.dispatch(1, n) == 0 and str(g.host.buffer_snapshot().last_dispatch.outcome) == "GPU"
            assert not g.buf(dst).record.flags & 1  # the output lives on the GPU alone: its CPU copy is stale
            status = g.dispatch(kid, count)
            last = host.buffer_snapshot().last_dispatch
            return status, last.download_count, str(last.outcome if status == 0 else last.reason_code)

        assert run(2, n) == (0, 0, "CPU")  # replaced whole: not read back ...
        assert np.array_equal(g.inst.read_buffer(dst), x + 1)  # ... and every element is the kernel's
        assert run(3, n) == (0, 1, "CPU")  # a conditional write keeps the others: read back first
        want = 3 * x
        want[::2] = x[::2]
        assert np.array_equal(g.inst.read_buffer(dst), want)
        assert run(2, n // 2) == (0, 1, "CPU")  # a count below the length keeps the tail: read back
        assert np.array_equal(g.inst.read_buffer(dst), np.concatenate([x[:n // 2] + 1, 3 * x[n // 2:]]))
        assert run(4, n) == (1, 0, "KERNEL_TRAP")  # not read back, and the trap publishes nothing:
        assert np.array_equal(g.inst.read_buffer(dst), 3 * x)  # the GPU's version is still the buffer's
    finally:
        host.close()
