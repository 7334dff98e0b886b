"""The repeat route (host/dispatch.py DispatchImport.dispatch's, buffers/dispatch.py Dispatcher.repeat):
a dispatch of a steady binding set's count again skips the binding checks' lookups and the plan
lookup. It is a shortcut, not a second set of rules: these tests run the same sequences of
imports with the route and with it turned off and ask for the same statuses, records, totals,
buffer states and output words, and check that the route is really taken."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from wagogpu import ElementType, Status
from wagogpu.buffers import Dispatcher
from wagogpu.diagnostics import COUNTER_NAMES
from wagogpu.gpu import FaultInjector
from wagogpu.host.dispatch import DispatchImport

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu

F32 = ElementType.F32
DOUBLE = kernel(2, "double")
N = 64
#: The record's fields that name what happened (not how long it took).
RECORD_FIELDS = ("import_name", "status", "count", "kernel_id", "outcome", "reason_code", "reason",
                 "hardware_submitted", "pipelined", "confirmed", "transfer_counts_complete", *COUNTER_NAMES)


def guest(**config) -> tuple[Guest, list[int]]:
    g = Guest(gpu_host(kernels=[DOUBLE], **config), kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
    handles = [g.create(F32, N), g.create(F32, N), g.create(F32, N // 2)]
    return g, handles


def taken(monkeypatch) -> list[bool]:
    """Whether each Dispatcher.repeat call of the host's route from now on ran the dispatch (True)
    or left it to run() (False); run()'s own calls of it (its steady state) are not counted."""
    seen: list[bool] = []
    in_run: list[bool] = []
    real_repeat, real_run = Dispatcher.repeat, Dispatcher.run

    def run(self, *args, **kwargs):
        in_run.append(True)
        try:
            return real_run(self, *args, **kwargs)
        finally:
            in_run.pop()

    def repeat(self, *args):
        result = real_repeat(self, *args)
        if not in_run:
            seen.append(result is not None)
        return result

    monkeypatch.setattr(Dispatcher, "run", run)
    monkeypatch.setattr(Dispatcher, "repeat", repeat)
    return seen


def what_happened(g: Guest, handles: list[int]) -> tuple:
    snap = g.host.buffer_snapshot()
    record = tuple(getattr(snap.last, name) for name in RECORD_FIELDS)
    states = tuple(g.state(h) if g.buf(h) is not None else "freed" for h in handles)
    return record, dataclasses.astuple(snap.totals), states, snap.device_state


def play(g: Guest, handles: list[int], seed: int, steps: int = 160) -> list[tuple]:
    """A seeded sequence of sets, dispatches (the steady count, another count, zero), copies back,
    rebinds and frees; what each step answered and left behind."""
    rng = np.random.default_rng(seed)
    x, y, short = handles
    g.bind(x, y)
    out = []
    for _ in range(steps):
        op = rng.choice(["dispatch"] * 6 + ["set", "copy", "rebind", "short", "zero", "other", "free"])
        if op == "dispatch":
            status = g.dispatch(DOUBLE.id, N)
        elif op == "zero":
            status = g.dispatch(DOUBLE.id, 0)
        elif op == "other":
            status = g.dispatch(DOUBLE.id, N // 2)
        elif op == "set":
            status = g.set_f32(x, rng.standard_normal(N).astype(np.float32))
        elif op == "copy":
            status = g.inst.call("copyBuffer32", y, 0, 0, 8192, N)
        elif op == "rebind":
            g.bind(x, y)
            status = -1
        elif op == "short":
            g.bind(x, short)
            status = -2
        else:  # free the output and make a new one in its place
            assert g.inst.call("freeBuffer", y) == 0
            y = handles[1] = g.create(F32, N)
            g.bind(x, y)
            status = -3
        out.append((str(op), int(status), *what_happened(g, handles)))
    words = [g.get_f32(h, N if h != handles[2] else N // 2, guest=4096).tobytes() for h in handles]
    out.append(tuple(words))
    return out


@pytest.mark.parametrize("seed,pipelined", [(1, False), (2, False), (3, False), (4, True), (5, True)])
def test_the_repeat_route_answers_what_the_general_path_answers(monkeypatch, seed, pipelined):
    g, handles = guest(pipelined=pipelined)
    seen = taken(monkeypatch)
    with_route = play(g, handles, seed)
    g.host.close()
    assert sum(seen) >= 20  # the route really ran dispatches
    monkeypatch.setattr(DispatchImport, "_keep_steady", lambda self, kernel_id, plan, count: None)  # no route
    g, handles = guest(pipelined=pipelined)
    without = play(g, handles, seed)
    g.host.close()
    for step, (a, b) in enumerate(zip(with_route, without)):
        assert a == b, f"step {step}: {a[0]}"
    assert len(with_route) == len(without)


def steady(monkeypatch) -> tuple[Guest, int, int, np.ndarray, list[bool]]:
    g, (x, y, _short) = guest()
    values = np.arange(N, dtype=np.float32) - 7
    assert g.set_f32(x, values) == 0
    g.bind(x, y)
    seen = taken(monkeypatch)
    for _ in range(4):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert seen and seen[-1]  # the last ones repeated
    return g, x, y, values, seen


def test_a_smaller_max_elements_leaves_the_route(monkeypatch):
    g, _x, _y, _values, seen = steady(monkeypatch)
    calls = len(seen)
    ctx = g.inst.ctx
    ctx.config = dataclasses.replace(ctx.config, max_elements=N - 1)
    assert g.dispatch(DOUBLE.id, N) == Status.LIMIT_EXCEEDED
    assert len(seen) == calls  # asked nothing of the dispatcher
    ctx.config = dataclasses.replace(ctx.config, max_elements=N)
    assert g.dispatch(DOUBLE.id, N) == Status.OK
    g.host.close()


@pytest.mark.parametrize("stage", ["submit", "wait"])
def test_a_device_failure_on_the_route_falls_back_with_its_reason(monkeypatch, stage):
    g, _x, y, values, seen = steady(monkeypatch)
    version = g.version(y)
    g.host.device._faults = FaultInjector(fail={stage: 1})
    assert g.dispatch(DOUBLE.id, N) == Status.CPU_FALLBACK
    assert seen[-1]  # the failing dispatch went through the route
    assert g.last.reason_code == "DEVICE_FAILURE" and g.version(y) == version
    assert np.array_equal(g.get_f32(y, N, guest=4096), values * 2)
    g.host.close()


def test_a_pipelined_loop_settles_at_its_bound_through_run(monkeypatch):
    g, (x, y, _short) = guest(pipelined=True)
    assert g.set_f32(x, np.ones(N, np.float32)) == 0
    g.bind(x, y)
    seen = taken(monkeypatch)
    bound = g.inst.ctx.residency.pending.tuning.max_dispatches
    for _ in range(3 * bound):
        assert g.dispatch(DOUBLE.id, N) == Status.OK
    assert seen.count(True) >= bound and False in seen  # recorded on the route; at the bound run() settled
    assert np.array_equal(g.get_f32(y, N, guest=4096), np.full(N, 2, np.float32))
    g.host.close()
