"""Failure honesty: every fault stage raises the right exception, real timeouts, loss, close under load."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from wagogpu.gpu import (BufferHandle, DeviceAllocationError, DeviceFailure, ExecutePlan, FaultInjector, GpuDevice,
                         PipelineError)
from wagogpu.gpu.backend import CELL_OK, Usage
from wagogpu.gpu.faults import STAGES
from wagogpu.gpu.pool import PoolKind

from .conftest import open_device
from .kernels import WGSL_INC, WGSL_SLOW, WGSL_X2, grid, params

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

N = 512


class Rig:
    """A device with a FaultInjector, an x2 pipeline and buffers for one small dispatch."""

    def __init__(self, make_device, faults: FaultInjector) -> None:
        self.faults = faults
        self.dev: GpuDevice = make_device(faults)
        self.pipe = self.dev.pipeline(WGSL_X2, [True, False])
        self.a, self.b = self.dev.create_storage(N * 4), self.dev.create_storage(N * 4)
        self.u, self.st = self.dev.create_uniform(), self.dev.create_staging(N * 4)
        self.x = np.arange(N, dtype=np.uint32)

    def plan(self, **kw) -> ExecutePlan:
        return ExecutePlan(self.pipe, self.u, params(N), [self.a, self.b], uploads=[(self.a, 0, self.x)],
                           workgroups=grid(N), **kw)

    def run(self, **kw):
        return self.dev.execute(self.plan(**kw), 10.0)

    def check_ok(self) -> None:
        """The device still works after the failure (the host would quarantine; we need not, but may)."""
        self.run()
        assert np.array_equal(self.dev.read(self.b, self.st, N * 4, 10.0), 2 * self.x)


def test_injector_counts_and_selects_occurrences() -> None:
    f = FaultInjector(fail={"submit": 2, "map": [1, 3]}, fail_always=["wait"])
    assert [f.hit("submit") for _ in range(3)] == [False, True, False]
    assert [f.hit("map") for _ in range(3)] == [True, False, True]
    assert all(f.hit("wait") for _ in range(2))
    assert f.counts["submit"] == 3 and f.failures["map"] == 2 and f.counts["alloc"] == 0
    with pytest.raises(ValueError):
        FaultInjector(fail={"sumbit": 1})
    assert set(f.counts) == set(STAGES)


def test_alloc_fault(make_device) -> None:
    f = FaultInjector(fail={"alloc": 2})
    dev = make_device(f)
    dev.create_storage(64)
    with pytest.raises(DeviceAllocationError) as err:
        dev.create_uniform()
    assert "injected" in err.value.message
    dev.create_staging(64)
    assert f.counts["alloc"] == 3 and dev.stats.live_buffers == 2


def test_pipeline_fault(make_device) -> None:
    f = FaultInjector(fail={"pipeline": 1})
    dev = make_device(f)
    with pytest.raises(PipelineError):
        dev.pipeline(WGSL_INC, [False])
    assert dev.pipeline(WGSL_INC, [False]) is dev.pipeline(WGSL_INC, [False])
    assert f.counts["pipeline"] == 2  # cache hits do not reach the stage


@pytest.mark.parametrize("separate_stages", [False, True])
def test_submit_fault(make_device, separate_stages: bool) -> None:
    rig = Rig(make_device, FaultInjector(fail={"submit": 1}))
    with pytest.raises(DeviceFailure) as err:
        rig.run(separate_stages=separate_stages)
    assert (err.value.stage, err.value.submitted, err.value.timed_out) == ("submit", False, False)
    rig.check_ok()


@pytest.mark.parametrize("separate_stages", [False, True])
@pytest.mark.parametrize("stage,timed_out", [("wait", False), ("timeout", True), ("lost", False),
                                             ("after_completion", False)])
def test_execute_fault_stages(make_device, stage: str, timed_out: bool, separate_stages: bool) -> None:
    rig = Rig(make_device, FaultInjector(fail={stage: 1}))
    with pytest.raises(DeviceFailure) as err:
        rig.run(separate_stages=separate_stages)
    e = err.value
    assert (e.stage, e.submitted, e.timed_out) == (stage, True, timed_out)
    assert rig.faults.failures[stage] == 1
    if stage == "lost":
        assert rig.dev.is_lost()
        with pytest.raises(DeviceFailure) as again:
            rig.run()
        assert again.value.stage == "lost" and not again.value.submitted
        with pytest.raises(DeviceAllocationError):
            rig.dev.create_storage(64)
    else:
        assert not rig.dev.is_lost()
        rig.check_ok()


@pytest.mark.parametrize("stage", ["submit", "timeout", "lost", "map"])
def test_read_fault_stages(make_device, stage: str) -> None:
    f = FaultInjector()
    rig = Rig(make_device, f)
    rig.run()
    f._fail[stage] = frozenset([f.counts[stage] + 1])  # the next occurrence, which is in read()
    with pytest.raises(DeviceFailure) as err:
        rig.dev.read(rig.b, rig.st, N * 4, 10.0)
    e = err.value
    assert e.stage == stage and e.submitted == (stage != "submit") and e.timed_out == (stage == "timeout")
    assert e.data is None
    if stage in ("submit", "map"):
        # The staging buffer was left usable: the next read works through it.
        assert np.array_equal(rig.dev.read(rig.b, rig.st, N * 4, 10.0), 2 * rig.x)


def test_unmap_fault_keeps_the_copied_data(make_device) -> None:
    """docs/design/abi.md §4.4 step 6: data fully copied before an unmap failure comes back on the exception."""
    rig = Rig(make_device, FaultInjector(fail={"unmap": 1}))
    rig.run()
    with pytest.raises(DeviceFailure) as err:
        rig.dev.read(rig.b, rig.st, N * 4, 10.0)
    assert err.value.stage == "unmap" and err.value.submitted
    assert np.array_equal(err.value.data, 2 * rig.x)
    assert np.array_equal(rig.dev.read(rig.b, rig.st, N * 4, 10.0), 2 * rig.x)


def test_submit_fault_in_write(make_device) -> None:
    rig = Rig(make_device, FaultInjector(fail={"submit": 1}))
    with pytest.raises(DeviceFailure) as err:
        rig.dev.write(rig.a, 0, rig.x)
    assert err.value.stage == "submit" and not err.value.submitted


def slow_plan(dev: GpuDevice, seconds: float) -> tuple[ExecutePlan, BufferHandle]:
    """A dispatch calibrated to take about ``seconds`` on whatever adapter runs the test (lavapipe
    or an H200), and the buffer it writes."""
    pipe = dev.pipeline(WGSL_SLOW, [False])
    n = 1 << 16
    a, u = dev.create_storage(n * 4), dev.create_uniform()
    rounds = 256
    while True:
        t0 = time.perf_counter()
        dev.execute(ExecutePlan(pipe, u, struct_params(n, rounds), [a], workgroups=grid(n)), 60.0)
        took = time.perf_counter() - t0
        if took > 0.03 or rounds >= 1 << 28:
            break
        rounds *= 8
    rounds = min(int(rounds * seconds / took) + 1, 1 << 31)
    return ExecutePlan(pipe, u, struct_params(n, rounds), [a], workgroups=grid(n)), a


def timed_out(dev: GpuDevice, plan: ExecutePlan) -> None:
    t0 = time.perf_counter()
    with pytest.raises(DeviceFailure) as err:
        dev.execute(plan, 0.002)
    assert err.value.stage == "timeout" and err.value.timed_out and err.value.submitted
    assert time.perf_counter() - t0 < 0.25


def test_real_timeout_then_close(make_device) -> None:
    """A kernel that outlives its deadline: the poll loop gives up; close() does not wait for the
    kernel (releasing the device would wait in the driver: that happens on a daemon thread)."""
    dev = make_device()
    slow, _ = slow_plan(dev, 0.5)
    timed_out(dev, slow)
    t0 = time.perf_counter()
    dev.close()
    assert time.perf_counter() - t0 < 0.5
    assert dev.closed


def test_settle_waits_for_the_work_a_timeout_left_without_submitting(make_device) -> None:
    dev = make_device()
    slow, a = slow_plan(dev, 0.3)
    staging = dev.create_staging(a.nbytes)
    submissions = dev.stats.submissions
    timed_out(dev, slow)
    assert not dev.settle(0.0)  # still running
    assert dev.settle(30.0) and dev.settle(0.0)
    assert dev.stats.submissions == submissions + 1  # settling submitted nothing
    t0 = time.perf_counter()
    assert dev.read(a, staging, a.nbytes, 5.0).size == a.nbytes // 4  # readable again, at once
    assert time.perf_counter() - t0 < 0.25


def test_settle_after_a_timeout_does_not_count_on_a_dropped_read_ahead_map(make_device) -> None:
    """A timed-out dispatch with a read-ahead copy: the failure frees the copy and forgets its map,
    and settling waits for the dispatch's own fence only (a forgotten map never resolves)."""
    import dataclasses

    dev = make_device()
    slow, a = slow_plan(dev, 0.3)
    timed_out(dev, dataclasses.replace(slow, readahead=[a]))
    assert dev.settle(30.0) and dev.settle(0.0)


