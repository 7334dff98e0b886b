"""Random sequences of sets, scalar accesses, dispatches, copy-backs and evictions, run side by side
on two hosts: one with the large-transfer paths (prestage, parking, in-place writes, read-ahead)
taking every buffer, one with them off. Every status, value, buffer state, version and transfer
counter must agree, and the values must match a plain numpy model of the twice kernel.

Also under a budget so tight that sets and dispatches evict. The fast paths hold more (an upload
stage, parked readbacks), so they evict more often, and every eviction drops the parameter block
(as the reference's evict-everything does). There the parameter-upload counters may differ; nothing
else may."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wagogpu import ElementType, Status
from wagogpu.buffers import TransferTuning

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

N = 1024  # 4 KiB of f32: at the lowered thresholds below every path applies
TIGHT_BUDGET = 7 * 4 * N + 64  # two buffers' CPU and GPU copies and three more buffers' worth
F32 = ElementType.F32
TWICE = "(f32.mul $x (f32.const 2))"
FAST = TransferTuning(prestage_min_bytes=4096, park_min_bytes=4096)
PLAIN = TransferTuning(prestage_min_bytes=1 << 62, park_min_bytes=1 << 62, readahead=False)


@pytest.fixture(scope="module", params=[None, TIGHT_BUDGET], ids=["budget_default", "budget_tight"])
def pair(request):
    guests = []
    budget = {"max_instance_buffer_bytes": request.param} if request.param else {}
    for tuning in (FAST, PLAIN):
        host = gpu_host(kernels=[kernel(1, "double")], tuning=tuning, **budget)
        guests.append(Guest(host, kernels=runner_kernel("double", 0, 1, TWICE)))
    yield guests
    for g in guests:
        g.host.close()


values = st.lists(st.integers(-1000, 1000), min_size=1, max_size=N).map(lambda v: np.array(v, np.float32) / 4)
round_trip = st.tuples(st.just("round"), values)  # full set of a, dispatch of N, copy-back of b
ROUND_STEPS = (("dispatch", N), ("copy", 1, 0, N, True))
ops = st.one_of(
    round_trip, round_trip, round_trip,
    st.tuples(st.just("set"), st.integers(0, 1), st.integers(0, N - 1), values, st.booleans()),
    st.tuples(st.just("write"), st.integers(0, 1), st.integers(0, N - 1), st.integers(-50, 50)),
    st.tuples(st.just("read"), st.integers(0, 1), st.integers(0, N - 1)),
    st.tuples(st.just("dispatch"), st.sampled_from([N, N, N, 1, 100, N - 1])),
    st.tuples(st.just("copy"), st.integers(0, 1), st.integers(0, N - 1), st.integers(1, N), st.booleans()),
    st.tuples(st.just("evict"), st.sampled_from([1, 4 * N, None])),
)


def apply(g: Guest, handles: tuple[int, int], op: tuple) -> tuple:
    """Run one op on one guest; returns what the guest saw."""
    kind = op[0]
    if kind == "round":
        steps = (("set", 0, 0, op[1], True), *ROUND_STEPS)
        return tuple(apply(g, handles, step) for step in steps)
    if kind == "set":
        _, which, offset, vals, full = op
        if full:
            offset, vals = 0, np.resize(vals, N)
        vals = vals[:N - offset]
        return (g.set_f32(handles[which], vals, offset=offset, guest=8192),)
    if kind == "write":
        _, which, i, v = op
        g.inst.call("writeBufferF32", handles[which], i, float(v))
        return ()
    if kind == "read":
        _, which, i = op
        return (g.inst.call("readBufferF32", handles[which], i),)
    if kind == "dispatch":
        return (g.dispatch(1, op[1]),)
    if kind == "copy":
        _, which, offset, count, whole = op
        if whole:
            offset, count = 0, N
        count = min(count, N - offset)
        status = g.inst.call("copyBuffer32", handles[which], offset, 0, 16384, count)
        return status, np.frombuffer(g.inst.read_memory(16384, 4 * count), np.float32).tobytes()
    g.inst.buffers.release_idle(op[1])
    return ()


def model_apply(model: list[np.ndarray], op: tuple, seen: tuple) -> None:
    kind = op[0]
    if kind == "round":
        for step, step_seen in zip((("set", 0, 0, op[1], True), *ROUND_STEPS), seen):
            model_apply(model, step, step_seen)
    elif kind == "set":
        _, which, offset, vals, full = op
        if full:
            offset, vals = 0, np.resize(vals, N)
        vals = vals[:N - offset]
        model[which][offset:offset + len(vals)] = vals
    elif kind == "write":
        model[op[1]][op[2]] = op[3]
    elif kind == "read":
        assert seen[0] == model[op[1]][op[2]]
    elif kind == "dispatch":
        assert seen[0] == 0
        model[1][:op[1]] = model[0][:op[1]] * 2
    elif kind == "copy":
        _, which, offset, count, whole = op
        if whole:
            offset, count = 0, N
        count = min(count, N - offset)
        assert seen[0] == 0 and seen[1] == model[which][offset:offset + count].tobytes()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(sequence=st.lists(ops, min_size=1, max_size=20))
def test_fast_and_plain_paths_agree(pair, sequence) -> None:
    fast, plain = pair
    handles = []
    for g in pair:
        a, b = g.create(F32, N), g.create(F32, N)
        g.bind(a, b)
        handles.append((a, b))
    before = [g.host.buffer_snapshot().totals for g in pair]
    model = [np.zeros(N, np.float32), np.zeros(N, np.float32)]
    try:
        for op in sequence:
            got = apply(fast, handles[0], op)
            want = apply(plain, handles[1], op)
            assert got == want, op
            model_apply(model, op, got)
            for which in (0, 1):
                assert fast.state(handles[0][which]) == plain.state(handles[1][which]), (op, which)
                assert fast.version(handles[0][which]) == plain.version(handles[1][which]), (op, which)
        after = [g.host.buffer_snapshot().totals for g in pair]
        fast_delta = {k: v - getattr(before[0], k) for k, v in vars(after[0]).items()}
        plain_delta = {k: v - getattr(before[1], k) for k, v in vars(after[1]).items()}
        if fast.inst.buffers.limits.max_bytes == TIGHT_BUDGET:
            for k in ("parameter_upload_bytes", "parameter_upload_count"):
                del fast_delta[k], plain_delta[k]
        assert fast_delta == plain_delta
    finally:
        for g, hs in zip(pair, handles):
            for h in hs:
                assert g.inst.call("freeBuffer", h) == 0


@pytest.mark.parametrize("profile", [False, True])
def test_transfers_time_their_commit_in_profile_mode_only(profile):
    """A set and a copy-back (of a CPU-current and of a GPU-current buffer) keep the same counters
    either way; their commit time is measured, and the profile valid, in profile mode only."""
    double = kernel(2, "double")
    g = Guest(gpu_host(kernels=[double], profile_stages=profile),
              kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
    x, y = g.create(ElementType.F32, 64), g.create(ElementType.F32, 64)
    values = np.arange(64, dtype=np.float32)
    assert g.set_f32(x, values) == 0
    records = [g.last]
    assert np.array_equal(g.get_f32(x, 64, guest=4096), values)
    records.append(g.last)
    g.bind(x, y)
    assert g.dispatch(double.id, 64) == Status.OK
    assert np.array_equal(g.get_f32(y, 64, guest=4096), values * 2)
    records.append(g.last)
    assert [(r.guest_set_bytes, r.guest_set_count, r.guest_copy_bytes, r.guest_copy_count) for r in records] == [
        (256, 1, 0, 0), (0, 0, 256, 1), (0, 0, 256, 1)]
    assert records[2].download_count == 1  # (the GPU-current output was read back)
    for r in records:
        assert r.profile_valid is profile
        assert (r.commit > 0) is profile
    g.host.close()
