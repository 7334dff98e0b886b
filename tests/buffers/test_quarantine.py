"""No collateral loss (issue 16; buffers/quarantine.py): when one instance's dispatch stalls or runs
past run_timeout, the runtime is quarantined, yet every other committed GPU-only buffer the device
can still give back within TransferTuning.quarantine_readback_seconds is read back intact; only
what cannot be read is CONTENTS_LOST, the failed dispatch commits nothing, and close() does not
wait for a runaway kernel (tests run on lavapipe unless WAGO_GPU_TEST=1)."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
from wagogpu import ElementType, Status
from wagogpu.buffers import TransferTuning
from wagogpu.diagnostics import QuarantineReport
from wagogpu.gpu import FaultInjector

from ..conftest import kernel
from ..gpu_support import HARDWARE_REQUIRED, Guest, gpu_host
from ..guests import abi_module, runner_kernel
from ..host.test_control_flow_gpu import INT_KERNEL, kernel_text
from ..gpu.test_loop_limits import COUNTING, LOCALS
import pytest

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

F32, I32 = ElementType.F32, ElementType.I32
DOUBLE = kernel(2, "double")
# Far shorter than the long job: about a second on lavapipe, tens of milliseconds on a GPU.
RUN_TIMEOUT = 0.01 if HARDWARE_REQUIRED else 0.05


class BigGuest(Guest):
    """A Guest whose memory holds `pages` pages (a long kernel needs many elements)."""

    def __init__(self, host, kernels: str, pages: int) -> None:
        self.host = host
        module = host.compile(abi_module(kernels=kernels, memory=f'(memory (export "memory") {pages})'))
        self.inst = host.instantiate(module)


def two_guests(readback_seconds: float = 1.0) -> tuple[Guest, BigGuest]:
    """B doubles floats; A counts (COUNTING, kernel 1): two instances of one host."""
    host = gpu_host(kernels=[INT_KERNEL, DOUBLE], tuning=TransferTuning(quarantine_readback_seconds=readback_seconds))
    b = Guest(host, kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
    a = BigGuest(host, kernel_text(COUNTING, LOCALS), pages=80)
    return b, a


def resident_result(b: Guest) -> tuple[int, int]:
    """B's committed output of a dispatch, GPU-only: (input handle, output handle)."""
    x, y = b.create(F32, 4), b.create(F32, 4)
    assert b.set_f32(x, [1, 2, 3, 4]) == 0
    b.bind(x, y)
    assert b.dispatch(DOUBLE.id, 4) == Status.OK and b.state(y) == "GPU_CURRENT"
    return x, y


def counting_job(a: BigGuest, n: int, passes: int) -> tuple[int, int]:
    """A's n-element job of `passes` loop passes per element, bound and ready to dispatch."""
    src, dst = a.create(I32, n), a.create(I32, n)
    assert a.set_raw(src, np.full(n, passes, np.uint32).tobytes(), n) == 0
    a.bind(src, dst, slots=[0, 2])
    return src, dst


def long_job(a: BigGuest) -> tuple[int, int]:
    """A job that runs far longer than its run_timeout: every element makes the most passes its
    budget allows (8,189 on lavapipe: about a second there; 2^20 on a GPU, on a million elements)."""
    budget = a.inst.module.dispatch_plans[INT_KERNEL.id].loop_budget
    return counting_job(a, 16_000 if a.host.device.info.is_software else 1 << 20, budget)


def assert_intact(b: Guest, y: int) -> None:
    assert b.state(y) == "CPU_CURRENT"
    assert list(b.get_f32(y, 4, guest=256)) == [2, 4, 6, 8]


def test_a_stalled_dispatch_loses_nothing_another_instance_committed():
    b, a = two_guests()
    _x, y = resident_result(b)
    src, dst = counting_job(a, 4, 3)
    assert a.dispatch(INT_KERNEL.id, 4) == Status.OK  # A's own committed result, GPU-only too
    a.host.device._faults = FaultInjector(fail={"timeout": 1})  # the next wait gives up: a stall
    assert a.set_raw(src, np.full(4, 5, np.uint32).tobytes(), 4) == 0
    version = a.version(dst)
    assert a.dispatch(INT_KERNEL.id, 4) == Status.CANCELLED
    snap = a.host.buffer_snapshot()
    assert snap.device_state == "QUARANTINED"
    report = snap.quarantine
    assert (report.settled, report.rescued_buffers, report.lost_buffers) == (True, 2, 0)
    assert_intact(b, y)
    assert a.version(dst) == version and a.state(dst) == "CPU_CURRENT"  # the stalled dispatch committed nothing
    assert a.inst.call("copyBuffer32", dst, 0, 0, 0, 4) == 0
    assert np.frombuffer(a.inst.read_memory(0, 16), "<u4").tolist() == [3] * 4  # its last committed result
    assert b.dispatch(DOUBLE.id, 4) == Status.CPU_FALLBACK  # quarantined: the CPU runner from here on
    a.host.close()


def runaway(readback_seconds: float) -> tuple[Guest, BigGuest, int, int, QuarantineReport]:
    """B holds a resident result (x -> y); A's long job runs past run_timeout and is cancelled."""
    b, a = two_guests(readback_seconds=readback_seconds)
    x, y = resident_result(b)  # under the default run_timeout: a GPU's first dispatch may take 0.1 s
    _src, dst = long_job(a)
    ctx = a.host.context
    ctx.config = dataclasses.replace(ctx.config, run_timeout=RUN_TIMEOUT)  # for A's job only
    assert a.dispatch(INT_KERNEL.id, a.buf(dst).length) == Status.CANCELLED
    assert a.state(dst) == "CPU_CURRENT" and a.version(dst) == 1  # the runaway's output: never committed
    report = a.host.buffer_snapshot().quarantine
    assert report.reason.startswith("dispatch failed at timeout")
    return b, a, x, y, report


def test_a_runaway_that_ends_within_the_bound_loses_nothing():
    b, a, _x, y, report = runaway(readback_seconds=60.0)
    assert (report.settled, report.rescued_buffers, report.lost_buffers) == (True, 1, 0)
    assert_intact(b, y)
    a.host.close()


def test_a_runaway_beyond_the_bound_loses_only_what_cannot_be_read_and_close_is_prompt():
    b, a, x, y, report = runaway(readback_seconds=0.0)
    assert (report.settled, report.rescued_buffers, report.lost_buffers) == (False, 0, 1)
    assert b.state(y) == "CONTENTS_LOST" and b.inst.call("copyBuffer32", y, 0, 0, 0, 4) == Status.CONTENTS_LOST
    assert b.state(x) == "CPU_CURRENT" and list(b.get_f32(x, 4, guest=256)) == [1, 2, 3, 4]
    t0 = time.perf_counter()
    a.host.close()  # the runaway still runs: the device is released behind it, on a daemon thread
    assert time.perf_counter() - t0 < RUN_TIMEOUT + 1.0


def test_buffers_named_unreadable_are_lost_and_the_others_read_back():
    """The entry point's `unreadable` (outputs of work that cannot be confirmed) is never read."""
    b, a = two_guests()
    _x, y = resident_result(b)
    _x2, y2 = resident_result(b)
    b.host.context.residency.quarantine("test", unreadable=[b.buf(y2)])
    assert_intact(b, y)
    assert b.state(y2) == "CONTENTS_LOST"
    report = b.host.buffer_snapshot().quarantine
    assert (report.reason, report.rescued_buffers, report.lost_buffers) == ("test", 1, 1)
    b.host.close()