def test_settle_after_a_timed_out_flush_waits_for_the_abandoned_batch(make_device) -> None:
    """A pipelined batch whose flush timed out is abandoned, but its work-done fence still
    resolves: settle() returns once the kernel is done (it waited out its whole timeout on the raw
    path when abandoning forgot the fence), and the device runs work again."""
    dev = make_device()
    slow, _a = slow_plan(dev, 0.3)
    dev.enqueue(slow, 10.0)
    t0 = time.perf_counter()
    with pytest.raises(DeviceFailure) as err:
        dev.flush(0.002)
    assert err.value.stage == "timeout" and err.value.timed_out and time.perf_counter() - t0 < 0.25
    assert dev.settle(10.0) and dev.settle(0.0)
    assert time.perf_counter() - t0 < 5.0
    Rig(lambda _faults: dev, FaultInjector()).check_ok()


def test_public_backend_destroys_a_freed_buffer_after_its_pending_map() -> None:
    """wgpu-py's poll thread waits on the GPU inside wgpu-native while a map is pending, and a
    buffer destroy waits for that wait: on lavapipe a read-ahead buffer freed after a 2 ms timeout
    held the caller up to 0.94 s.  So the public backend hands the destroy to its waiter, behind
    the map: the map still resolves (a destroy under it would reject it)."""
    dev = open_device(api="public")
    try:
        slow, a = slow_plan(dev, 0.3)
        timed_out(dev, slow)
        backend = dev._core.backend
        native = backend.create_buffer(a.nbytes, Usage.READBACK)
        enc = backend.encoder()
        backend.copy(enc, a._ptr, 0, native.obj, 0, a.nbytes)  # queued behind the slow kernel
        backend.submit(enc)
        cell = backend.map(native.obj, False, 0, a.nbytes)
        t0 = time.perf_counter()
        backend.natives.release(native)
        assert time.perf_counter() - t0 < 0.05 and not cell.status  # released; the map still pending
        assert dev.settle(30.0)
        deadline = time.perf_counter() + 10.0
        while not cell.status and time.perf_counter() < deadline:
            time.sleep(0.001)
        assert cell.status == CELL_OK, cell.message
    finally:
        dev.close()


