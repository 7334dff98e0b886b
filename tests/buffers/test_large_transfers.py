"""Large-buffer transfer paths (extensions): a full set that prestages its upload, and a copy-back
that leaves the readback parked in its mapped staging. Same answers, statuses and counters as the
plain paths (docs/design/abi.md §4.3-4.7); only where the bytes wait differs. Thresholds are lowered so that
small buffers take these paths."""
from __future__ import annotations

import time

import numpy as np
import pytest

from wagogpu import ElementType, Status
from wagogpu.buffers import TransferTuning
from wagogpu.gpu import FaultInjector

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

F32 = ElementType.F32
N = 2048
TWICE = "(f32.mul $x (f32.const 2))"


#: The large-transfer paths from 4 KiB (so that small buffers take them), read-ahead off.
SMALL = TransferTuning(prestage_min_bytes=4096, park_min_bytes=4096, readahead=False)
#: The plain paths only.
PLAIN = TransferTuning(prestage_min_bytes=1 << 62, park_min_bytes=1 << 62, readahead=False)


def guest(tuning: TransferTuning = SMALL) -> Guest:
    g = Guest(gpu_host(kernels=[kernel(1, "double")], tuning=tuning), kernels=runner_kernel("double", 0, 1, TWICE))
    return g


def prepared(g: Guest) -> tuple[int, int]:
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    return a, b


def values(i: int) -> np.ndarray:
    return (np.arange(N) % 1000 + i).astype(np.float32)


def fresh_rounds(g: Guest, a: int, b: int, rounds: int = 4) -> list[tuple]:
    """set, dispatch, copy back; the counters of each step."""
    seen = []
    for i in range(rounds):
        assert g.set_f32(a, values(i)) == 0
        assert g.dispatch(1, N) == 0
        d = g.last
        assert np.array_equal(g.get_f32(b, N, guest=16384), 2 * values(i))
        c = g.last
        seen.append((d.upload_count, d.gpu_upload_bytes, d.logical_upload_bytes, d.device_copy_bytes,
                     c.download_count, c.gpu_download_bytes, c.logical_download_bytes))
    return seen


def test_fresh_rounds_match_the_plain_paths_counter_for_counter() -> None:
    g = guest()
    a, b = prepared(g)
    dev = g.host.device
    fast = fresh_rounds(g, a, b)
    assert g.buf(a).stage_hint and g.buf(b).parked is not None
    assert g.state(b) == "BOTH_CURRENT"
    fast_totals = g.host.buffer_snapshot().totals
    g.host.close()
    g = guest(PLAIN)
    a, b = prepared(g)
    plain = fresh_rounds(g, a, b)
    assert fast == plain and fast[1] == (1, 4 * N, 4 * N, 0, 1, 4 * N, 4 * N)
    assert g.host.buffer_snapshot().totals == fast_totals
    assert dev.closed
    g.host.close()


def test_a_prestaged_set_is_uploaded_from_its_stage() -> None:
    g = guest()
    a, b = prepared(g)
    assert g.set_f32(a, values(0)) == 0 and g.buf(a).stage is None  # no hint yet
    assert g.dispatch(1, N) == 0 and g.buf(a).stage_hint
    reserved = g.inst.buffers.reserved
    assert g.set_f32(a, values(1)) == 0
    stage = g.buf(a).stage
    assert stage is not None and g.inst.buffers.reserved == reserved + 4 * N  # charged while held
    assert g.host.buffer_snapshot().instances[0].retained_pool_bytes >= 4 * N
    assert g.dispatch(1, N) == 0 and g.buf(a).stage is None and stage.address == 0
    assert g.last.upload_count == 1 and g.last.gpu_upload_bytes == 4 * N
    assert np.array_equal(g.get_f32(b, N), 2 * values(1))
    g.host.close()


