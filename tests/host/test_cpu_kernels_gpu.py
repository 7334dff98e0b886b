"""CPU kernels beside a GPU (lavapipe in CI): threshold placement sends counts below min_elements
to the CPU kernel and the rest to the GPU; measured placement tries both devices, then keeps a
model per device that the snapshot shows, every answer the guest's runner's."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, ElementType, KernelConfig
from wagogpu.host.costmodel import MIN_SAMPLES, SETTLE, CopyLine

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


def measured_guest(**overrides):
    host = gpu_host(kernels=[KERNEL], cpu_kernels=True, placement="measured", **overrides)
    g = Guest(host, kernels=looped_kernel("triple", BODY))
    src, dst = g.create(E.I32, 4096), g.create(E.I32, 4096)
    g.inst.write_buffer(src, np.arange(4096, dtype=np.int32))
    g.bind(src, dst)
    return host, g, src, dst


def test_measured_copy_lines_are_fed_by_the_dispatches_own_copies():
    """Exploring the GPU uploads the input; the first CPU dispatch after it reads the GPU's output
    back (the count stops short of its length, so the kernel does not replace it whole): each
    direction's line holds measured copies (not the default) without any other import."""
    host, g, _src, dst = measured_guest()
    try:
        costs = host.context.costs
        outcomes = []
        for _ in range(2 * (MIN_SAMPLES + SETTLE)):  # a new band: GPU (transients + samples), then CPU
            assert g.dispatch(1, 4000) == 0
            outcomes.append(str(host.buffer_snapshot().last_dispatch.outcome))
            if outcomes[-1] == "CPU":
                break
        assert outcomes[0] == "GPU" and outcomes[-1] == "CPU"
        assert host.buffer_snapshot().last_dispatch.download_count == 1  # the CPU kernel read dst back
        assert costs.to_gpu.copies >= 1 and costs.to_cpu.copies == 1
        copies = host.buffer_snapshot().kernels[0].placement["copies"]
        assert copies["to_CPU"]["copies"] == 1 and copies["to_GPU"]["copies"] >= 1
        want = np.arange(4096, dtype=np.int32) * 3
        want[4000:] = 0
        assert np.array_equal(g.inst.read_buffer(dst), want)
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


def test_measured_placement_prices_no_readback_for_an_output_replaced_whole():
    """After a GPU dispatch the output lives on the GPU alone. Moving the kernel to the CPU reads it
    back only when the kernel does not replace it whole (cpukernels.replaced_slots), so only then does
    the measured choice price a copy toward the CPU."""
    host, g, _src, dst = measured_guest()
    try:
        priced: list[tuple[int, int]] = []

        class Recorded(CopyLine):
            def seconds(self, nbytes: int, copies: int) -> float:
                priced.append((nbytes, copies))
                return super().seconds(nbytes, copies)

        host.context.costs.to_cpu = Recorded()
        for count in (4096, 4096, 4000):
            assert g.dispatch(1, count) == 0
            assert str(host.buffer_snapshot().last_dispatch.outcome) == "GPU"  # exploring a new band
        assert priced == [(4 * 4096, 1)]  # the third dispatch only: a count short of the length keeps the tail
    finally:
        host.close()


def test_measured_placement_prices_the_uploads_the_gpu_makes_and_no_other():
    """A READ_WRITE output the kernel replaces whole is not uploaded by the GPU path (buffers/setup.py),
    so after the CPU kernel ran (the output current on the CPU alone) the measured choice prices a
    copy toward the GPU only for the input the guest rewrote; with a count short of the output's
    length the GPU must upload the output too, and that is priced."""
    kernel = replace(KERNEL, bindings=[BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.READ_WRITE)])
    host = gpu_host(kernels=[kernel], cpu_kernels=True, placement="measured")
    try:
        g = Guest(host, kernels=looped_kernel("triple", BODY))
        src, dst = g.create(E.I32, 4096), g.create(E.I32, 4096)
        x = np.arange(4096, dtype=np.int32)
        g.inst.write_buffer(src, x)
        g.bind(src, dst)
        priced: list[int] = []

        class Recorded(CopyLine):
            def seconds(self, nbytes: int, copies: int) -> float:
                priced.append(copies)
                return super().seconds(nbytes, copies)

        host.context.costs.to_gpu = Recorded()
        outcomes = []
        for _ in range(2 * (MIN_SAMPLES + SETTLE) + 4):  # the GPU explored, then the CPU kernel
            g.inst.write_buffer(src, x)  # the input current on the CPU alone before every dispatch
            assert g.dispatch(1, 4096) == 0
            outcomes.append(str(host.buffer_snapshot().last_dispatch.outcome))
        assert "CPU" in outcomes and "GPU" in outcomes
        assert priced and set(priced) == {1}  # the input alone, never the output replaced whole
        assert np.array_equal(g.inst.read_buffer(dst), 3 * x)
        priced.clear()
        g.inst.write_buffer(src, x)
        assert g.dispatch(1, 4000) == 0  # a new band: the GPU explored, its output's tail kept
        assert priced == [2]
        assert np.array_equal(g.inst.read_buffer(dst), 3 * x)
    finally:
        host.close()


def test_a_plans_overwritten_slots_are_its_written_slots_never_read_first():
    from wagogpu.compiler.contract import KernelClass, KernelPlan
    plan = KernelPlan(1, KernelClass.ELIGIBLE, read_slots=frozenset({0, 2}), write_slots=frozenset({1, 2, 3}),
                      read_before_write=frozenset({2}))
    assert plan.overwritten_slots == {1, 3}
    assert plan.replaces_whole(1, 64, 64) and not plan.replaces_whole(1, 63, 64)
    assert not plan.replaces_whole(2, 64, 64) and not plan.replaces_whole(0, 64, 64)


def test_a_pipelined_gpu_sample_is_taken_once_the_device_confirmed_it(monkeypatch):
    """With pipelined=True a GPU dispatch returns once recorded; the ones measured placement
    samples run alone (earlier work waited for, then the dispatch), so every GPU sample is taken
    with nothing left unconfirmed, and the GPU band still fills with samples."""
    from wagogpu.host import dispatch as dispatch_module
    host, g, _src, dst = measured_guest(pipelined=True)
    pending = host.context.residency.pending
    seen: list[int] = []
    observe = dispatch_module.observe

    def spy(ctx, module, kernel_id, where, count, op, started):
        if str(where) == "GPU":
            seen.append(len(pending.dispatches))
        observe(ctx, module, kernel_id, where, count, op, started)

    monkeypatch.setattr(dispatch_module, "observe", spy)
    try:
        assert host.context.dispatcher.pipelined
        for _ in range(MIN_SAMPLES + SETTLE):  # a new band explores the GPU first
            assert g.dispatch(1, 4000) == 0
        band = host.context.costs.model(g.inst.module.id, 1).bands[(4000).bit_length()]
        assert seen and not any(seen) and band.gpu.samples >= MIN_SAMPLES
        want = np.arange(4096, dtype=np.int32) * 3
        want[4000:] = 0
        assert np.array_equal(g.inst.read_buffer(dst), want)
    finally:
        host.close()
