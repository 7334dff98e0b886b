"""Dispatch transactions (uploads, seeds, 2-D grids, stages) and readbacks."""

from __future__ import annotations

import numpy as np
import pytest

from wagogpu.gpu import DeviceFailure, DeviceTuning, ExecutePlan, ExecuteResult, GpuDevice

from .kernels import WGSL_INC, WGSL_INDEX_2D, WGSL_X2, grid, params, words

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


@pytest.fixture(scope="module")
def x2(device: GpuDevice):
    return device.pipeline(WGSL_X2, [True, False])


def test_execute_uploads_runs_and_reads_back(device: GpuDevice, x2) -> None:
    n = 1000
    a, b, u, st = device.create_storage(n * 4), device.create_storage(n * 4), device.create_uniform(), \
        device.create_staging(n * 4)
    x = np.arange(n, dtype=np.uint32) * 3 + 1
    r = device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x)], workgroups=grid(n)), 10.0)
    assert isinstance(r, ExecuteResult)
    assert r.submitted and r.upload_bytes == n * 4 and r.seed_bytes == 0
    assert r.hardware_submitted == (not device.info.is_software)
    assert min(r.upload_s, r.seed_s, r.compute_s) >= 0 and r.total_s >= r.compute_s
    assert r.device_compute_s is None  # timestamps are off unless asked for (or profiling)
    y = device.read(b, st, n * 4, 10.0)
    assert y.dtype == np.uint32 and np.array_equal(y, x * 2)
    # params=None keeps the uniform; a partial upload changes only its range.
    device.execute(ExecutePlan(x2, u, None, [a, b], uploads=[(a, 40, words([7, 8]))], workgroups=grid(n)), 10.0)
    y = device.read(b, st, n * 4, 10.0)
    x[10:12] = [7, 8]
    assert np.array_equal(y, x * 2)
    for h in (a, b, u, st):
        device.release(h)


def test_count_smaller_than_buffer_leaves_the_tail(device: GpuDevice, x2) -> None:
    n, count = 600, 300
    a, b, u, st = device.create_storage(n * 4), device.create_storage(n * 4), device.create_uniform(), \
        device.create_staging(n * 4)
    x = np.arange(n, dtype=np.uint32)
    device.write(b, 0, np.full(n, 9, np.uint32))
    device.execute(ExecutePlan(x2, u, params(count), [a, b], uploads=[(a, 0, x)], workgroups=grid(count)), 10.0)
    y = device.read(b, st, n * 4, 10.0)
    assert np.array_equal(y[:count], x[:count] * 2) and (y[count:] == 9).all()
    for h in (a, b, u, st):
        device.release(h)


@pytest.mark.parametrize("count", [1, 255, 256, 257, 512, 513])
def test_partial_seeds_copy_only_the_tail(device: GpuDevice, x2, count: int) -> None:
    """docs/design/abi.md §9.3 #38: the scratch output gets the committed tail [count, length) by a device copy."""
    n = 513
    a, committed, scratch, u, st = (device.create_storage(n * 4), device.create_storage(n * 4),
                                    device.create_storage(n * 4), device.create_uniform(), device.create_staging(n * 4))
    x = np.arange(1, n + 1, dtype=np.uint32)
    device.write(committed, 0, np.full(n, 9, np.uint32))
    device.write(scratch, 0, np.full(n, 1234, np.uint32))  # stale scratch contents
    tail = (n - count) * 4
    r = device.execute(ExecutePlan(x2, u, params(count), [a, scratch], uploads=[(a, 0, x)],
                                   seeds=[(committed, scratch, count * 4, tail)], workgroups=grid(count)), 10.0)
    assert r.seed_bytes == tail
    y = device.read(scratch, st, n * 4, 10.0)
    assert np.array_equal(y[:count], 2 * x[:count]) and (y[count:] == 9).all()
    for h in (a, committed, scratch, u, st):
        device.release(h)


