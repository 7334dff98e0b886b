"""The GPU dispatch path on a real adapter (lavapipe in CI): residency, seeds, dirty ranges, pool,
budgets, and failures injected at every stage (docs/design/abi.md §4, §9.3, §9.4)."""
from __future__ import annotations

import struct
import threading
import time

import numpy as np
import pytest

from wagogpu import Access, ElementType, Status
from wagogpu.gpu import FaultInjector
from wagogpu.host.module import build_pipelines

from ..conftest import kernel
from wagogpu.buffers import TransferTuning
from ..gpu_support import Guest, f32_bits, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

F32 = ElementType.F32
TWICE = "(f32.mul $x (f32.const 2))"
BODY_TWICE = ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
              " (f32.mul (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)) (f32.const 2)))")


def twice_guest(**config) -> Guest:
    config.setdefault("kernels", [kernel(1, "double"), kernel(2, "double2", min_elements=10_000_000)])
    host = gpu_host(**config)
    return Guest(host, kernels=runner_kernel("double", 0, 1, TWICE) + runner_kernel("double2", 0, 1, TWICE))


def prepared(g: Guest, values=(1, 2, 3, 4)) -> tuple[int, int]:
    a = g.create(F32, len(values))
    b = g.create(F32, len(values))
    assert g.set_f32(a, values) == 0
    g.bind(a, b)
    return a, b


def faulty(g: Guest, **kwargs) -> FaultInjector:
    inj = FaultInjector(**kwargs)
    g.host.device._faults = inj
    return inj


def test_resident_then_fallback():
    g = twice_guest(profile_stages=True)
    a, b = prepared(g)
    assert g.dispatch(1, 4) == Status.OK
    assert g.last.outcome == "GPU"
    assert g.last.hardware_submitted == (not g.host.device.info.is_software)
    assert (g.version(b), g.state(b)) == (2, "GPU_CURRENT")
    assert g.dispatch(2, 4) == Status.CPU_FALLBACK  # below threshold: fallback needs the GPU output
    last = g.last
    assert (last.outcome, last.reason_code, last.download_count) == ("CPU_FALLBACK_READY", "BELOW_THRESHOLD", 1)
    assert last.profile_valid and last.download > 0
    assert g.state(b) == "BOTH_CURRENT"
    assert g.inst.call("readBufferF32", b, 0) == 2.0
    g.inst.close()
    assert g.host.buffer_snapshot().runtime_buffer_bytes == 0
    g.host.close()


def test_error_after_completion_falls_back_without_publishing():
    g = twice_guest()
    a, b = prepared(g)
    faulty(g, fail={"after_completion": 1})
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK
    assert (g.version(b), g.state(b)) == (1, "CPU_CURRENT")
    assert (g.last.outcome, g.last.reason_code) == ("CPU_FALLBACK_READY", "DEVICE_FAILURE")
    snap = g.host.buffer_snapshot()
    assert (snap.state, snap.device_state) == ("FAILED", "QUARANTINED")
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK  # latched: no way back to the GPU
    assert g.last.reason_code == "NO_DEVICE"
    g.host.close()


def test_loss_and_repair():
    g = twice_guest()
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0
    g.host.device._flags.lost = True
    assert g.inst.call("copyBuffer32", b, 0, 0, 16, 4) == Status.CONTENTS_LOST
    assert g.state(b) == "CONTENTS_LOST"
    assert g.inst.call("setBuffer32", b, 0, 0, 0, 0) == 0  # zero-count set does not repair
    assert g.inst.call("copyBuffer32", b, 0, 0, 16, 4) == Status.CONTENTS_LOST
    assert g.dispatch(1, 4) == Status.CONTENTS_LOST  # never a fallback on stale data
    assert g.inst.call("setBuffer32", b, 0, 0, 0, 4) == 0  # a full set repairs
    assert g.inst.call("copyBuffer32", b, 0, 0, 16, 4) == 0
    assert g.inst.call("freeBuffer", a) == 0
    g.host.close()


def test_actual_write_set_versions_and_pool():
    g = twice_guest()
    a, b = prepared(g)
    for _ in range(4):
        assert g.dispatch(1, 4) == 0
    assert (g.version(a), g.state(a)) == (2, "BOTH_CURRENT")  # read-only use keeps the version
    assert g.version(b) == 5
    assert [n for _, n in g.inst.buffers.device.idle_outputs] == [16]
    assert g.host.device.stats.live_buffers == 4  # input, committed output, one idle scratch, uniform
    g.host.close()