def struct_params(count: int, rounds: int) -> bytes:
    return np.array([count, rounds, 0, 0], dtype="<u4").tobytes()


def test_lock_wait_counts_against_the_timeout(make_device) -> None:
    rig = Rig(make_device, FaultInjector())
    with rig.dev._core.lock:  # another party holds the device
        result: list[BaseException] = []

        def other() -> None:
            try:
                rig.dev.read(rig.b, rig.st, N * 4, 0.02)
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                result.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(5.0)
    assert result and isinstance(result[0], DeviceFailure)
    assert result[0].stage == "timeout" and result[0].timed_out and not result[0].submitted


@pytest.mark.parametrize("order", ["close_then_release", "release_after_close_returned"])
def test_close_while_execute_is_blocked(make_device, order: str) -> None:
    """docs/design/abi.md §9.3 #31: close() during a dispatch stuck on the device; both finish within 3 s."""
    release = threading.Event()
    faults = FaultInjector(fail={}, release=release)
    faults._fail["block"] = frozenset([1])
    rig = Rig(make_device, faults)
    outcome: dict[str, object] = {}

    def dispatch() -> None:
        try:
            outcome["result"] = rig.run()
        except BaseException as exc:  # noqa: BLE001
            outcome["error"] = exc

    worker = threading.Thread(target=dispatch)
    t0 = time.perf_counter()
    worker.start()
    assert faults.blocked.wait(5.0), "execute never reached the block stage"
    closer = threading.Thread(target=rig.dev.close)
    closer.start()
    if order == "close_then_release":
        time.sleep(0.05)
        release.set()
    else:
        closer.join(3.0)
        assert not closer.is_alive(), "close() waited for the blocked dispatch"
        release.set()
    closer.join(3.0)
    worker.join(3.0)
    assert not closer.is_alive() and not worker.is_alive()
    assert time.perf_counter() - t0 < 3.0
    err = outcome.get("error")
    assert isinstance(err, DeviceFailure) and err.stage == "closed" and err.submitted
    stats = rig.dev.stats
    assert stats.live_buffers == 0 and stats.pipelines_live == 0 and stats.bind_groups_live == 0