def test_full_seed_for_read_before_write(device: GpuDevice) -> None:
    inc = device.pipeline(WGSL_INC, [False])
    n = 300
    committed, scratch, u, st = (device.create_storage(n * 4), device.create_storage(n * 4),
                                 device.create_uniform(), device.create_staging(n * 4))
    device.write(committed, 0, np.arange(n, dtype=np.uint32))
    for _ in range(2):  # the second run seeds from a committed copy that is already on the device
        device.execute(ExecutePlan(inc, u, params(n), [scratch], seeds=[(committed, scratch, 0, n * 4)],
                                   workgroups=grid(n)), 10.0)
    assert np.array_equal(device.read(scratch, st, n * 4, 10.0), np.arange(n, dtype=np.uint32) + 1)
    for h in (committed, scratch, u, st):
        device.release(h)


def test_two_dimensional_grid_beyond_65535_workgroups(device: GpuDevice) -> None:
    """More than 65,535 workgroups: x folds at 65,535 and y counts the folds."""
    pipe = device.pipeline(WGSL_INDEX_2D, [False])
    count = 65535 * 256 + 1000  # 65,539 workgroups
    n = count + 8  # a sentinel tail the kernel must not touch
    gx, gy = grid(count)
    assert (gx, gy) == (65535, 2)
    dst, u, st = device.create_storage(n * 4), device.create_uniform(), device.create_staging(n * 4)
    tail = np.full(8, 0xDEADBEEF, np.uint32)
    device.execute(ExecutePlan(pipe, u, params(count), [dst], uploads=[(dst, count * 4, tail)],
                               workgroups=(gx, gy)), 60.0)
    y = device.read(dst, st, n * 4, 60.0)
    assert np.array_equal(y[:count], np.arange(1, count + 1, dtype=np.uint32))
    assert (y[count:] == 0xDEADBEEF).all()
    for h in (dst, u, st):
        device.release(h)