def test_budget_rollback():
    g = twice_guest(max_instance_buffer_bytes=64)
    a, b = prepared(g)
    assert g.dispatch(1, 4) == Status.LIMIT_EXCEEDED
    assert g.last.reason_code == "RESOURCE_LIMIT"
    assert (g.version(b), g.state(b)) == (1, "CPU_CURRENT")
    assert g.inst.buffers.reserved <= 64
    g.host.close()


def test_unused_permissions_do_not_publish():
    k = kernel(1, "copy", bindings=[(0, F32, Access.READ_WRITE), (1, F32, Access.WRITE), (7, F32, Access.WRITE)])
    host = gpu_host(kernels=[k])
    body = ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
            " (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.copy") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.copy") (param i32))')
    h1, h2, h3 = (g.create(F32, 4) for _ in range(3))
    g.bind(h1, h2, h3, slots=[0, 1, 7])
    assert g.dispatch(1, 4) == 0
    assert [g.version(h) for h in (h1, h2, h3)] == [1, 2, 1]
    assert g.state(h1) == "BOTH_CURRENT" and g.state(h3) == "CPU_CURRENT"
    host.close()


def test_multi_output_atomicity():
    k = kernel(1, "two", bindings=[(0, F32, Access.READ), (1, F32, Access.WRITE), (2, F32, Access.WRITE)])
    host = gpu_host(kernels=[k])
    body = ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0) (f32.const 2))"
            "(call $writeBufferF32 (call $getBuffer (i32.const 2)) (local.get 0) (f32.const 3))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.two") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.two") (param i32))')
    hs = [g.create(F32, 4) for _ in range(3)]
    g.bind(*hs)
    faulty(g, fail={"after_completion": 1})
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK
    assert [(g.version(h), g.state(h)) for h in hs] == [(1, "CPU_CURRENT")] * 3
    host.close()


def test_scratch_reuse_allocates_nothing_in_steady_state():
    g = twice_guest()
    a, b = prepared(g)
    counts = []
    for _ in range(8):
        assert g.dispatch(1, 4) == 0
        assert g.inst.call("copyBuffer32", a, 0, 0, 32, 4) == 0
        assert g.inst.call("copyBuffer32", b, 0, 0, 48, 4) == 0
        counts.append(g.host.device.stats.allocations_total)
    assert len(set(counts[2:])) == 1, counts
    d = g.inst.buffers.device
    assert (d.staging_allocations, d.uniform_allocations) == (1, 1)
    diag = g.host.buffer_snapshot().instances[0]
    assert diag.reserved_bytes == (diag.cpu_bytes + diag.gpu_bytes + diag.staging_bytes + diag.scratch_bytes
                                   + diag.retained_pool_bytes)
    g.host.close()


def test_failed_readback_is_not_published():
    g = twice_guest()
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0
    faulty(g, fail={"unmap": 1})
    assert g.inst.call("copyBuffer32", b, 0, 0, 0, 4) == Status.DEVICE_ERROR
    assert g.inst.read_memory(0, 4) == struct.pack("<I", 0x3F800000)  # guest word untouched
    assert g.state(b) == "CPU_CURRENT"  # the data arrived before unmap failed
    before = g.inst.buffers.device.staging_allocations
    assert g.inst.call("copyBuffer32", b, 0, 0, 0, 4) == 0
    assert g.inst.buffers.device.staging_allocations == before
    assert np.array_equal(np.frombuffer(g.inst.read_memory(0, 16), np.float32), [2, 4, 6, 8])
    g.host.close()


@pytest.mark.parametrize("stage", ["submit", "wait", "timeout", "lost", "after_completion"])
def test_execute_failure_at_each_stage(stage):
    g = twice_guest()
    a, b = prepared(g)
    faulty(g, fail={stage: 1})
    status = g.dispatch(1, 4)
    assert status in (Status.CPU_FALLBACK, Status.CANCELLED)
    assert (g.version(b), g.state(b)) == (1, "CPU_CURRENT")
    assert g.host.buffer_snapshot().state == "FAILED"
    assert not g.host.buffer_snapshot().totals_complete
    g.inst.call("wago_gpu.cpu.double", 4)
    assert list(g.get_f32(b, 4, guest=64)) == [2, 4, 6, 8]  # CPU copies stay usable
    g.host.close()