def test_a_write_after_the_set_retires_the_stage() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=1)
    assert g.set_f32(a, values(5)) == 0 and g.buf(a).stage is not None
    g.inst.call("writeBufferF32", a, 7, 1000.0)  # a scalar write: new version, stage now stale
    reserved = g.inst.buffers.reserved
    assert g.dispatch(1, N) == 0
    want = 2 * values(5)
    want[7] = 2000.0
    assert np.array_equal(g.get_f32(b, N), want)
    assert not g.buf(a).stage_hint or g.buf(a).stage is None
    assert g.inst.buffers.reserved <= reserved
    # A partial set after a prestaged one: the upload covers it and the stage is not used.
    fresh_rounds(g, a, b, rounds=1)
    assert g.set_f32(a, values(2)) == 0 and g.buf(a).stage is not None
    assert g.set_f32(a, [99.0], offset=3, guest=40000) == 0
    assert g.dispatch(1, N) == 0
    want = 2 * values(2)
    want[3] = 198.0
    assert np.array_equal(g.get_f32(b, N), want)
    g.host.close()


def test_a_parked_readback_serves_later_reads_without_another_download() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=1)
    buf = g.buf(b)
    assert buf.parked is not None and g.inst.buffers.device.staging is None  # the staging is parked
    assert np.array_equal(g.get_f32(b, N, guest=4096), 2 * values(0))
    assert g.last.download_count == 0  # same version: no second readback
    # A partial copy-back from the parking.
    assert g.inst.call("copyBuffer32", b, 100, 0, 0, 5) == 0
    assert np.array_equal(np.frombuffer(g.inst.read_memory(0, 20), np.float32), 2 * values(0)[100:105])
    # A scalar read needs the CPU bytes: they are copied in from the parking, not read back again.
    downloads = g.host.buffer_snapshot().totals.download_count
    assert g.inst.call("readBufferF32", b, 9) == 2 * values(0)[9]
    assert buf.parked is None and g.state(b) == "BOTH_CURRENT"
    assert g.inst.buffers.device.staging is not None
    assert g.host.buffer_snapshot().totals.download_count == downloads
    g.host.close()


def test_parked_then_written_or_partly_set() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=1)
    # A partial set of the parked buffer keeps the rest of its (GPU-made) contents.
    assert g.set_f32(b, [5.0], offset=10, guest=40000) == 0
    want = 2 * values(0)
    want[10] = 5.0
    assert g.buf(b).parked is None and np.array_equal(g.get_f32(b, N), want)
    # A dispatch that writes a parked buffer retires the parking.
    fresh_rounds(g, a, b, rounds=1)
    assert g.buf(b).parked is not None
    assert g.dispatch(1, N) == 0 and g.buf(b).parked is None
    assert np.array_equal(g.get_f32(b, N), 2 * values(0))
    g.host.close()


def test_quarantine_keeps_parked_contents() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=2)
    assert g.buf(b).parked is not None and g.set_f32(a, values(3)) == 0 and g.buf(a).stage is not None
    g.host.device._faults = FaultInjector(fail={"lost": 1})
    assert g.dispatch(1, N) == Status.CPU_FALLBACK  # the device failed: quarantined, guest's runner next
    assert g.host.buffer_snapshot().device_state == "QUARANTINED"
    assert g.buf(b).parked is None and g.buf(a).stage is None
    assert g.state(a) == "CPU_CURRENT" and g.state(b) == "CPU_CURRENT"
    # b holds the last committed output (round 2's), copied in from the parking; a the new set.
    assert np.array_equal(g.get_f32(b, N), 2 * values(1))
    assert np.array_equal(g.get_f32(a, N), values(3))
    g.host.close()


def test_quarantine_before_the_dispatch_keeps_the_parked_version() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=1)
    g.host.context.residency.quarantine("test")
    assert g.state(b) == "CPU_CURRENT"
    assert np.array_equal(g.get_f32(b, N), 2 * values(0))
    g.host.close()


def test_free_and_close_release_what_is_held() -> None:
    g = guest()
    before = g.inst.buffers.reserved
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=2)
    assert g.set_f32(a, values(1)) == 0
    assert g.buf(a).stage is not None and g.buf(b).parked is not None
    assert g.inst.call("freeBuffer", a) == 0 and g.inst.call("freeBuffer", b) == 0
    g.inst.buffers.release_idle()
    assert g.inst.buffers.reserved == before
    g.inst.close()
    assert g.host.buffer_snapshot().runtime_buffer_bytes == 0
    g.host.close()