def test_everything_after_close(make_device) -> None:
    rig = Rig(make_device, FaultInjector())
    rig.dev.close()
    rig.dev.close()
    with pytest.raises(DeviceFailure) as err:
        rig.run()
    assert err.value.stage == "closed" and not err.value.submitted
    with pytest.raises(DeviceFailure):
        rig.dev.read(rig.b, rig.st, 64, 1.0)
    with pytest.raises(DeviceFailure):
        rig.dev.write(rig.a, 0, rig.x)
    with pytest.raises(DeviceAllocationError):
        rig.dev.create_storage(64)
    with pytest.raises(PipelineError):
        rig.dev.pipeline(WGSL_INC, [False])
    rig.dev.release(rig.a)  # no-op
    rig.dev.release(rig.pipe)
    rig.dev.trim()
    assert not rig.dev.is_lost()
    assert rig.a.released and rig.pipe.released


@pytest.mark.parametrize("stage", ["timeout", "lost", "map", "unmap"])
def test_read_faults_apply_to_a_read_ahead_copy(make_device, stage: str) -> None:
    """A read served by a read-ahead copy fails at the same stages as one that submits."""
    f = FaultInjector()
    rig = Rig(make_device, f)
    rig.run(readahead=[rig.b])
    f._fail[stage] = frozenset([f.counts[stage] + 1])
    with pytest.raises(DeviceFailure) as err:
        rig.dev.read(rig.b, rig.st, N * 4, 10.0)
    assert err.value.stage == stage and rig.dev.readahead_hits == 1
    if stage == "unmap":
        assert np.array_equal(err.value.data, 2 * rig.x)
    assert not rig.dev._readback.copies  # the copy's state is unknown: freed, not pooled
    assert not rig.dev._pool.idle(PoolKind.READBACK)
    if stage != "lost":
        assert np.array_equal(rig.dev.read(rig.b, rig.st, N * 4, 10.0), 2 * rig.x)


