"""Upload stages (filled by the caller before the dispatch that uploads them) and readbacks left
mapped in the caller's staging buffer: ownership, reuse, and failures at every step."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from wagogpu.gpu import (DeviceAllocationError, DeviceFailure, DeviceTuning, ExecutePlan, FaultInjector, GpuDevice,
                         UploadStage)
from wagogpu.gpu.pool import PoolKind

from .kernels import WGSL_X2, grid, params

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

N = 3000


def fill(stage: UploadStage, values: np.ndarray) -> None:
    ctypes.memmove(stage.address, values.ctypes.data, values.nbytes)


def mapped_words(address: int, n: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_uint32 * n).from_address(address), dtype=np.uint32).copy()


class Rig:
    def __init__(self, dev: GpuDevice) -> None:
        self.dev = dev
        self.pipe = dev.pipeline(WGSL_X2, [True, False])
        self.a, self.b = dev.create_storage(N * 4), dev.create_storage(N * 4)
        self.u, self.st = dev.create_uniform(), dev.create_staging(N * 4)

    def run(self, stage: UploadStage, **kw) -> None:
        self.dev.execute(ExecutePlan(self.pipe, self.u, params(N), [self.a, self.b], uploads=[(self.a, 0, stage)],
                                     workgroups=grid(N), **kw), 10.0)


@pytest.mark.parametrize("separate_stages", [False, True])
def test_a_stage_uploads_on_the_device_and_is_reused(make_device, separate_stages: bool) -> None:
    rig = Rig(make_device(None))
    dev = rig.dev
    x = np.arange(N, dtype=np.uint32) * 5 + 1
    stage = dev.stage(N * 4)
    assert stage.address and stage.nbytes == N * 4 and stage.size >= N * 4
    assert dev.stats.internal_staging_bytes >= stage.size
    fill(stage, x)
    rig.run(stage, separate_stages=separate_stages)
    assert stage.address == 0  # consumed: the caller no longer owns it
    assert np.array_equal(dev.read(rig.b, rig.st, N * 4, 10.0), 2 * x)
    with pytest.raises(DeviceFailure, match="not owned"):
        rig.run(stage)  # a consumed stage cannot be uploaded again
    # The next stage() gets the same buffer back, mapped again once its dispatch finished.
    again = dev.stage(N * 4 - 400)
    assert again._entry is stage._entry and again.address and again.nbytes == N * 4 - 400
    fill(again, x[:N - 100] + 1)
    rig.dev.execute(ExecutePlan(rig.pipe, rig.u, params(N), [rig.a, rig.b], uploads=[(rig.a, 400, again)],
                                workgroups=grid(N)), 10.0)
    want = x.copy()
    want[100:] = x[:N - 100] + 1
    assert np.array_equal(dev.read(rig.b, rig.st, N * 4, 10.0), 2 * want)


def test_unstage_keeps_a_stage_mapped_for_the_next_caller(make_device) -> None:
    dev = make_device(None, DeviceTuning(pool_keep_buffers=2))
    first = dev.stage(4096)
    dev.unstage(first)
    assert first.address == 0
    second = dev.stage(1024)
    assert second._entry is first._entry and second.address
    dev.unstage(second)
    dev.unstage(second)  # twice is harmless
    kept = [dev.stage(4096) for _ in range(4)]
    for sg in kept:
        dev.unstage(sg)
    idle = dev._pool.idle(PoolKind.UPLOAD)
    assert [e.size for e in idle] == [4096, 4096]  # the keep policy: two per kind; the rest freed
    assert dev.stats.internal_staging_bytes == 2 * 4096
    assert [sg._entry.native.obj is None for sg in kept] == [True, True, False, False]  # the oldest went
    with pytest.raises(DeviceAllocationError):
        dev.stage(6)  # not a multiple of 4


def test_a_plan_that_fails_before_submission_hands_its_stage_back(make_device) -> None:
    rig = Rig(make_device(None))
    stage = rig.dev.stage(N * 4)
    with pytest.raises(DeviceFailure):
        rig.dev.execute(ExecutePlan(rig.pipe, rig.u, params(N), [rig.a, rig.b], uploads=[(rig.a, 0, stage)],
                                    workgroups=(1 << 30, 1)), 10.0)
    assert stage.address == 0 and stage._entry in rig.dev._pool.idle(PoolKind.UPLOAD)  # never unmapped: pooled
    too_big = rig.dev.stage(N * 4 + 4)
    with pytest.raises(DeviceFailure, match="does not fit"):
        rig.run(too_big)


@pytest.mark.parametrize("stage_name", ["submit", "wait", "timeout", "lost"])
def test_a_failed_dispatch_never_reuses_its_stage(make_device, stage_name: str) -> None:
    faults = FaultInjector()
    rig = Rig(make_device(faults))
    stage = rig.dev.stage(N * 4)
    fill(stage, np.arange(N, dtype=np.uint32))
    faults._fail[stage_name] = frozenset([1])
    with pytest.raises(DeviceFailure):
        rig.run(stage)
    assert stage.address == 0
    if stage_name == "submit":
        assert stage._entry in rig.dev._pool.idle(PoolKind.UPLOAD)  # failed before anything was recorded
    else:
        assert stage._entry.native.obj is None  # state unknown: freed
        assert stage._entry not in rig.dev._pool.idle(PoolKind.UPLOAD)


def test_stage_allocation_failure(make_device) -> None:
    dev = make_device(FaultInjector(fail={"alloc": 1}))
    with pytest.raises(DeviceAllocationError, match="injected"):
        dev.stage(4096)
    assert dev.stage(4096).address


def test_read_mapped_leaves_the_words_in_the_staging(make_device) -> None:
    rig = Rig(make_device(None))
    dev = rig.dev
    x = np.arange(N, dtype=np.uint32) + 7
    dev.write(rig.a, 0, x)
    address = dev.read_mapped(rig.a, rig.st, N * 4, 10.0)
    assert address and rig.st.mapped == address
    assert np.array_equal(mapped_words(address, N), x)
    # A read through the same staging ends the mapping first; so does unmap() (idempotent).
    dev.write(rig.a, 0, x + 1)
    assert np.array_equal(dev.read(rig.a, rig.st, N * 4, 10.0), x + 1) and rig.st.mapped == 0
    address = dev.read_mapped(rig.a, rig.st, N * 4, 10.0)
    dev.unmap(rig.st)
    dev.unmap(rig.st)
    assert rig.st.mapped == 0
    dev.read_mapped(rig.a, rig.st, N * 4, 10.0)
    dev.release(rig.st)
    assert rig.st.mapped == 0


@pytest.mark.parametrize("stage_name", ["map", "lost", "timeout"])
def test_read_mapped_failures_leave_nothing_mapped(make_device, stage_name: str) -> None:
    rig = Rig(make_device(FaultInjector(fail={stage_name: 1})))
    with pytest.raises(DeviceFailure) as err:
        rig.dev.read_mapped(rig.a, rig.st, N * 4, 10.0)
    assert err.value.stage == stage_name and rig.st.mapped == 0


def test_a_released_big_staging_is_recycled_by_the_next_of_its_size(make_device) -> None:
    dev = make_device(None)
    big = 1 << 20
    src = dev.create_storage(big)
    dev.write(src, 0, np.arange(big // 4, dtype=np.uint32))
    st = dev.create_staging(big)
    raw = st._ptr
    dev.read_mapped(src, st, big, 10.0)
    allocations = dev.stats.allocations_total
    dev.release(st)  # released while mapped: unmapped and kept
    assert st.released and st.mapped == 0 and dev.stats.internal_staging_bytes >= big
    again = dev.create_staging(big)
    assert again._ptr == raw and again.id != st.id and dev.stats.allocations_total == allocations
    assert np.array_equal(dev.read(src, again, big, 10.0), np.arange(big // 4, dtype=np.uint32))
    dev.release(again)
    other = dev.create_staging(big + 4096)  # another size: a new buffer; the kept one stays until trim
    assert other._ptr != raw and dev.stats.allocations_total == allocations + 1
    small = dev.create_staging(4096)
    dev.release(small)  # pooled too
    kept = dev.stats.internal_staging_bytes
    assert kept >= big + 4096
    dev.trim()
    assert dev.stats.internal_staging_bytes <= kept - big
    assert dev.create_staging(big)._ptr is not None and dev.stats.allocations_total == allocations + 3