def test_eviction_frees_only_what_is_needed_in_order() -> None:
    g = guest()
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=2)
    assert g.set_f32(a, values(4)) == 0
    ib, d = g.inst.buffers, g.inst.buffers.device
    assert g.buf(b).parked is not None and g.buf(a).stage is not None and d.uniform is not None
    reserved = ib.reserved
    # Any eviction takes the small buffers; then upload stages before parked readbacks (no
    # readback staging or idle output exists here: the parked one is the staging, and outputs
    # whose old contents are parked are written in place).
    assert ib.release_idle(1) == 16 and d.uniform is None and g.buf(a).stage is not None
    assert ib.release_idle(1) == 4 * N and g.buf(a).stage is None and g.buf(b).parked is not None
    downloads = g.host.buffer_snapshot().totals.download_count
    assert ib.release_idle(1) == 4 * N  # a parked readback: copied into the CPU copy first
    assert g.buf(b).parked is None and g.state(b) == "BOTH_CURRENT" and d.staging is None
    assert ib.reserved == reserved - 16 - 8 * N and ib.release_idle() == 0
    assert np.array_equal(g.get_f32(b, N), 2 * values(1))
    assert g.host.buffer_snapshot().totals.download_count == downloads  # nothing read back again
    assert g.dispatch(1, N) == 0 and np.array_equal(g.get_f32(b, N), 2 * values(4))
    g.host.close()


def test_a_dispatch_never_evicts_the_parameter_block_it_is_setting_up() -> None:
    """Found by the random-sequence test under a tight budget: the parameter payload's reservation
    evicted the uniform just created for it, and the dispatch then trapped on a freed uniform. The
    readback staging must go instead. Budget: 24N words' worth + 24 bytes, so the new scratch and
    the uniform fit and the 16-byte payload does not."""
    g = Guest(gpu_host(kernels=[kernel(1, "double")], max_instance_buffer_bytes=24 * N + 24, tuning=PLAIN),
              kernels=runner_kernel("double", 0, 1, TWICE))
    a, b = prepared(g)
    ib, d = g.inst.buffers, g.inst.buffers.device
    assert g.set_f32(a, values(0)) == 0 and g.dispatch(1, N) == 0
    assert ib.release_idle(1) == 16 and d.uniform is None  # the small buffers go first
    assert np.array_equal(g.get_f32(b, N, guest=16384), 2 * values(0))
    assert d.staging is not None and ib.reserved == 20 * N
    assert g.dispatch(1, N) == 0, g.last.reason
    assert d.uniform is not None and d.staging is None and g.last.parameter_upload_count == 1
    assert np.array_equal(g.get_f32(b, N, guest=16384), 2 * values(0))
    g.host.close()


def test_an_output_written_in_place_is_restored_when_the_dispatch_is_cancelled_late() -> None:
    """b's contents are parked, so the kernel writes b's committed copy itself; a deadline that
    passes after completion publishes nothing, and b's GPU copy gets its old words back."""
    g = Guest(gpu_host(kernels=[kernel(1, "double")], run_timeout=0.5, tuning=SMALL),
              kernels=runner_kernel("double", 0, 1, TWICE))
    a, b = prepared(g)
    fresh_rounds(g, a, b, rounds=2)  # b holds 2 * values(1), parked
    old_gpu = g.buf(b).gpu
    assert g.set_f32(a, values(7)) == 0
    dev = g.host.device
    real = dev.execute

    def slow(plan, timeout):
        result = real(plan, timeout)
        assert old_gpu in plan.storage  # written in place: no scratch
        time.sleep(timeout + 0.05)  # completed, but the deadline has passed
        return result

    dev.execute = slow
    assert g.dispatch(1, N) == Status.CANCELLED
    dev.execute = real
    assert g.host.buffer_snapshot().device_state == "USABLE" and g.state(b) == "BOTH_CURRENT"
    assert g.buf(b).gpu is old_gpu and g.buf(b).parked is not None
    # b's GPU copy itself is the old one again: double it on the device into a third buffer.
    c = g.create(F32, N)
    g.bind(b, c)
    assert g.dispatch(1, N) == 0 and g.last.upload_count == 0
    assert np.array_equal(g.get_f32(c, N), 4 * values(1))
    g.host.close()