@pytest.mark.parametrize("always", [False, True], ids=["once", "always"])
@pytest.mark.parametrize("stage", ["map", "timeout", "submit"])
def test_readback_failure_reports_and_keeps_guest_memory(stage, always):
    """The failed copy-back reports its status and leaves guest memory alone; the quarantine then
    reads b back if the device still can (a failure once), else b is lost (a failure every time)."""
    g = twice_guest()
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0
    g.inst.write_memory(64, b"\xAA" * 16)
    faulty(g, **({"fail_always": [stage]} if always else {"fail": {stage: 1}}))
    status = g.inst.call("copyBuffer32", b, 0, 0, 64, 4)
    assert status in (Status.DEVICE_ERROR, Status.CANCELLED)
    assert g.inst.read_memory(64, 16) == b"\xAA" * 16
    report = g.host.buffer_snapshot().quarantine
    if always:
        assert g.state(b) == "CONTENTS_LOST" and (report.rescued_buffers, report.lost_buffers) == (0, 1)
        with pytest.raises(Exception, match="status 8"):
            g.inst.call("readBufferF32", b, 0)
    else:
        assert g.state(b) == "CPU_CURRENT" and (report.rescued_buffers, report.lost_buffers) == (1, 0)
        assert g.inst.call("readBufferF32", b, 0) == 2.0
    g.host.close()


def test_shutdown_with_blocked_dispatch():
    g = twice_guest()
    a, b = prepared(g)
    inj = faulty(g, fail={"block": 1})
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(g.dispatch(1, 4)))
    t.start()
    assert inj.blocked.wait(5)
    t0 = time.perf_counter()
    closer = threading.Thread(target=g.host.close)
    closer.start()
    time.sleep(0.05)
    inj.release.set()
    t.join(3)
    closer.join(3)
    assert not t.is_alive() and not closer.is_alive()
    assert time.perf_counter() - t0 < 3
    assert g.host.buffer_snapshot().runtime_buffer_bytes == 0


SEED_CASES = {
    # name: (body, count, expected seed bytes, expected result)
    "full": (BODY_TWICE.replace("i32.const 0)) (local.get 0)", "i32.const 0)) (local.get 0)"), 4, 0, [2, 4, 6, 8]),
    "prefix": (BODY_TWICE, 3, 4, [2, 4, 6, 9]),
    "read-before-write": ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
                          " (f32.add (call $readBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)) (f32.const 1)))",
                          4, 16, [10, 10, 10, 10]),
    "store-first": ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0) (f32.const 3))"
                    "(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
                    " (f32.add (call $readBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)) (f32.const 1)))",
                    4, 0, [4, 4, 4, 4]),
    "saved-old-value": ("(local $t f32)"
                        "(local.set $t (call $readBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)))"
                        "(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0) (f32.const 3))"
                        "(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
                        " (f32.add (local.get $t) (f32.const 1)))", 4, 16, [10, 10, 10, 10]),
}


@pytest.mark.parametrize("case", list(SEED_CASES))
def test_seed_rules(case):
    body, count, seed_bytes, want = SEED_CASES[case]
    k = kernel(1, "seed", bindings=[(0, F32, Access.READ), (1, F32, Access.READ_WRITE)])
    host = gpu_host(kernels=[k])
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.seed") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.seed") (param i32))')
    a, b = g.create(F32, 4), g.create(F32, 4)
    assert g.set_f32(a, [1, 2, 3, 4]) == 0
    assert g.set_f32(b, [9, 9, 9, 9], guest=16) == 0
    g.bind(a, b)
    assert g.dispatch(1, count) == 0, g.last
    last = g.last
    assert last.device_copy_bytes == seed_bytes, last
    if case == "store-first":
        assert last.upload_count == 0
    if case == "full":
        assert last.gpu_upload_bytes == 16
    assert list(g.get_f32(b, 4, guest=64)) == want
    host.close()