@pytest.mark.parametrize("stage", ["lost", "map", "unmap"])
def test_a_read_ahead_copy_read_without_an_injector_fails_at_the_same_stages(make_device, stage: str) -> None:
    """With no fault injector a resolved read-ahead copy is read out under the lock that found it
    (Readback._ahead_out): a loss since the read's first check, a mapped range that is not
    available and an unmap error fail as on the general path, and the copy is freed, not pooled."""
    rig = Rig(make_device, None)
    rig.run(readahead=[rig.b])
    core, readback, pool = rig.dev._core, rig.dev._readback, rig.dev._pool
    backend = core.backend
    if stage == "lost":
        found = readback._take_copy

        def take_copy(*args):
            core.flags.lost, core.flags.lost_reason = True, "lost while the read held the lock"
            return found(*args)

        readback._take_copy = take_copy
    elif stage == "map":
        backend.read_address = lambda buf, offset, size: 0
    else:
        unmap = backend.unmap

        def failing_unmap(buf):
            unmap(buf)
            core.flags.errors.append("unmap refused")

        backend.unmap = failing_unmap
    with pytest.raises(DeviceFailure) as err:
        rig.dev.read(rig.b, rig.st, N * 4, 10.0)
    assert err.value.stage == stage and err.value.submitted and rig.dev.readahead_hits == 1
    if stage == "unmap":
        assert err.value.message == "unmap refused" and np.array_equal(err.value.data, 2 * rig.x)
    assert not readback.copies and not pool.idle(PoolKind.READBACK)  # freed, not pooled


@pytest.mark.parametrize("stage", ["submit", "wait", "lost", "after_completion"])
def test_a_compute_pass_alone_fails_at_the_same_stages_without_an_injector(make_device, stage: str) -> None:
    """A plan that is a compute pass alone (a resident dispatch's) runs Executor._execute_pass: an
    error reported while it is submitted, a failed fence, a loss while it is waited for and an
    error reported by the time it is done fail it as on the general path, and a read-ahead copy
    made before, of a buffer the pass does not bind, is dropped too (its state is unknown)."""
    rig = Rig(make_device, None)
    other = rig.dev.create_storage(N * 4)
    rig.dev.execute(ExecutePlan(rig.pipe, rig.u, params(N), [rig.a, other], uploads=[(rig.a, 0, rig.x)],
                                workgroups=grid(N), readahead=[other]), 10.0)
    assert list(rig.dev._readback.copies) == [other.id]
    core, executor = rig.dev._core, rig.dev._executor
    backend = core.backend
    passes: list[ExecutePlan] = []
    run_pass = executor._execute_pass
    executor._execute_pass = lambda plan, *args: (passes.append(plan), run_pass(plan, *args))[1]
    submit, poll, fence = backend.submit, backend.poll, backend.fence
    if stage == "submit":
        backend.submit = lambda enc: (submit(enc), core.flags.errors.append("validation: refused"))[0]
    elif stage == "wait":
        def failing_fence():
            cell = fence()
            backend.forget(cell)
            cell.status, cell.message = CELL_OK + 1, "refused"
            return cell

        backend.fence = failing_fence
    elif stage == "lost":
        def losing_poll():
            poll()
            core.flags.lost, core.flags.lost_reason = True, "lost while waited for"

        backend.poll = losing_poll
    else:
        backend.poll = lambda: (poll(), core.flags.errors.append("internal: reported late"))[0]
    plan = ExecutePlan(rig.pipe, rig.u, None, [rig.a, rig.b], workgroups=grid(N))
    with pytest.raises(DeviceFailure) as err:
        rig.dev.execute(plan, 10.0)
    assert passes == [plan]
    assert err.value.stage == stage and err.value.submitted
    assert not rig.dev._readback.copies  # dropped: the submission's state is unknown
    backend.submit, backend.poll, backend.fence = submit, poll, fence
    if stage != "lost":
        rig.check_ok()