def test_large_uploads_go_through_the_reused_staging_buffer(make_device) -> None:
    dev = make_device()
    pipe = dev.pipeline(WGSL_X2, [True, False])
    n = (DeviceTuning().queue_write_max // 4) * 2  # 2 MiB: above the queue-write limit
    a, b, u, st = dev.create_storage(n * 4), dev.create_storage(n * 4), dev.create_uniform(), dev.create_staging(n * 4)
    sizes = []
    for k in range(3):
        x = np.arange(n, dtype=np.uint32) + k
        dev.execute(ExecutePlan(pipe, u, params(n - k), [a, b], uploads=[(a, 0, x)], workgroups=grid(n)), 30.0)
        y = dev.read(b, st, n * 4, 30.0)
        assert np.array_equal(y[:n - k], 2 * x[:n - k]), k  # params went through the staging buffer too
        sizes.append(dev.stats.internal_staging_bytes)
    assert sizes[0] >= n * 4 and len(set(sizes)) == 1
    assert dev.stats.pool_allocations == 1  # one upload buffer, reused by every dispatch
    dev.write(a, 0, np.full(n, 5, np.uint32))  # write() uses the same pooled buffer
    dev.execute(ExecutePlan(pipe, u, params(n), [a, b], workgroups=grid(n)), 30.0)
    assert (dev.read(b, st, n * 4, 30.0) == 10).all()
    assert dev.stats.pool_allocations == 1
    dev.trim()
    assert dev.stats.internal_staging_bytes == 0


def test_zero_workgroups_still_uploads(device: GpuDevice, x2) -> None:
    a, b = device.create_storage(64), device.create_storage(64)
    u, st = device.create_uniform(), device.create_staging(64)
    device.execute(ExecutePlan(x2, u, params(0), [a, b], uploads=[(a, 0, words(range(16)))], workgroups=(0, 0)), 10.0)
    assert np.array_equal(device.read(a, st, 64, 10.0), np.arange(16, dtype=np.uint32))
    for h in (a, b, u, st):
        device.release(h)


def test_profile_mode_times_each_stage(device: GpuDevice, x2) -> None:
    n = 4096
    c, a, b, u, st = (device.create_storage(n * 4), device.create_storage(n * 4), device.create_storage(n * 4),
                      device.create_uniform(), device.create_staging(n * 4))
    x = np.arange(n, dtype=np.uint32)
    device.write(b, 0, np.full(n, 9, np.uint32))
    device.write(c, 0, np.full(n, 7, np.uint32))
    count = n - 96
    r = device.execute(ExecutePlan(x2, u, params(count), [a, b], uploads=[(a, 0, x)],
                                   seeds=[(c, b, count * 4, 96 * 4)], workgroups=grid(count),
                                   separate_stages=True), 10.0)
    assert r.upload_s > 0 and r.seed_s > 0 and r.compute_s > 0
    assert r.total_s >= r.upload_s + r.seed_s + r.compute_s
    if device.has_timestamps:
        assert r.device_compute_s is not None and r.device_compute_s >= 0
    y = device.read(b, st, n * 4, 10.0)
    assert np.array_equal(y[:count], 2 * x[:count]) and (y[count:] == 7).all()
    # Timestamps on request in one-submission mode; off when asked in profile mode.
    r = device.execute(ExecutePlan(x2, u, None, [a, b], workgroups=grid(count), timestamps=True), 10.0)
    assert (r.device_compute_s is not None) == device.has_timestamps
    r = device.execute(ExecutePlan(x2, u, None, [a, b], workgroups=grid(count), separate_stages=True,
                                   timestamps=False), 10.0)
    assert r.device_compute_s is None
    for h in (a, b, c, u, st):
        device.release(h)


def test_read_reuses_one_staging_buffer_and_returns_fresh_arrays(device: GpuDevice) -> None:
    st = device.create_staging(4096)
    a, b = device.create_storage(4096), device.create_storage(1024)
    device.write(a, 0, np.arange(1024, dtype=np.uint32))
    device.write(b, 0, np.arange(256, dtype=np.uint32) + 5000)
    allocations = device.stats.allocations_total
    first = device.read(a, st, 4096, 10.0)
    second = device.read(b, st, 1024, 10.0)  # smaller than the staging buffer
    third = device.read(a, st, 64, 10.0)  # a prefix
    assert device.stats.allocations_total == allocations
    assert np.array_equal(first, np.arange(1024, dtype=np.uint32))
    assert np.array_equal(second, np.arange(256, dtype=np.uint32) + 5000)
    assert np.array_equal(third, np.arange(16, dtype=np.uint32))
    for arr in (first, second, third):
        assert arr.flags.owndata and arr.flags.writeable
    first[:] = 0
    assert np.array_equal(device.read(a, st, 4096, 10.0), np.arange(1024, dtype=np.uint32))
    out = np.zeros(256, np.uint32)
    assert device.read(b, st, 1024, 10.0, out=out) is out and out[0] == 5000
    with pytest.raises(ValueError):
        device.read(b, st, 1024, 10.0, out=np.zeros(10, np.uint32))
    for bad in ((a, st, 4096 + 4), (a, st, 6), (a, a, 64)):
        with pytest.raises(DeviceFailure) as err:
            device.read(*bad, 10.0)
        assert err.value.stage == "submit" and not err.value.submitted
    for h in (a, b, st):
        device.release(h)


def test_a_large_readback_is_copied_out_whole(make_device) -> None:
    """Above the parallel copy threshold the copy out of the mapping runs on several threads."""
    dev = make_device()
    n = 2_500_000  # 10 MB
    a, st = dev.create_storage(n * 4), dev.create_staging(n * 4)
    x = np.random.default_rng(1).integers(0, 2**32, n, dtype=np.uint32)
    dev.write(a, 0, x)
    assert np.array_equal(dev.read(a, st, n * 4, 30.0), x)
    out = np.zeros(n, np.uint32)
    assert dev.read(a, st, n * 4, 30.0, out=out) is out and np.array_equal(out, x)


def test_write_checks_its_range(device: GpuDevice) -> None:
    a = device.create_storage(64)
    with pytest.raises(DeviceFailure) as err:
        device.write(a, 60, words([1, 2]))
    assert err.value.stage == "submit"
    with pytest.raises(DeviceFailure):
        device.write(a, 2, words([1]))
    device.release(a)
    with pytest.raises(DeviceFailure):
        device.write(a, 0, words([1]))


def test_readahead_serves_the_next_read_and_is_dropped_by_any_write(device: GpuDevice, x2) -> None:
    """ExecutePlan.readahead: the read right after needs no submission; writes invalidate the copy."""
    n = 700
    a, b, u, st = device.create_storage(n * 4), device.create_storage(n * 4), device.create_uniform(), \
        device.create_staging(n * 4)
    x = np.arange(n, dtype=np.uint32) + 5
    hits = device.readahead_hits
    device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x)], workgroups=grid(n),
                               readahead=[b]), 10.0)
    subs = device.stats.submissions
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * x)
    assert (device.readahead_hits, device.stats.submissions) == (hits + 1, subs)  # no new submission
    # Consumed: the next read of b goes through the staging buffer again.
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * x)
    assert (device.readahead_hits, device.stats.submissions) == (hits + 1, subs + 1)
    # A copy taken, then b written by a queue write: the read must see the write.
    device.execute(ExecutePlan(x2, u, None, [a, b], workgroups=grid(n), readahead=[b]), 10.0)
    device.write(b, 8, words([77, 78]))
    y = device.read(b, st, n * 4, 10.0)
    assert y[2:4].tolist() == [77, 78] and y[4] == 2 * x[4] and device.readahead_hits == hits + 1
    # A copy taken, then b bound by a later dispatch that did not ask for one: that dispatch wins.
    device.execute(ExecutePlan(x2, u, None, [a, b], workgroups=grid(n), readahead=[b]), 10.0)
    device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x + 1)], workgroups=grid(n)), 10.0)
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * (x + 1))
    assert device.readahead_hits == hits + 1
    # The seeded tail comes along: a 1-element dispatch with a tail seed, read ahead.
    c = device.create_storage(n * 4)
    device.execute(ExecutePlan(x2, u, params(1), [a, c], seeds=[(b, c, 4, n * 4 - 4)], workgroups=grid(1),
                               readahead=[c]), 10.0)
    y = device.read(c, st, n * 4, 10.0)
    assert device.readahead_hits == hits + 2
    assert y[0] == 2 * (x[0] + 1) and np.array_equal(y[1:], 2 * (x[1:] + 1))
    # Released with a copy pending: nothing leaks into a new buffer that reuses the id space.
    device.execute(ExecutePlan(x2, u, None, [a, c], workgroups=grid(n), readahead=[c]), 10.0)
    device.release(c)
    assert c.id not in device._readback.copies
    for h in (a, b, u, st):
        device.release(h)