def test_tail_boundaries():
    g = twice_guest()
    n = 513
    a, b = g.create(F32, n), g.create(F32, n)
    assert g.set_f32(a, np.arange(1, n + 1)) == 0
    g.bind(a, b)
    for count in (1, 255, 256, 257, 512, 513, 256):
        assert g.set_f32(b, np.full(n, 9), guest=4 * n) == 0
        assert g.dispatch(1, count) == 0
        assert g.last.device_copy_bytes == (n - count) * 4
        out = g.get_f32(b, n, guest=8 * n)
        expect = np.where(np.arange(n) < count, 2 * np.arange(1, n + 1), 9)
        assert np.array_equal(out, expect)
    g.host.close()


@pytest.mark.parametrize("profile", [False, True])
def test_parameter_reuse(profile):
    g = twice_guest(profile_stages=profile)
    a, b = prepared(g)
    got = []
    for i, count in enumerate((4, 4, 3, 3, 4, 4)):
        assert g.set_f32(a, [i + 1] * 4) == 0
        if i == 5:
            g.inst.buffers.release_idle()
        assert g.dispatch(1, count) == 0
        got.append(g.last.parameter_upload_count)
        assert g.last.parameter_upload_bytes == 16 * got[-1]
        out = g.get_f32(b, 4, guest=32)
        if count == 3:
            assert out[3] == 4  # element 3 keeps the previous count-4 result (pass 2: input 2)
        if profile and count == 4:
            assert g.last.device_copy == 0  # full coverage: no seed
    assert got == [1, 0, 1, 0, 1, 1]
    assert g.host.buffer_snapshot().totals.parameter_upload_count == 4
    g.host.close()


def test_dirty_range_uploads():
    g = twice_guest()
    n = 257
    a, b = g.create(F32, n), g.create(F32, n)
    assert g.set_f32(a, np.arange(1, n + 1)) == 0
    g.bind(a, b)
    assert g.dispatch(1, n) == 0
    assert g.last.gpu_upload_bytes == 1028
    assert g.set_f32(a, [32], offset=32, guest=2048) == 0
    assert g.set_f32(a, [64], offset=64, guest=2048) == 0
    g.inst.call("writebitsF32", a, 95, f32_bits([95])[0])
    assert g.dispatch(1, n) == 0
    last = g.last
    assert (last.upload_count, last.gpu_upload_bytes, last.logical_upload_bytes) == (1, 256, 256)
    assert g.inst.call("setBuffer32", a, 256, 0, 0, 2) == Status.INVALID_RANGE
    out = g.get_f32(b, n, guest=4096)
    expect = 2 * np.arange(1, n + 1, dtype=np.float32)
    expect[32], expect[64], expect[95] = 64, 128, 190
    assert np.array_equal(out, expect)
    assert g.dispatch(1, n) == 0
    assert g.last.upload_count == 0
    g.host.close()


@pytest.mark.parametrize("etype", [ElementType.I8, ElementType.U16, ElementType.F16])
def test_narrow_dirty_upload(etype):
    name = etype.name
    k = kernel(1, "copy", bindings=[(0, etype, Access.READ), (1, etype, Access.WRITE)], relaxed_float=True)
    host = gpu_host(kernels=[k])
    body = (f"(call $writeBuffer{name} (call $getBuffer (i32.const 1)) (local.get 0)"
            f" (call $readBuffer{name} (call $getBuffer (i32.const 0)) (local.get 0)))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.copy") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.copy") (param i32))')
    n = 65
    width = 1 if etype == ElementType.I8 else 2
    a, b = g.create(etype, n), g.create(etype, n)
    raw = bytearray()
    for j in range(n):
        raw += (j + 1).to_bytes(width, "little")
    assert g.set_raw(a, bytes(raw), n) == 0
    g.bind(a, b)
    assert g.dispatch(1, n) == 0
    assert g.set_raw(a, b"\x81", 1, offset=31, guest=1024) == Status.OK if width == 1 else True
    if width == 2:
        assert g.set_raw(a, b"\x81\x00", 1, offset=31, guest=1024) == 0
    assert g.dispatch(1, n) == 0
    assert (g.last.gpu_upload_bytes, g.last.logical_upload_bytes) == (4, width)
    assert g.inst.call("copyBuffer32", b, 0, 0, 2048, n) == 0
    out = g.inst.read_memory(2048, n * width)
    expect = bytearray(raw)
    expect[31 * width:32 * width] = (0x81).to_bytes(width, "little")
    if etype == ElementType.F16:
        # F16 goes through f32: 0x0081 is a half subnormal that survives the round trip exactly
        pass
    assert out == bytes(expect)
    host.close()


