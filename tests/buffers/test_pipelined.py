"""Pipelined dispatch (Config(pipelined=True)): non-trapping kernels return once recorded, chains
share one submission, every point that needs the device's answer waits for it, and a failure
found late loses exactly the unconfirmed outputs (CONTENTS_LOST, never partial) and quarantines."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import ElementType, Status
from wagogpu.buffers import PipelineTuning
from wagogpu.gpu import FaultInjector

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

F32, I32 = ElementType.F32, ElementType.I32
N = 256
TWICE = "(f32.mul $x (f32.const 2))"
# 100 / x traps on x == 0: the compiler gives it the error word, so it keeps the waited path.
DIVIDE = """
  (func (export "wago_gpu.kernel.divide") (param i32)
    (call $writeBufferI32 (call $getBuffer (i32.const 1)) (local.get 0)
      (i32.div_s (i32.const 100) (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get 0)))))
  (func (export "wago_gpu.cpu.divide") (param i32))"""


def chain_guest(**config) -> Guest:
    config.setdefault("pipelined", True)
    divide = kernel(2, "divide", [(0, I32, 1), (1, I32, 2)])
    small = kernel(3, "back", [(0, F32, 2), (1, F32, 1)], min_elements=N + 1)  # b -> a, always on the CPU
    host = gpu_host(kernels=[kernel(1, "double"), divide, small], **config)
    return Guest(host, kernels=runner_kernel("double", 0, 1, TWICE) + DIVIDE + runner_kernel("back", 1, 0, TWICE))


def ping_pong(g: Guest, steps: int, values=None) -> tuple[int, int]:
    """a = values; then `steps` dispatches alternating a->b and b->a (each doubles)."""
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    assert g.set_f32(a, np.arange(N) if values is None else values) == 0
    for i in range(steps):
        g.bind(*((a, b) if i % 2 == 0 else (b, a)))
        assert g.dispatch(1, N) == 0
    return a, b


def test_a_chain_returns_before_the_device_and_shares_one_submission():
    g = chain_guest()
    dev = g.host.device
    before = dev.stats.submissions
    a, b = ping_pong(g, 10)
    assert dev.pending_tickets == 10 and dev.stats.submissions == before  # recorded, not submitted
    op = g.host.context.log.last_dispatch
    assert (op.pipelined, op.confirmed, op.outcome) == (True, False, "GPU")
    assert g.state(a) == "GPU_CURRENT" and g.version(a) == 2 + 5  # committed when recorded
    assert list(g.get_f32(a, 4)) == [0, 1024, 2048, 3072]  # 2**10, waited for by the copy-back
    assert dev.pending_tickets == 0 and dev.stats.submissions - before <= 2  # the chain, then the read
    assert op.confirmed and g.host.buffer_snapshot().lost_dispatches == ()
    g.host.close()


def test_changing_counts_in_one_batch_keep_each_dispatch_s_parameter_block():
    g = chain_guest()
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    assert g.set_f32(a, np.ones(N)) == 0
    for count in (N, 3, 100, N):  # each count is its own 16-byte block in the batch's ring
        g.bind(a, b)
        assert g.dispatch(1, count) == 0
        g.bind(b, a)
        assert g.dispatch(1, count) == 0
    assert g.host.device.pending_tickets == 8
    got = g.get_f32(a, N)
    want = np.full(N, 4.0 ** 4, np.float32)  # each round multiplies a[:count] by 4
    want[3:100] = 4.0 ** 3
    want[100:] = 4.0 ** 2
    assert np.array_equal(got, want)
    g.host.close()


@pytest.mark.parametrize("point", ["copy_back", "scalar_read", "partial_set", "fallback", "free", "snapshot",
                                   "waited_dispatch", "bound"])
def test_every_point_that_needs_the_answer_waits_for_it(point):
    g = chain_guest()
    dev = g.host.device
    g.host.context.residency.pending.tuning = PipelineTuning(max_dispatches=3)
    a, b = ping_pong(g, 3)  # b holds 8 * arange
    assert dev.pending_tickets == 3
    if point == "copy_back":
        assert list(g.get_f32(b, 3)) == [0, 8, 16]
    elif point == "scalar_read":
        assert g.inst.call("readBufferF32", b, 2) == 16
    elif point == "partial_set":
        assert g.set_f32(b, [5], offset=1) == 0
        assert list(g.get_f32(b, 3)) == [0, 5, 16]
    elif point == "fallback":
        assert g.dispatch(3, N) == Status.CPU_FALLBACK  # below its min_elements: b read back for the runner
        assert g.last.reason_code == "BELOW_THRESHOLD" and g.state(b) == "BOTH_CURRENT"
    elif point == "free":
        assert g.inst.call("freeBuffer", b) == 0
    elif point == "snapshot":
        assert g.host.buffer_snapshot().last_dispatch.confirmed
    elif point == "waited_dispatch":
        i = g.create(I32, N)
        o = g.create(I32, N)
        g.bind(i, o)
        assert g.inst.call("writeBufferI32", i, 0, 7) is None
        assert g.dispatch(2, 1) == 0  # a kernel with the error word: waited, after the pending ones
        assert not g.host.context.log.last_dispatch.pipelined
    elif point == "bound":
        g.bind(b, a)
        assert g.dispatch(1, N) == 0  # the fourth waits for the first three, then is recorded
        assert dev.pending_tickets == 1
    assert dev.pending_tickets == (1 if point == "bound" else 0)
    assert g.host.buffer_snapshot().state == "READY"
    g.host.close()


def test_error_word_kernels_keep_the_waited_path():
    g = chain_guest()
    i, o = g.create(I32, N), g.create(I32, N)
    g.bind(i, o)
    g.inst.write_memory(0, np.full(N, 4, np.int32).tobytes())
    assert g.inst.call("setBuffer32", i, 0, 0, 0, N) == 0
    assert g.dispatch(2, N) == 0
    op = g.host.context.log.last_dispatch
    assert (op.pipelined, op.confirmed) == (False, True)
    assert g.host.device.pending_tickets == 0
    g.host.close()


def test_close_waits_for_pending_work():
    g = chain_guest()
    ping_pong(g, 4)
    op = g.host.context.log.last_dispatch
    g.host.close()
    assert op.confirmed


# -- failures found after the dispatches returned 0 ---------------------------------------------
# stage -> what the copy-back that finds it answers
FLUSH_STAGES = {"submit": Status.CONTENTS_LOST, "wait": Status.CONTENTS_LOST, "timeout": Status.CANCELLED,
                "lost": Status.CONTENTS_LOST, "after_completion": Status.CONTENTS_LOST}


@pytest.mark.parametrize("stage", sorted(FLUSH_STAGES))
def test_a_late_failure_loses_exactly_the_unconfirmed_outputs(stage):
    g = chain_guest()
    keep = g.create(F32, N)  # CPU-current through it all
    assert g.set_f32(keep, np.full(N, 7.0), guest=8192) == 0
    a, b = ping_pong(g, 2)  # a -> b, then b -> a: both outputs unconfirmed
    confirmed_c = g.create(F32, N)
    g.host.device._faults = FaultInjector(fail={stage: 1})
    g.inst.write_memory(4096, b"\xab" * 16)
    assert g.inst.call("copyBuffer32", a, 0, 0, 4096, 4) == FLUSH_STAGES[stage]
    assert g.inst.read_memory(4096, 16) == b"\xab" * 16  # guest memory untouched: nothing partial
    assert g.state(a) == g.state(b) == "CONTENTS_LOST"
    assert g.inst.call("copyBuffer32", b, 0, 0, 4096, 4) == Status.CONTENTS_LOST
    assert list(g.get_f32(keep, 2, guest=8192)) == [7, 7] and g.state(confirmed_c) == "CPU_CURRENT"
    snap = g.host.buffer_snapshot()
    assert (snap.state, snap.totals_complete) == ("FAILED", False)
    assert len(snap.lost_dispatches) == 2 and not snap.last_dispatch.confirmed
    assert not snap.last_dispatch.transfer_counts_complete
    g.bind(a, b)
    assert g.dispatch(1, N) == Status.CONTENTS_LOST  # never a fallback on lost data
    assert g.set_f32(a, np.ones(N)) == 0  # a full set repairs
    g.bind(a, keep)
    assert g.dispatch(1, N) == Status.CPU_FALLBACK  # quarantined: the CPU runner's turn
    g.host.close()


@pytest.mark.parametrize("stage", ["map", "unmap"])
def test_a_readback_failure_after_confirmation_is_the_readback_s(stage):
    """The chain was confirmed; the copy-back's own map or unmap fails: the readback's statuses."""
    g = chain_guest()
    a, b = ping_pong(g, 2)
    g.host.device._faults = FaultInjector(fail={stage: 1})
    assert g.inst.call("copyBuffer32", a, 0, 0, 4096, 4) == Status.DEVICE_ERROR
    assert g.host.context.log.last_dispatch.confirmed
    # unmap: the words arrived before the failure, so the CPU copy is current (docs/design/abi.md §4.4 step 6);
    # map: the quarantine reads the committed contents back once more (quarantine.py), and that works.
    assert g.state(a) == "CPU_CURRENT"
    snapshot = g.host.buffer_snapshot()
    assert snapshot.lost_dispatches == ()
    assert snapshot.quarantine is not None and snapshot.quarantine.lost_buffers == 0
    g.host.close()


def test_a_readback_that_keeps_failing_after_confirmation_loses_the_buffer():
    g = chain_guest()
    a, b = ping_pong(g, 2)
    g.host.device._faults = FaultInjector(fail_always=["map"])
    assert g.inst.call("copyBuffer32", a, 0, 0, 4096, 4) == Status.DEVICE_ERROR
    assert g.state(a) == "CONTENTS_LOST" and g.host.buffer_snapshot().lost_dispatches == ()
    g.host.close()


def test_a_failure_while_recording_loses_the_batch_and_answers_for_itself():
    g = chain_guest()
    a, b = ping_pong(g, 1)  # b unconfirmed
    c = g.create(F32, N)
    g.bind(a, c)
    g.host.device._faults = FaultInjector(fail={"submit": 1})
    assert g.dispatch(1, N) == Status.CPU_FALLBACK  # its inputs are on the CPU: the fallback
    assert g.state(b) == "CONTENTS_LOST" and g.state(c) == "CPU_CURRENT"
    assert g.host.buffer_snapshot().state == "FAILED"
    g.host.close()


def test_a_bound_that_finds_the_failure_and_a_free_that_does():
    g = chain_guest()
    g.host.context.residency.pending.tuning = PipelineTuning(max_dispatches=2)
    a, b = ping_pong(g, 2)
    g.host.device._faults = FaultInjector(fail={"wait": 1})
    g.bind(a, b)
    assert g.dispatch(1, N) == Status.CONTENTS_LOST  # settles first: its input a is lost
    assert g.inst.call("freeBuffer", b) == 0
    g.host.close()
    g = chain_guest()
    a, b = ping_pong(g, 1)
    g.host.device._faults = FaultInjector(fail={"after_completion": 1})
    assert g.inst.call("freeBuffer", b) == 0  # freeing always works
    snap = g.host.buffer_snapshot()
    assert snap.state == "FAILED" and len(snap.lost_dispatches) == 1
    assert snap.instances[0].scratch_bytes >= 4 * N  # its device copy stays charged as retired
    g.host.close()


def test_profile_mode_is_waited_and_submits_no_empty_stage():
    g = chain_guest(profile_stages=True)
    dev = g.host.device
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    assert g.set_f32(a, np.ones(N)) == 0
    before = dev.stats.submissions
    assert g.dispatch(1, N) == 0  # uploads a, writes b whole: an upload and a compute stage, no seed
    last = g.last
    assert dev.stats.submissions - before == 2 and not last.pipelined
    assert (last.device_copy_count, last.device_copy) == (0, 0.0)
    assert last.upload > 0 and last.compute > 0 and last.profile_valid
    before = dev.stats.submissions
    assert g.dispatch(1, N) == 0  # resident: the compute stage alone
    last = g.last
    assert dev.stats.submissions - before == 1
    assert (last.upload, last.device_copy, last.upload_count, last.parameter_upload_count) == (0.0, 0.0, 0, 0)
    assert g.dispatch(1, 3) == 0  # a new count: the parameter block rides with the compute stage
    last = g.last
    assert (last.device_copy_count, last.parameter_upload_count) == (1, 1)  # the tail [3, N) is seeded
    assert last.device_copy > 0
    g.host.close()


@pytest.mark.parametrize("pipelined", [False, True], ids=["waited", "pipelined"])
def test_a_warm_round_trip_is_one_submission(pipelined):
    """Full set, dispatch, copy-back: the upload, the dispatch and the read-ahead copy of its
    output go in one submission, and the copy-back takes the mapped copy (no second submission)."""
    g = chain_guest(pipelined=pipelined)
    dev = g.host.device
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    for round_ in range(4):
        before = dev.stats.submissions
        values = np.arange(N, dtype=np.float32) + round_
        assert g.set_f32(a, values) == 0
        assert g.dispatch(1, N) == 0
        assert np.array_equal(g.get_f32(b, N, guest=8192), values * 2)
        if round_ >= 2:  # (the first copy-back read back; from then on the output is read ahead)
            assert dev.stats.submissions - before == 1
    assert g.host.buffer_snapshot().totals.download_count == 4
    g.host.close()


def test_a_device_loss_seen_at_any_import_loses_the_pending_outputs_first():
    g = chain_guest()
    keep = g.create(F32, N)
    a, b = ping_pong(g, 2)
    g.host.device._core.flags.lost = True  # as the driver's loss callback does
    assert g.inst.call("copyBuffer32", keep, 0, 0, 4096, 4) == 0  # CPU-current: still answers
    assert g.state(a) == g.state(b) == "CONTENTS_LOST"
    snap = g.host.buffer_snapshot()
    assert snap.state == "FAILED" and len(snap.lost_dispatches) == 2
    g.host.close()


def test_the_config_field_is_a_bool():
    from wagogpu import Config, ConfigError
    from wagogpu.config import config_from_json

    with pytest.raises(ConfigError, match="pipelined"):
        Config(kernels=[kernel(1, "double")], pipelined=1)
    cfg = config_from_json({"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F32", "read"], [1, "F32", "w"]]}],
                            "pipelined": True})
    assert cfg.pipelined is True and Config(kernels=[kernel(1, "double")]).pipelined is False


def test_pending_work_past_its_time_bound_is_settled_at_the_next_import():
    g = chain_guest()
    g.host.context.residency.pending.tuning = PipelineTuning(max_seconds=0.01)
    a, b = ping_pong(g, 2)
    assert g.host.device.pending_tickets == 2
    import time

    time.sleep(0.02)
    c = g.create(F32, N)  # any import: the bound is past, so the device's answer is waited for
    assert g.host.device.pending_tickets == 0 and g.host.context.log.last_dispatch.confirmed
    assert g.state(c) == "CPU_CURRENT"
    g.host.close()


def test_a_read_ahead_copy_dropped_while_its_map_is_pending_does_not_stall_the_next_wait():
    """A read-back output gets a read-ahead copy in the next batch; a large host write submits that
    batch, and a later dispatch that writes the output drops the copy while its map is pending: the
    settling wait must still end (it waited for the forgotten map until run_timeout, quarantining
    the runtime with no fault)."""
    g = chain_guest(run_timeout=5.0)
    a, b = g.create(F32, N), g.create(F32, N)
    g.bind(a, b)
    assert g.set_f32(a, np.arange(N)) == 0
    assert g.dispatch(1, N) == 0
    g.inst.read_buffer(b)  # b was read back: the next dispatch writing it asks for a read-ahead copy
    assert g.dispatch(1, 100) == 0 and g.dispatch(1, N) == 0
    big = g.create(F32, 1 << 18)
    g.inst.write_buffer(big, np.arange(1 << 18, dtype=np.float32))  # 1 MiB: submits the open batch
    g.bind(big, b)
    assert g.dispatch(1, N) == 0 and g.dispatch(1, N) == 0
    snap = g.host.buffer_snapshot()
    assert (snap.state, snap.lost_dispatches) == ("READY", ())
    assert np.array_equal(g.get_f32(b, N), np.arange(N, dtype=np.float32) * 2)
    g.host.close()
