"""The steady plan per kernel and binding set (issue 25 item 2; host/dispatch.py BindingSet,
buffers/steady.py SteadyPlan): a repeated dispatch over unchanged bindings skips the binding
checks and the plan phase, and hands the device one of the ExecutePlans it saw before. These
tests check that every change that could make a kept plan wrong is seen: a bind, a free, a
buffer of another length, a replaced config, evicted scratch, a failed or lost device."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from wagogpu import Access, ElementType, Status
from wagogpu.diagnostics import Outcome, ReasonCode
from wagogpu.gpu import FaultInjector

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu

F32, I32 = ElementType.F32, ElementType.I32
DOUBLE = kernel(2, "double")
N = 64


def resident_guest(n: int = N, **config) -> tuple[Guest, int, int, np.ndarray]:
    """A guest with x -> y bound for DOUBLE, x set and already on the device (one dispatch made)."""
    g = Guest(gpu_host(kernels=[DOUBLE], **config), kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
    x, y = g.create(F32, n), g.create(F32, n)
    values = np.arange(n, dtype=np.float32) - 7
    assert g.set_f32(x, values) == 0
    g.bind(x, y)
    assert g.dispatch(DOUBLE.id, n) == Status.OK
    return g, x, y, values


def handed(g: Guest, method: str) -> list[object]:
    """Every ExecutePlan the device's `method` (execute, or enqueue when pipelined) is handed from now
    on, in order."""
    dev = g.host.device
    seen: list[object] = []
    real = getattr(dev, method)

    def record(plan, timeout):
        seen.append(plan)
        return real(plan, timeout)

    setattr(dev, method, record)
    return seen


def executes(g: Guest) -> list[object]:
    """Every ExecutePlan the device is handed from now on, in order."""
    return handed(g, "execute")


def test_a_resident_loop_reuses_two_execute_plans_and_stays_correct():
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK  # (its first output had no old copy: now one is idle)
    seen = executes(g)
    for _ in range(6):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
        assert g.last.outcome == Outcome.GPU and g.last.confirmed
    assert len({id(p) for p in seen}) == 2  # the two phases of the output swap
    assert seen[0] is seen[2] is seen[4] and seen[1] is seen[3] is seen[5] and seen[0] is not seen[1]
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    # A CPU write makes x stale on the device: the general path uploads it, then steady again.
    assert g.set_f32(x, values + 1) == 0
    assert g.dispatch(DOUBLE.id, N) == Status.OK and g.last.upload_count == 1
    assert g.dispatch(DOUBLE.id, N) == Status.OK and g.last.upload_count == 0
    assert np.array_equal(g.get_f32(y, N, guest=4096), (values + 1) * 2)
    g.host.close()


def test_two_kernels_that_feed_each_other_reuse_three_execute_plans_each():
    """fwd (slot 0 -> 1) and back (slot 1 -> 0) over the same bindings rotate three device buffers
    between the two outputs: each kernel binds one of three sets of handles, all kept."""
    fwd = kernel(3, "fwd")
    back = kernel(4, "back", bindings=[(0, F32, Access.WRITE), (1, F32, Access.READ)])
    g = Guest(gpu_host(kernels=[fwd, back]), kernels=runner_kernel("fwd", 0, 1, "(f32.add $x (f32.const 1))")
              + runner_kernel("back", 1, 0, "(f32.add $x (f32.const 1))"))
    a, b = g.create(F32, N), g.create(F32, N)
    values = np.arange(N, dtype=np.float32)
    assert g.set_f32(a, values) == 0
    g.bind(a, b)
    for kernel_id in (fwd.id, back.id) * 3:  # (warm: the steady plans, their scratch)
        assert g.dispatch(kernel_id, N) == Status.OK
    seen = executes(g)
    for kernel_id in (fwd.id, back.id) * 6:
        assert g.dispatch(kernel_id, N) == Status.OK
        assert g.last.outcome == Outcome.GPU and g.last.confirmed
    forward, backward = seen[0::2], seen[1::2]
    for plans in (forward, backward):
        assert len({id(p) for p in plans}) == 3  # the three rotations, each handed again
        assert all(plans[i] is plans[i + 3] for i in range(3))
    assert np.array_equal(g.get_f32(a, N, guest=4096), values + 18)
    g.host.close()


def test_a_rebind_is_checked_again():
    g, x, y, values = resident_guest()
    z = g.create(I32, N)
    assert g.inst.call("bindBuffer", 1, z) == 0
    assert g.dispatch(DOUBLE.id, N) == Status.TYPE_MISMATCH
    short = g.create(F32, N // 2)
    g.bind(x, short)
    assert g.dispatch(DOUBLE.id, N) == Status.INVALID_RANGE
    assert g.dispatch(DOUBLE.id, N // 2) == Status.OK
    g.bind(x, x)
    assert g.dispatch(DOUBLE.id, N // 2) == Status.INVALID_BINDING  # one handle in two declared slots
    assert g.inst.call("bindBuffer", 1, 0) == 0
    assert g.dispatch(DOUBLE.id, N // 2) == Status.INVALID_BINDING  # an empty declared slot
    g.bind(x, y)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    g.host.close()


def test_a_freed_buffer_is_seen_and_its_replacement_used():
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.inst.call("freeBuffer", y) == 0
    assert g.dispatch(DOUBLE.id, N) == Status.INVALID_BINDING  # freeing cleared the slot
    bigger = g.create(F32, 2 * N)  # "resized": a new, longer buffer in the same slot
    g.bind(x, bigger)
    assert g.dispatch(DOUBLE.id, 2 * N) == Status.INVALID_RANGE  # x holds only N
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    got = g.get_f32(bigger, 2 * N, guest=4096)
    assert np.array_equal(got[:N], values * 2) and not got[N:].any()
    g.host.close()


def test_a_smaller_max_elements_is_seen():
    g, _x, _y, _values = resident_guest()
    ctx = g.host.context
    ctx.config = dataclasses.replace(ctx.config, max_elements=N - 1)
    assert g.dispatch(DOUBLE.id, N) == Status.LIMIT_EXCEEDED
    ctx.config = dataclasses.replace(ctx.config, max_elements=N)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    g.host.close()


def test_other_counts_and_evicted_scratch_take_the_general_path():
    g, x, y, values = resident_guest()
    seen = executes(g)
    assert g.dispatch(DOUBLE.id, N - 3) == Status.OK  # a partial output: seeded, not steady
    assert g.last.device_copy_count == 1
    assert g.inst.buffers.release_idle() > 0  # the idle scratch and the parameter block go
    assert g.dispatch(DOUBLE.id, N) == Status.OK and g.last.parameter_upload_count == 1
    assert g.dispatch(DOUBLE.id, N) == Status.OK  # new scratch: a new plan is kept
    assert seen[-1] is not seen[0]
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    g.host.close()


def steady_guest() -> tuple[Guest, int, int, np.ndarray, list[object]]:
    """resident_guest in the steady state: its next dispatch is handed the first kept plan again."""
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    seen = executes(g)
    assert g.dispatch(DOUBLE.id, N) == Status.OK and g.dispatch(DOUBLE.id, N) == Status.OK
    return g, x, y, values, seen


@pytest.mark.parametrize("stage", ["submit", "wait"])
def test_a_device_failure_in_the_steady_state_publishes_nothing(stage):
    g, x, y, values, seen = steady_guest()
    version = g.version(y)
    g.host.device._faults = FaultInjector(fail={stage: 1})
    assert g.dispatch(DOUBLE.id, N) == Status.CPU_FALLBACK
    assert seen[2] is seen[0]  # the failing dispatch was a steady one
    last = g.last
    assert last.outcome == Outcome.CPU_FALLBACK_READY and last.reason_code == ReasonCode.DEVICE_FAILURE
    assert g.host.buffer_snapshot().device_state == "QUARANTINED"
    assert g.version(y) == version  # the failed dispatch committed nothing
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)  # the last committed result, rescued
    assert g.dispatch(DOUBLE.id, N) == Status.CPU_FALLBACK  # quarantined: the CPU runner from here on
    g.host.close()


def test_closed_buffers_answer_invalid_state():
    g, _x, _y, _values = resident_guest()
    g.inst.buffers.close()  # what Instance.close() does first (the guest may still be running)
    assert g.dispatch(DOUBLE.id, N) == Status.INVALID_STATE
    g.host.close()


def test_a_lost_device_in_the_steady_state_loses_only_what_it_alone_held():
    g, x, y, values, _seen = steady_guest()
    g.host.device._faults = FaultInjector(fail={"lost": 1})
    assert g.dispatch(DOUBLE.id, N) == Status.CONTENTS_LOST  # y's only copy was on the device
    assert g.host.buffer_snapshot().device_state == "QUARANTINED"
    assert g.state(y) == "CONTENTS_LOST" and g.inst.call("copyBuffer32", y, 0, 0, 4096, N) == Status.CONTENTS_LOST
    assert np.array_equal(g.get_f32(x, N, guest=4096), values)  # x was current on the CPU too
    g.host.close()


def test_a_steady_dispatch_past_its_deadline_commits_nothing():
    g, x, y, values, seen = steady_guest()
    version = g.version(y)
    dev = g.host.device
    real = dev.execute
    ctx = g.host.context

    def slow(plan, timeout):
        result = real(plan, timeout)
        time.sleep(0.3)  # the device answered, but after the import's deadline
        return result

    dev.execute = slow
    ctx.config = dataclasses.replace(ctx.config, run_timeout=0.2)
    assert g.dispatch(DOUBLE.id, N) == Status.CANCELLED
    assert seen[-1] is seen[0]  # (a steady one)
    assert g.version(y) == version and g.last.reason_code == ReasonCode.CANCELLED
    dev.execute = real  # (still recording)
    ctx.config = dataclasses.replace(ctx.config, run_timeout=5.0)
    assert g.dispatch(DOUBLE.id, N) == Status.OK  # the scratch it took went back: steady again
    assert len(seen) == 4 and seen[-1] is seen[0]
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    g.host.close()


def test_steady_dispatches_keep_their_profile():
    g, x, y, values = resident_guest(profile_stages=True)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    seen = executes(g)
    for _ in range(3):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
        last = g.last
        assert last.profile_valid and last.compute > 0 and last.commit > 0
    assert seen[0] is seen[2]  # (steady ones)
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    g.host.close()


class GeneralPath:
    """Counts the dispatches that went through the plan phase (plan_slots) instead of the steady plan."""

    def __init__(self, monkeypatch) -> None:
        import wagogpu.buffers.dispatch as dispatch

        self.calls = 0
        real = dispatch.plan_slots

        def counted(res, tx):
            self.calls += 1
            return real(res, tx)

        monkeypatch.setattr(dispatch, "plan_slots", counted)


def test_a_round_trip_loop_uploads_through_the_steady_plan(monkeypatch):
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    general = GeneralPath(monkeypatch)
    totals = g.host.buffer_snapshot().totals.logical_upload_bytes
    reserved = None
    for i in range(5):
        assert g.set_f32(x, values + i) == 0
        assert g.dispatch(DOUBLE.id, N) == Status.OK
        last = g.last
        assert (last.upload_count, last.logical_upload_bytes, last.outcome) == (1, 4 * N, Outcome.GPU)
        assert np.array_equal(g.get_f32(y, N, guest=4096), (values + i) * 2)
        reserved = reserved or g.inst.buffers.reserved
        assert g.inst.buffers.reserved == reserved  # each upload's charge was given back
    assert general.calls == 0
    assert g.host.buffer_snapshot().totals.logical_upload_bytes == totals + 5 * 4 * N
    # A set of part of x: only its dirty range goes up, still steady.
    assert g.set_f32(x, np.full(8, 100, np.float32), offset=8) == 0
    assert g.dispatch(DOUBLE.id, N) == Status.OK and g.last.logical_upload_bytes == 4 * 8
    want = (values + 4) * 2
    want[8:16] = 200
    assert np.array_equal(g.get_f32(y, N, guest=4096), want)
    assert general.calls == 0
    g.host.close()


def test_an_upload_that_must_evict_takes_the_general_path(monkeypatch):
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.get_f32(y, N, guest=4096) is not None  # a readback staging is held now: evictable
    inst = g.inst.buffers
    reserved = inst.reserved
    inst.limits = dataclasses.replace(inst.limits, max_bytes=reserved + 4 * N - 1)  # the upload must evict
    general = GeneralPath(monkeypatch)
    assert g.set_f32(x, values + 1) == 0
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert general.calls == 1 and inst.reserved < reserved  # it evicted, then uploaded
    assert np.array_equal(g.get_f32(y, N, guest=4096), (values + 1) * 2)
    g.host.close()


def test_steady_uploads_release_their_charge_on_failure():
    g, x, y, values, seen = steady_guest()
    inst = g.inst.buffers
    assert g.set_f32(x, values + 1) == 0
    retired = inst.device.retired_bytes
    g.host.device._faults = FaultInjector(fail={"wait": 1})  # after submission: the payload stays retired
    assert g.dispatch(DOUBLE.id, N) == Status.CPU_FALLBACK
    assert inst.device.retired_bytes >= retired + 4 * N
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)  # the last committed result
    g.host.close()


def test_binding_the_same_handles_again_keeps_the_steady_state(monkeypatch):
    g, x, y, values = resident_guest()
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    epoch = g.inst.buffers.bindings_epoch
    general = GeneralPath(monkeypatch)
    for _ in range(3):
        g.bind(x, y)  # a guest that binds before every dispatch
        assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.inst.buffers.bindings_epoch == epoch and general.calls == 0
    g.bind(y, x)  # a real change: checked again, then steady from its second dispatch on
    for calls in (1, 1, 1):
        assert g.dispatch(DOUBLE.id, N) == Status.OK and general.calls == calls
    assert np.array_equal(g.get_f32(x, N, guest=4096), values * 4)  # x = 2y, y = 2 * values
    g.host.close()


def enqueued(g: Guest) -> list[object]:
    """Every ExecutePlan the device records from now on (pipelined), in order."""
    return handed(g, "enqueue")


def test_a_pipelined_resident_loop_records_through_the_steady_plan(monkeypatch):
    g, x, y, values = resident_guest(pipelined=True)
    assert g.dispatch(DOUBLE.id, N) == Status.OK  # (the set's second dispatch: its plan is made)
    general = GeneralPath(monkeypatch)
    seen = enqueued(g)
    dev = g.host.device
    for _ in range(4):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
        last = g.host.context.log.last  # (a snapshot would wait for the device)
        assert (last.outcome, last.pipelined, last.confirmed) == (Outcome.GPU, True, False)
    assert general.calls == 0 and len(seen) == 4 and seen[2] is seen[0] and seen[3] is seen[1]
    assert dev.pending_tickets >= 4  # recorded, none waited for
    assert g.state(y) == "GPU_CURRENT"
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)  # the copy-back waits for them
    assert dev.pending_tickets == 0 and g.host.context.log.last_dispatch.confirmed
    g.host.close()


def test_pipelined_steady_uploads_record_each_set_s_values(monkeypatch):
    """A guest that sets its input before each recorded dispatch: every dispatch reads the values
    set before it, though none was waited for (the payloads are copied when recorded)."""
    g, x, y, values = resident_guest(pipelined=True)
    z = g.create(F32, N)
    g.bind(x, y)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    general = GeneralPath(monkeypatch)
    for i in range(4):
        assert g.set_f32(x, values + i) == 0
        assert g.dispatch(DOUBLE.id, N) == Status.OK
        last = g.host.context.log.last
        assert last.pipelined and not last.confirmed
    assert general.calls == 0
    assert np.array_equal(g.get_f32(y, N, guest=4096), (values + 3) * 2)
    g.bind(y, z)  # a rebind: the general path for the new set, then its own steady plan
    assert g.dispatch(DOUBLE.id, N) == Status.OK and general.calls == 1
    assert g.dispatch(DOUBLE.id, N) == Status.OK and general.calls == 2
    assert g.dispatch(DOUBLE.id, N) == Status.OK and general.calls == 2
    assert np.array_equal(g.get_f32(z, N, guest=4096), (values + 3) * 4)
    assert g.host.buffer_snapshot().totals.upload_count >= 5
    g.host.close()


def recording_failure(monkeypatch, steady: bool) -> tuple[object, ...]:
    """What a recording failure after a pipelined steady dispatch leaves: statuses, states, reason."""
    if not steady:
        import wagogpu.buffers.dispatch as dispatch
        monkeypatch.setattr(dispatch.Dispatcher, "_steady_plan", staticmethod(lambda inst, plan, bound: None))
    g, x, y, values = resident_guest(pipelined=True)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    general = GeneralPath(monkeypatch)
    assert g.dispatch(DOUBLE.id, N) == Status.OK  # (y unconfirmed)
    assert general.calls == (0 if steady else 1) and not g.host.context.log.last.confirmed
    g.host.device._faults = FaultInjector(fail={"submit": 1})
    first = g.dispatch(DOUBLE.id, N)
    last = g.host.context.log.last
    answer = (first, g.state(x), g.state(y), last.reason_code, last.reason, g.dispatch(DOUBLE.id, N))
    snap = g.host.buffer_snapshot()
    assert snap.state == "FAILED" and not snap.totals_complete
    g.host.close()
    monkeypatch.undo()
    return (*answer, len(snap.lost_dispatches))


def test_a_pipelined_steady_dispatch_that_fails_to_record_ends_as_the_general_path_does(monkeypatch):
    steady = recording_failure(monkeypatch, True)
    assert steady == recording_failure(monkeypatch, False)
    assert steady[0] == Status.CONTENTS_LOST and steady[1:3] == ("CPU_CURRENT", "CONTENTS_LOST")
    assert "recording a pipelined dispatch failed at submit" in steady[4]
    assert steady[6] == 3  # (every unconfirmed one: the three recorded since the set)


def test_a_device_loss_finds_the_pipelined_steady_outputs_unconfirmed():
    g, x, y, values = resident_guest(pipelined=True)
    for _ in range(3):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
    g.host.device._core.flags.lost = True  # as the driver's loss callback does
    assert g.dispatch(DOUBLE.id, N) in (Status.CPU_FALLBACK, Status.CONTENTS_LOST)
    assert g.state(y) == "CONTENTS_LOST"
    assert g.inst.call("copyBuffer32", y, 0, 0, 4096, 4) == Status.CONTENTS_LOST
    assert np.array_equal(g.get_f32(x, N, guest=4096), values)  # x was CPU-current throughout
    g.host.close()


def test_freeing_and_closing_with_pipelined_steady_dispatches_pending():
    g, x, y, values = resident_guest(pipelined=True)
    z = g.create(F32, N)
    for _ in range(3):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.inst.call("freeBuffer", y) == 0  # the binding set changed: no kept plan may serve it
    g.bind(x, z)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert np.array_equal(g.get_f32(z, N, guest=4096), values * 2)
    assert g.dispatch(DOUBLE.id, N) == Status.OK and not g.host.context.log.last.confirmed
    g.host.close()  # waits for the pending dispatch
    assert g.host.device is None or g.host.device.pending_tickets == 0