def test_in_place_three_dispatches():
    k = kernel(1, "inc", bindings=[(0, F32, Access.READ_WRITE)])
    host = gpu_host(kernels=[k])
    body = ("(call $writeBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)"
            " (f32.add (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)) (f32.const 1)))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.inc") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.inc") (param i32))')
    h = g.create(F32, 65)
    assert g.set_f32(h, np.arange(65) + 10) == 0
    g.bind(h)
    for _ in range(3):
        assert g.dispatch(1, 65) == 0
    assert np.array_equal(g.get_f32(h, 65, guest=1024), np.arange(65) + 13)
    host.close()


def test_exact_float_copy_next_to_arithmetic():
    k = kernel(1, "pair", bindings=[(0, F32, Access.READ), (1, F32, Access.WRITE), (2, F32, Access.WRITE)])
    host = gpu_host(kernels=[k])
    body = ("(local $s f32) (local.set $s (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)))"
            "(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0) (f32.add (local.get $s) (f32.const 1)))"
            "(call $writeBufferF32 (call $getBuffer (i32.const 2)) (local.get 0) (local.get $s))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.pair") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.pair") (param i32))')
    patterns = [0, 0x80000000, 1, 0x80000001, 0x7F800000, 0xFF800000, 0x7FC01234, 0xFFA00001, 0x3F800000]
    hs = [g.create(F32, len(patterns)) for _ in range(3)]
    assert g.set_raw(hs[0], struct.pack(f"<{len(patterns)}I", *patterns), len(patterns)) == 0
    g.bind(*hs)
    assert g.dispatch(1, len(patterns)) == 0
    assert g.inst.call("copyBuffer32", hs[2], 0, 0, 512, len(patterns)) == 0
    assert list(struct.unpack(f"<{len(patterns)}I", g.inst.read_memory(512, 4 * len(patterns)))) == patterns
    host.close()


@pytest.mark.parametrize("etype", [ElementType.I8, ElementType.U8, ElementType.I16, ElementType.U16,
                                   ElementType.I32, ElementType.U32])
def test_integer_fill(etype):
    name = etype.name
    k = kernel(1, "fill", bindings=[(0, etype, Access.WRITE), (1, etype, Access.WRITE)], relaxed_float=False)
    host = gpu_host(kernels=[k])
    body = (f"(local $saved i32) (call $writeBuffer{name} (call $getBuffer (i32.const 0)) (local.get 0) (i32.const -1))"
            "(local.set $saved (local.get 0)) (local.set 0 (i32.const 0)) (local.set 0 (local.get $saved))"
            f"(call $writeBuffer{name} (call $getBuffer (i32.const 1)) (local.get 0) (local.get 0))")
    g = Guest(host, extra=f'(func (export "wago_gpu.kernel.fill") (param i32) {body})'
                          '(func (export "wago_gpu.cpu.fill") (param i32))')
    n = 257
    a, b = g.create(etype, n), g.create(etype, n)
    g.bind(a, b)
    assert g.dispatch(1, n) == 0, g.last
    width = {1: "B", 2: "H", 4: "I"}[g.buf(a).stored_bytes]
    mask = (1 << (8 * g.buf(a).stored_bytes)) - 1
    for h, expect in ((a, [mask] * n), (b, [j & mask for j in range(n)])):
        assert g.inst.call("copyBuffer32", h, 0, 0, 0, n) == 0
        assert list(struct.unpack(f"<{n}{width}", g.inst.read_memory(0, n * g.buf(a).stored_bytes))) == expect
    host.close()


