"""Pending batches (batch.py) on both backends: order, per-dispatch parameter blocks through a
small ring, uploads larger than the ring, releases of recorded buffers, and failures at flush or
on the way to another operation."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu.gpu import DeviceFailure, DeviceTuning, ExecutePlan, FaultInjector

from .kernels import WGSL_INC, WGSL_X2, grid, params, words

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

N = 64


def setup(dev):
    a, b, u = dev.create_storage(4 * N), dev.create_storage(4 * N), dev.create_uniform(16)
    return a, b, u, dev.pipeline(WGSL_X2, [True, False]), dev.pipeline(WGSL_INC, [False])


def read(dev, buf) -> np.ndarray:
    return dev.read(buf, dev.create_staging(4 * N), 4 * N, 5.0)


def test_a_small_ring_keeps_every_dispatch_s_own_count_and_upload(make_device):
    dev = make_device(tuning=DeviceTuning(batch_ring_bytes=64))  # room for two parameter blocks and a bit
    a, b, u, x2, inc = setup(dev)
    before = dev.stats.submissions
    want = np.zeros(N, np.uint32)
    for count in (N, 5, 17, N, 3, 40):
        dev.enqueue(ExecutePlan(inc, u, params(count), [b], workgroups=grid(count)), 5.0)
        want[:count] += 1
    dev.enqueue(ExecutePlan(x2, u, params(N), [a, b], uploads=[(a, 0, words(np.arange(N)))], workgroups=grid(N)), 5.0)
    assert dev.stats.submissions > before  # the ring filled: batches went out without a wait
    assert dev.flush(5.0) == dev.confirmed_ticket == 7 and dev.pending_tickets == 0
    assert np.array_equal(read(dev, b), np.arange(N) * 2)  # the last one overwrote b whole
    dev.enqueue(ExecutePlan(inc, u, params(N), [b], workgroups=grid(N)), 5.0)
    assert np.array_equal(read(dev, b), np.arange(N) * 2 + 1)  # a read submits what is pending first


def test_an_upload_as_big_as_the_ring_goes_through_the_pool(make_device):
    dev = make_device(tuning=DeviceTuning(batch_ring_bytes=4 * N))
    a, b, u, x2, _inc = setup(dev)
    data = words(np.arange(N) + 7)  # exactly the ring's size, with a parameter block beside it
    dev.enqueue(ExecutePlan(x2, u, params(N), [a, b], uploads=[(a, 0, data)], workgroups=grid(N)), 5.0)
    dev.flush(5.0)
    assert np.array_equal(read(dev, b), (np.arange(N) + 7) * 2)


def test_releasing_a_recorded_buffer_submits_the_batch_first(make_device):
    dev = make_device()
    a, b, u, x2, inc = setup(dev)
    c = dev.create_storage(4 * N)
    dev.write(a, 0, words(np.arange(N)))
    dev.enqueue(ExecutePlan(inc, u, params(N), [c], workgroups=grid(N)), 5.0)
    dev.enqueue(ExecutePlan(x2, u, None, [a, b], workgroups=grid(N)), 5.0)
    dev.release(c)  # destroyed under an unsubmitted encoder it would fail the batch
    assert dev.flush(5.0) == 2
    assert np.array_equal(read(dev, b), np.arange(N) * 2)


@pytest.mark.parametrize("stage", ["submit", "wait", "timeout", "lost", "after_completion"])
def test_a_failed_flush_confirms_nothing_more(make_device, stage):
    dev = make_device()
    a, b, u, x2, inc = setup(dev)
    dev.enqueue(ExecutePlan(inc, u, params(N), [b], workgroups=grid(N)), 5.0)
    assert dev.flush(5.0) == 1
    dev.enqueue(ExecutePlan(inc, u, None, [b], workgroups=grid(N)), 5.0)
    dev._faults = FaultInjector(fail={stage: 1})
    with pytest.raises(DeviceFailure) as info:
        dev.flush(5.0)
    assert info.value.stage == stage and info.value.submitted == (stage != "submit")
    assert info.value.timed_out == (stage == "timeout")
    assert dev.confirmed_ticket == 1 and dev.pending_tickets == 1  # ticket 2 is never confirmed
    if stage != "lost":
        assert dev.flush(5.0) == 1  # nothing pending any more: nothing to wait for


def test_a_failure_on_the_way_to_another_submission_is_raised_by_the_next_flush(make_device):
    dev = make_device()
    a, b, u, x2, inc = setup(dev)
    dev.enqueue(ExecutePlan(inc, u, params(N), [b], workgroups=grid(N)), 5.0)
    dev._faults = FaultInjector(fail={"submit": [2]})  # the read's own check is the first
    assert read(dev, a).shape == (N,)  # the read itself goes on
    with pytest.raises(DeviceFailure, match="pending batch"):
        dev.flush(5.0)
    assert dev.confirmed_ticket == 0
