"""The device's parts on their own: tuning, the release protocol, the helper-buffer pool."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from wagogpu.gpu import AdapterInfo, DeviceTuning, ExecutePlan, GpuDevice
from wagogpu.gpu.backend import BackendFlags, MapCell
from wagogpu.gpu.core import DeviceCore
from wagogpu.gpu.natives import Native, NativeKind, NativeSet
from wagogpu.gpu.pool import BufferPool, PoolKind, size_class

from .kernels import WGSL_X2, grid, params

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


# ---------------------------------------------------------------- tuning

def test_tuning_is_frozen_and_checked() -> None:
    t = DeviceTuning(queue_write_max=4096)
    assert t.queue_write_max == 4096 and t.readahead_max_bytes == 1 << 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.queue_write_max = 1  # type: ignore[misc]
    for bad, message in ((dict(queue_write_max=-1), "queue_write_max must be a non-negative int"),
                         (dict(queue_write_max=1.5), "queue_write_max must be a non-negative int"),
                         (dict(pool_keep_buffers=True), "pool_keep_buffers must be a non-negative int"),
                         (dict(params_via_staging=1), "params_via_staging must be a bool"),
                         (dict(spin_seconds="soon"), "spin_seconds must be a non-negative float"),
                         (dict(read_copy_threads=0), "copy threads must be at least 1")):
        with pytest.raises(ValueError, match=message):
            DeviceTuning(**bad)


def test_a_device_keeps_its_tuning_and_refuses_anything_else(make_device) -> None:
    tuning = DeviceTuning(queue_write_max=0)  # every upload through the pooled buffer
    dev = make_device(tuning=tuning)
    assert dev.tuning is tuning
    pipe = dev.pipeline(WGSL_X2, [True, False])
    a, b, u, st = dev.create_storage(64), dev.create_storage(64), dev.create_uniform(), dev.create_staging(64)
    x = np.arange(16, dtype=np.uint32)
    dev.execute(ExecutePlan(pipe, u, params(16), [a, b], uploads=[(a, 0, x)], workgroups=grid(16)), 10.0)
    assert np.array_equal(dev.read(b, st, 64, 10.0), 2 * x)
    assert dev.stats.pool_allocations == 1  # the 64-byte upload went through the pool
    with pytest.raises(TypeError, match="DeviceTuning"):
        GpuDevice.open(allow_software_adapter=True, tuning={"queue_write_max": 0})  # type: ignore[arg-type]


# ---------------------------------------------------------------- the release protocol

class Released:
    """Release functions that record what they freed."""

    def __init__(self) -> None:
        self.freed: list[tuple[NativeKind, object]] = []
        self.functions = {kind: (lambda obj, kind=kind: self.freed.append((kind, obj))) for kind in NativeKind}


def test_each_native_object_is_freed_once_by_its_kinds_function() -> None:
    rec = Released()
    natives = NativeSet(rec.functions)
    buf, group, pipe = (natives.own(NativeKind.BUFFER, "buf"), natives.own(NativeKind.BIND_GROUP, "group"),
                        natives.own(NativeKind.PIPELINE, "pipe"))
    assert len(natives) == 3 and natives.count(NativeKind.BUFFER) == 1
    natives.release(buf)
    natives.release(buf)
    natives.release(None)
    assert rec.freed == [(NativeKind.BUFFER, "buf")] and buf.obj is None and len(natives) == 2
    natives.release_all()  # users before what they use: the bind group before the pipeline
    assert rec.freed[1:] == [(NativeKind.BIND_GROUP, "group"), (NativeKind.PIPELINE, "pipe")]
    assert natives.closed and len(natives) == 0
    late = natives.own(NativeKind.BUFFER, "late")  # the device is gone: nothing is freed any more
    natives.release(late)
    natives.release(group)
    assert len(rec.freed) == 3 and late.obj is None


def test_abandon_frees_nothing_and_a_missing_kind_is_refused() -> None:
    rec = Released()
    natives = NativeSet(rec.functions)
    native = natives.own(NativeKind.QUERY_SET, "qs")
    natives.abandon()
    natives.release(native)
    assert rec.freed == [] and natives.closed
    with pytest.raises(ValueError, match="no release function"):
        NativeSet({NativeKind.BUFFER: print})


def test_close_frees_every_native_object_the_device_made(make_device) -> None:
    dev = make_device()
    natives = dev._core.natives
    pipe = dev.pipeline(WGSL_X2, [True, False])
    a, b, u, st = dev.create_storage(4096), dev.create_storage(4096), dev.create_uniform(), dev.create_staging(4096)
    stage = dev.stage(4096)
    before = len(natives)
    dev.execute(ExecutePlan(pipe, u, params(1024), [a, b], uploads=[(a, 0, np.ones(1024, np.uint32))],
                            workgroups=grid(1024), readahead=[b]), 10.0)
    assert len(natives) > before  # a bind group and a read-ahead copy at least
    dev.release(a)
    assert a._native.obj is None  # freed through the set
    dev.close()
    assert len(natives) == 0 and natives.closed
    assert b.released and pipe.released and stage.address == 0


# ---------------------------------------------------------------- the pool's keep policy

class FakeBackend:
    """Just what the pool uses: buffers that record their release, maps that resolve at once."""

    def __init__(self) -> None:
        self.rec = Released()
        self.natives = NativeSet(self.rec.functions)
        self.flags = BackendFlags()
        self.limits = {"max-buffer-size": 1 << 30}
        self.made = 0

    def create_buffer(self, size: int, usage: int, mapped: bool = False) -> Native:
        self.made += 1
        return self.natives.own(NativeKind.BUFFER, f"buffer{self.made}:{size}")

    def map(self, buf: object, write: bool, offset: int, size: int) -> MapCell:
        cell = MapCell(0)
        cell.status = 1
        return cell

    def forget(self, cell: MapCell) -> None:
        pass

    poll = staticmethod(lambda: None)


def _pool(**tuning: int) -> tuple[BufferPool, FakeBackend]:
    backend = FakeBackend()
    info = AdapterInfo("fake", "v", "Vulkan", "CPU", "d", True)
    core = DeviceCore(backend, info, None, DeviceTuning(**tuning))  # type: ignore[arg-type]
    return BufferPool(core), backend


def test_size_classes_round_up_by_at_most_an_eighth() -> None:
    assert size_class(1) == 4096 and size_class(4096) == 4096 and size_class(4097) == 8192
    for n in (10_000, 1 << 20, (1 << 20) + 1, 40_000_016, 123_456_789):
        c = size_class(n)
        assert n <= c <= n * 1.125 + 4096 and c % 4096 == 0, n


def test_the_pool_keeps_the_newest_buffers_within_its_count_and_bytes() -> None:
    pool, backend = _pool(pool_keep_buffers=2, pool_keep_bytes=5 * 4096)
    made = [pool.create(PoolKind.READBACK, 4096) for _ in range(3)]
    for entry in made:
        pool.give(entry)
    assert pool.idle(PoolKind.READBACK) == made[1:] and made[0].obj is None  # the oldest went
    up = pool.create(PoolKind.UPLOAD, 8192)
    pool.give(up)  # 4 + 4 + 8 KiB idle: within 20 KiB
    assert pool.idle_bytes == 16384
    big = pool.create(PoolKind.UPLOAD, 8192)
    pool.give(big)  # 24 KiB: the oldest idle buffer of any kind goes
    assert made[1].obj is None and pool.idle_bytes == 20480
    huge = pool.create(PoolKind.UPLOAD, 6 * 4096)
    pool.give(huge)  # larger than the byte cap: never kept, nothing else evicted for it
    assert huge.obj is None and pool.idle_bytes == 20480
    assert pool.owned_bytes == pool.idle_bytes and backend.made == 6


def test_the_pool_lends_the_smallest_fit_of_the_right_kind() -> None:
    pool, _ = _pool()
    small, large = pool.create(PoolKind.READBACK, 4096), pool.create(PoolKind.READBACK, 16384)
    up = pool.create(PoolKind.UPLOAD, 4096)
    for entry in (large, small, up):
        pool.give(entry)
    assert pool.take(PoolKind.READBACK, 100) is small
    assert pool.take(PoolKind.READBACK, 100) is None  # 16 KiB is more than twice the class of 100 bytes
    assert pool.take(PoolKind.READBACK, 8000) is large
    assert pool.take(PoolKind.READBACK, 4096, exact=True) is None
    assert pool.owned_bytes == 4096 + 16384 + 4096 and pool.idle_bytes == 4096  # lent ones still count
    remapped = pool.mapped_upload(1000, deadline=1e18, what="test")
    assert remapped is up and remapped.cell is None
    pool.give_remapped(remapped)
    assert remapped.cell is not None and pool.mapped_upload(4096, 1e18, "test") is remapped
    pool.give(remapped)
    pool.trim()
    assert pool.idle_bytes == 0 and remapped.obj is None


def test_the_pools_idle_counts_follow_every_change() -> None:
    """The keep policy reads running counts (idle bytes, idle buffers per kind): after any sequence
    of lends, returns, frees, discards and trims they equal what the idle buffers add up to."""
    pool, _ = _pool(pool_keep_buffers=3, pool_keep_bytes=12 * 4096)
    rng = random.Random(7)
    lent: list = []
    for _ in range(400):
        kind = rng.choice(list(PoolKind))
        action = rng.randrange(6)
        if action == 0 or not lent:
            lent.append(pool.take(kind, rng.choice((100, 4096, 9000))) or pool.create(kind, rng.choice((100, 4096, 9000))))
        elif action == 1:
            pool.give(lent.pop(rng.randrange(len(lent))))
        elif action == 2:
            pool.give(lent[-1])
            pool.give(lent.pop())  # given twice: counted once
        elif action == 3:
            pool.free(lent.pop(rng.randrange(len(lent))))
        elif action == 4:
            pool.discard([lent.pop()])  # (lent, not idle: kept by its user, now dropped here)
        elif rng.random() < 0.1:
            pool.trim()
        idle = [e for k in PoolKind for e in pool.idle(k)]
        assert pool.idle_bytes == sum(e.size for e in idle) <= 12 * 4096
        assert all(len(pool.idle(k)) <= 3 for k in PoolKind)
        assert all(e.obj is not None for e in idle)


def test_discard_frees_only_what_is_still_idle() -> None:
    pool, _ = _pool()
    a, b = pool.create(PoolKind.UPLOAD, 4096), pool.create(PoolKind.UPLOAD, 4096)
    pool.give(a)
    pool.give(b)
    taken = pool.take(PoolKind.UPLOAD, 4096)  # another user took one meanwhile
    pool.discard([a, b])
    assert taken is not None and taken.obj is not None
    assert [e.obj for e in (a, b) if e is not taken] == [None]