def test_f16_every_pattern():
    from wagogpu.abi.f16 import f32_bits_to_half, half_to_f32_bits

    k1 = kernel(1, "h2h", bindings=[(0, ElementType.F16, Access.READ), (1, ElementType.F16, Access.WRITE)])
    k2 = kernel(2, "h2f", bindings=[(0, ElementType.F16, Access.READ), (2, F32, Access.WRITE)])
    host = gpu_host(kernels=[k1, k2])
    rd = "(call $readBufferF16 (call $getBuffer (i32.const 0)) (local.get 0))"
    extra = (f'(func (export "wago_gpu.kernel.h2h") (param i32) (call $writeBufferF16 (call $getBuffer (i32.const 1)) (local.get 0) {rd}))'
             '(func (export "wago_gpu.cpu.h2h") (param i32))'
             f'(func (export "wago_gpu.kernel.h2f") (param i32) (call $writeBufferF32 (call $getBuffer (i32.const 2)) (local.get 0) {rd}))'
             '(func (export "wago_gpu.cpu.h2f") (param i32))')
    g = Guest(host, extra=extra)
    n = 65536
    g.inst.call("reserve_pages", 8) if False else None
    mem_pages_needed = (n * 6) // 65536 + 1
    patterns = np.arange(n, dtype=np.uint16)
    h_in, h_out, f_out = g.create(ElementType.F16, n), g.create(ElementType.F16, n), g.create(F32, n)
    g.inst.exports["memory"].grow(g.inst.store, mem_pages_needed)
    assert g.set_raw(h_in, patterns.tobytes(), n) == 0
    g.bind(h_in, h_out, f_out)
    assert g.dispatch(1, n) == 0 and g.dispatch(2, n) == 0
    assert g.inst.call("copyBuffer32", h_out, 0, 0, 0, n) == 0
    got = np.frombuffer(g.inst.read_memory(0, 2 * n), np.uint16)
    assert np.array_equal(got, f32_bits_to_half(half_to_f32_bits(patterns.astype(np.uint32))))
    assert g.inst.call("copyBuffer32", f_out, 0, 0, 0, n) == 0
    got32 = np.frombuffer(g.inst.read_memory(0, 4 * n), np.uint32)
    assert np.array_equal(got32, half_to_f32_bits(patterns.astype(np.uint32)))
    host.close()


def test_chain_stays_resident():
    """B = 2A, then A = B + 1, many times: no guest transfer and no readback between kernels."""
    k1 = kernel(1, "double")
    k2 = kernel(2, "addOne", bindings=[(0, F32, Access.WRITE), (1, F32, Access.READ)])
    host = gpu_host(kernels=[k1, k2])
    g = Guest(host, kernels=runner_kernel("double", 0, 1, TWICE) + runner_kernel("addOne", 1, 0, "(f32.add $x (f32.const 1))"))
    n = 1000
    a, b = g.create(F32, n), g.create(F32, n)
    assert g.set_f32(a, np.zeros(n)) == 0
    g.bind(a, b)
    before = host.buffer_snapshot().totals
    for _ in range(5):
        assert g.dispatch(1, n) == 0
        assert g.dispatch(2, n) == 0
    totals = host.buffer_snapshot().totals
    assert totals.download_count == before.download_count == 0
    assert totals.upload_count - before.upload_count == 1  # only the first input upload
    expect = np.zeros(n, np.float32)
    for _ in range(5):
        expect = 2 * expect + 1
    assert np.array_equal(g.get_f32(a, n, guest=0), expect)
    host.close()


def test_gpu_timestamps_and_kernel_diagnostics():
    g = twice_guest(profile_stages=True)  # timestamps cost a readback: taken when profiling
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0
    last = g.last
    if g.host.device.has_timestamps:
        assert last.timestamps_valid and last.device_compute > 0
    else:
        assert not last.timestamps_valid and last.device_compute == 0
    snap = g.host.buffer_snapshot()
    assert snap.device and snap.state == "READY" and snap.device_state == "USABLE"
    states = {d.kernel_id: d.state for d in snap.kernels}
    assert states == {1: "PIPELINE_READY", 2: "PIPELINE_READY"}
    assert all(d.contract_verified and d.translate > 0 for d in snap.kernels)
    g.host.close()