def test_readahead_is_skipped_for_large_buffers_and_in_profile_mode(make_device) -> None:
    device = make_device(tuning=DeviceTuning(readahead_max_bytes=1024))
    x2 = device.pipeline(WGSL_X2, [True, False])
    n = 512  # 2,048 bytes: above the device's limit
    a, b, u, st = device.create_storage(n * 4), device.create_storage(n * 4), device.create_uniform(), \
        device.create_staging(n * 4)
    x = np.arange(n, dtype=np.uint32)
    device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x)], workgroups=grid(n),
                               readahead=[b]), 10.0)
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * x) and device.readahead_hits == 0
    device = make_device()
    x2 = device.pipeline(WGSL_X2, [True, False])
    a, b, u, st = device.create_storage(n * 4), device.create_storage(n * 4), device.create_uniform(), \
        device.create_staging(n * 4)
    device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x + 3)], workgroups=grid(n),
                               readahead=[b], separate_stages=True), 10.0)
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * (x + 3)) and device.readahead_hits == 0
    device.execute(ExecutePlan(x2, u, params(n), [a, b], uploads=[(a, 0, x + 4)], workgroups=grid(n),
                               readahead=[b]), 10.0)
    assert np.array_equal(device.read(b, st, n * 4, 10.0), 2 * (x + 4)) and device.readahead_hits == 1