def test_pipelines_are_shared_between_modules_of_one_source():
    host = gpu_host(kernels=[kernel(1, "double")])
    from ..guests import abi_module

    wat = abi_module(kernels=runner_kernel("double", 0, 1, TWICE))
    host.compile(wat)
    misses = host.device.stats.pipeline_misses
    second = host.compile(wat)
    assert host.device.stats.pipeline_misses == misses
    inst = host.instantiate(second)
    second.close()  # closing the module keeps pipelines for live instances
    a = inst.call("createBufferPacked", 8, 4) & 0xFFFFFFFF
    b = inst.call("createBufferPacked", 8, 4) & 0xFFFFFFFF
    inst.call("bindBuffer", 0, a)
    inst.call("bindBuffer", 1, b)
    assert inst.call("dispatch", 1, 4) == 0
    host.close()


def test_float_kernel_without_consent_falls_back():
    host = gpu_host(kernels=[kernel(1, "double", relaxed_float=False)])
    g = Guest(host, kernels=runner_kernel("double", 0, 1, TWICE))
    a, b = prepared(g)
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK
    assert g.last.reason_code == "FLOAT_MODE"
    assert [d.state for d in host.buffer_snapshot().kernels] == ["CPU_ONLY"]
    host.close()


def test_pipeline_failure_falls_back():
    host = gpu_host(kernels=[kernel(1, "double")])
    host.device._faults = FaultInjector(fail_always=["pipeline"])
    g = Guest(host, kernels=runner_kernel("double", 0, 1, TWICE))
    a, b = prepared(g)
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK
    assert g.last.reason_code == "PIPELINE_FAILURE"
    assert [d.state for d in host.buffer_snapshot().kernels] == ["PIPELINE_FAILED"]
    host.close()


ERROR_WORD_WGSL = """struct Params { count: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> slot0: array<u32>;
@group(0) @binding(2) var<storage, read_write> slot1: array<u32>;
@group(0) @binding(3) var<storage, read_write> errors: array<atomic<u32>, 4>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x + id.y * 16776960u;
  if (index >= params.count) { return; }
  let x = bitcast<f32>(slot0[index]);
  if (x < 0.0) { atomicMax(&errors[0], 1u); return; }
  slot1[index] = bitcast<u32>(x * 2.0);
}
"""


def error_word_guest(**config) -> Guest:
    """twice_guest whose kernel 1 reports negative inputs through an error word."""
    import dataclasses

    g = twice_guest(**config)
    module = g.inst.module
    plan = module.contract.kernels[1]
    module.contract.kernels[1] = dataclasses.replace(plan, wgsl=ERROR_WORD_WGSL, error_word=True)
    module.dispatch_plans.clear()
    build_pipelines(g.host.context, module)
    return g


def test_kernel_error_word_publishes_nothing_and_falls_back():
    """A kernel that reports an error (as one that would trap in Wasm does) commits nothing."""
    g = error_word_guest()
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0  # no error raised: committed
    assert list(g.get_f32(b, 4, guest=64)) == [2, 4, 6, 8]
    assert g.set_f32(a, [1, -2, 3, 4]) == 0
    assert g.dispatch(1, 4) == Status.CPU_FALLBACK
    assert (g.last.reason_code, g.last.outcome) == ("KERNEL_TRAP", "CPU_FALLBACK_READY")
    assert (g.version(b), g.state(b)) == (2, "BOTH_CURRENT")  # the earlier commit, untouched
    assert g.host.buffer_snapshot().state == "READY"  # not a device failure: no quarantine
    assert g.set_f32(a, [5, 6, 7, 8]) == 0
    assert g.dispatch(1, 4) == 0  # the error word was reset for the next dispatch
    assert list(g.get_f32(b, 4, guest=64)) == [10, 12, 14, 16]
    g.host.close()


@pytest.mark.parametrize("readahead", [True, False], ids=["readahead", "no_readahead"])
def test_error_word_rides_in_the_dispatch_submission(readahead):
    """A kernel that can raise the error word is checked before it publishes, and the error word's
    read is served from a copy taken in the dispatch's own submission: one submission per dispatch
    (two with read-ahead off), the same statuses and results either way."""
    g = error_word_guest(tuning=TransferTuning(readahead=readahead))
    a, b = prepared(g)
    dev = g.host.device
    # (the fallback adds one submission of its own: the output's readback, so the CPU runner reads it)
    for values, status, fallback in (([1, 2, 3, 4], 0, 0), ([1, -2, 3, 4], Status.CPU_FALLBACK, 1),
                                     ([5, 6, 7, 8], 0, 0)):
        assert g.set_f32(a, values) == 0
        submissions, hits = dev.stats.submissions, dev.readahead_hits
        assert g.dispatch(1, 4) == status
        assert dev.stats.submissions - submissions == (1 if readahead else 2) + fallback
        assert dev.readahead_hits - hits == (1 if readahead else 0)
    assert list(g.get_f32(b, 4, guest=64)) == [10, 12, 14, 16]
    g.host.close()


@pytest.mark.parametrize("late", [False, True], ids=["in_time", "after_the_deadline"])
def test_error_word_readback_failure_takes_the_one_failure_path(late):
    """The error word's readback fails after the kernel ran: nothing is published, what the
    dispatch took stays charged as retired, the runtime is quarantined; past the deadline the
    answer is CANCELLED (as for any failed submission), before it a CPU fallback."""
    g = error_word_guest(run_timeout=1.0)
    a, b = prepared(g)
    dev = g.host.device
    faulty(g, fail={"map": 1})
    if late:
        real = dev.execute

        def slow(plan, timeout):
            result = real(plan, timeout)
            time.sleep(timeout + 0.05)  # completed, but the deadline has passed
            return result

        dev.execute = slow
    status = g.dispatch(1, 4)
    assert status == (Status.CANCELLED if late else Status.CPU_FALLBACK)
    last = g.last
    assert last.reason_code == ("CANCELLED" if late else "DEVICE_FAILURE") and not last.transfer_counts_complete
    assert (g.version(b), g.state(b)) == (1, "CPU_CURRENT")  # nothing published
    snap = g.host.buffer_snapshot()
    assert (snap.state, snap.totals_complete) == ("FAILED", False)
    assert snap.instances[0].scratch_bytes >= 16  # the output scratch is kept charged as retired
    g.host.close()


def test_scalar_readback_deadline_includes_lock_wait():
    g = twice_guest(run_timeout=0.5)  # the reference used 20 ms / 100 ms; a cold software device needs more
    a, b = prepared(g)
    assert g.dispatch(1, 4) == 0
    assert g.state(b) == "GPU_CURRENT"
    staging_before = g.inst.buffers.device.staging_allocations
    held = threading.Event()

    def hold() -> None:
        with g.host.context.lock:
            held.set()
            time.sleep(1.0)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(2)
    with pytest.raises(Exception, match="status 9"):
        g.inst.call("readbitsF32", b, 0)
    t.join()
    assert g.inst.buffers.device.staging_allocations == staging_before  # nothing was allocated
    assert g.state(b) == "GPU_CURRENT"
    g.host.close()


def test_read_ahead_after_a_readback_keeps_every_counter():
    """Once an output was read back, the next dispatch copies it out in its own submission; the
    copy-back then submits nothing, yet reports the readback exactly as §4.4 counts it. An output
    whose copy went unread stops being copied."""
    g = twice_guest()
    n = 1000
    a, b = prepared(g, values=np.arange(n))
    dev = g.host.device
    assert g.dispatch(1, n) == 0
    assert np.array_equal(g.get_f32(b, n), 2 * np.arange(n))  # an ordinary readback: hint set
    assert g.buf(b).readahead_hint and dev.readahead_hits == 0
    for i in range(1, 4):
        assert g.set_f32(a, np.arange(n) + i, guest=8192) == 0
        assert g.dispatch(1, n) == 0
        subs = dev.stats.submissions
        assert np.array_equal(g.get_f32(b, n), 2 * (np.arange(n) + i))
        assert dev.readahead_hits == i and dev.stats.submissions == subs
        last = g.last
        assert (last.download_count, last.gpu_download_bytes, last.logical_download_bytes) == (1, 4 * n, 4 * n)
        assert g.state(b) == "BOTH_CURRENT"
    # Two dispatches with no copy-back between them: the first copy goes unread, so the second
    # dispatch and later ones stop asking; a readback later turns it back on.
    assert g.dispatch(1, n) == 0 and g.buf(b).readahead_sent
    assert g.dispatch(1, n) == 0 and not g.buf(b).readahead_hint
    assert g.dispatch(1, n) == 0 and not g.buf(b).readahead_sent
    assert np.array_equal(g.get_f32(b, n), 2 * (np.arange(n) + 3)) and dev.readahead_hits == 3
    assert g.buf(b).readahead_hint
    g.host.close()
