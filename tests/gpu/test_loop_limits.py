"""Loop limits measured, not assumed (issue 16): the device's loop probe finds where the adapter cuts
shader loops short, and every kernel's loop budget (word 1 of its parameter block) stays below that
cut, so a loop that would be cut falls back to the guest's CPU runner instead of committing a
truncated answer with status 0. On lavapipe the cut is 65,535 passes shared by 8 invocations; on a
GPU without a cut the budget is the compiler's 2^20 (tests run on lavapipe unless WAGO_GPU_TEST=1)."""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pytest

from wagogpu import Status
from wagogpu.compiler import reader as lim
from wagogpu.gpu import ExecutePlan
from wagogpu.gpu.probe import PROBE_PASSES, loop_budget

from ..gpu_support import Guest, gpu_host
from ..host.test_control_flow_gpu import INT_KERNEL, kernel_text, rd, wr

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

LOCALS = "(local $a i32) (local $b i32) (local $k i32)"
COUNT = 64  # elements: eight groups of eight lanes on lavapipe
# Counts to in[i] with one pass through the loop head per count (in[i] >= 1).
COUNTING = (f"(loop $l (br_if $l (i32.lt_u (local.tee $a (i32.add (local.get $a) (i32.const 1))) {rd(0)})))"
            + wr(2, "I32", "(local.get $a)"))
# Element i runs its inner loop (in[i] passes) at pass i % 32 of an outer loop of 32 passes: the
# lanes of a group take turns, so a driver count shared by the group adds up all of theirs.
STEPS = 32
TAKING_TURNS = (f"(loop $o (if (i32.eq (local.get $k) (i32.rem_u (local.get $i) (i32.const {STEPS})))"
                f" (then (loop $in (br_if $in (i32.lt_u (local.tee $b (i32.add (local.get $b) (i32.const 1)))"
                f" {rd(0)})))))"
                f" (br_if $o (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 1))) (i32.const {STEPS}))))"
                + wr(2, "I32", "(local.get $b)"))
# TAKING_TURNS whose inner loop also runs two `if`s that a branch leaves: each becomes a WGSL loop
# that never repeats, and lavapipe charges each a pass every time it runs.
_LEFT_IF = ("(if (i32.and (local.get $b) (i32.const {bit})) (then (br_if 0 (i32.eqz (local.get $k)))"
            " (local.set $a (i32.add (local.get $a) (i32.const 1)))))")
WITH_WRAPPERS = (f"(loop $o (if (i32.eq (local.get $k) (i32.rem_u (local.get $i) (i32.const {STEPS})))"
                 f" (then (loop $in {_LEFT_IF.format(bit=1)} {_LEFT_IF.format(bit=2)}"
                 f" (br_if $in (i32.lt_u (local.tee $b (i32.add (local.get $b) (i32.const 1))) {rd(0)})))))"
                 f" (br_if $o (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 1))) (i32.const {STEPS}))))"
                 + wr(2, "I32", "(i32.xor (local.get $b) (i32.shl (local.get $a) (i32.const 16)))"))
RUNAWAY = wr(2, "I32", "(i32.const 7)") + " (loop $l (br $l))"


@dataclass
class Job:
    status: int
    reason: str
    budget: int  # the loop budget the kernel's dispatches carried
    committed: bool  # the dispatch itself changed the output (its version moved)
    output: list[int]  # the output after the job (the CPU runner ran after status 1)


def run(host, body: str, inputs: list[int], runner: bool = True) -> Job:
    g = Guest(host, kernels=kernel_text(body, LOCALS))
    try:
        src, dst = g.create(INT_KERNEL.bindings[0].type, len(inputs)), g.create(INT_KERNEL.bindings[1].type, len(inputs))
        assert g.set_raw(src, np.asarray(inputs, np.uint32).tobytes(), len(inputs)) == 0
        g.bind(src, dst, slots=[0, 2])
        version = g.version(dst)
        status = g.dispatch(INT_KERNEL.id, len(inputs))
        reason, committed = g.last.reason_code, g.version(dst) != version
        if status == Status.CPU_FALLBACK and runner:
            g.inst.call(INT_KERNEL.cpu_export, len(inputs))
        assert g.inst.call("copyBuffer32", dst, 0, 0, 0, len(inputs)) == 0
        output = np.frombuffer(g.inst.read_memory(0, 4 * len(inputs)), "<u4").tolist()
        return Job(status, reason, g.inst.module.dispatch_plans[INT_KERNEL.id].loop_budget, committed, output)
    finally:
        g.inst.close()


@pytest.fixture(scope="module")
def gpu():
    host = gpu_host(kernels=[INT_KERNEL])
    yield host
    host.close()


def count_on_device(device, passes: int) -> int:
    """One invocation of a plain WGSL loop that counts its passes up to `passes`."""
    wgsl = ("struct P { n: u32, a: u32, b: u32, c: u32 }\n@group(0) @binding(0) var<uniform> p: P;\n"
            "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
            "@compute @workgroup_size(1)\nfn main() {\n  var n = 0u;\n  var x = 7u;\n"
            "  loop { n = n + 1u; x = x * 747796405u + 2891336453u; if (n >= p.n) { break; } }\n"
            "  out[0] = n;\n  out[1] = x;\n}\n")
    pipeline = device.pipeline(wgsl, [False])
    uniform, out, staging = device.create_uniform(16), device.create_storage(8), device.create_staging(8)
    try:
        device.execute(ExecutePlan(pipeline=pipeline, uniform=uniform, params=struct.pack("<4I", passes, 0, 0, 0),
                                   storage=[out]), 30.0)
        return int(device.read(out, staging, 8, 30.0)[0])
    finally:
        for handle in (uniform, out, staging):
            device.release(handle)
        device.release_pipeline(pipeline)


def test_the_probe_measures_the_cut_a_counting_loop_meets(gpu):
    device = gpu.device
    limits = device.loop_limits
    assert limits.error == "" and limits.seconds > 0
    if limits.cut is None:  # no cut within PROBE_PASSES: a loop of that many passes runs to its end
        assert count_on_device(device, PROBE_PASSES) == PROBE_PASSES and limits.budget is None
        return
    cut = limits.cut
    assert [count_on_device(device, n) for n in (cut - 1, cut, cut + 1, 4 * cut)] == [cut - 1, cut, cut, cut]
    # the promise of a one-loop budget: a group of `lanes` invocations, each making budget + 1 passes
    # (the last one raises the error word), stays within the cut
    assert limits.budget is not None and limits.lanes * (limits.budget + 1) + 1 <= cut


def test_the_limits_are_measured_once_per_adapter_and_shown(gpu):
    other = gpu_host(kernels=[INT_KERNEL])
    try:
        assert other.device.loop_limits is gpu.device.loop_limits  # not probed again
    finally:
        other.close()
    snap = gpu.buffer_snapshot()
    limits = snap.loop_limits
    assert limits is gpu.device.loop_limits
    adapter_budget = loop_budget(limits, 1)
    assert snap.loop_budget == (lim.LOOP_BUDGET if adapter_budget is None else min(lim.LOOP_BUDGET, adapter_budget))


@pytest.mark.parametrize("n", [1, 65_535, 65_536, 200_000])
def test_counting_loops_give_the_cpu_answer(gpu, n):
    """On the GPU where the budget allows, else through the fallback: never a truncated count."""
    job = run(gpu, COUNTING, [n] * 4)
    assert job.output == [n] * 4
    if n <= job.budget:
        assert (job.status, job.committed) == (Status.OK, True)
    else:
        assert (job.status, job.reason, job.committed) == (Status.CPU_FALLBACK, "LOOP_BUDGET", False)


def test_a_runaway_loop_falls_back_and_commits_nothing(gpu):
    job = run(gpu, RUNAWAY, [0] * 4, runner=False)  # (the CPU runner would never return)
    assert (job.status, job.reason, job.committed, job.output) == (Status.CPU_FALLBACK, "LOOP_BUDGET", False, [0] * 4)


def test_lanes_taking_turns_in_nested_loops_are_never_cut(gpu):
    """Each element's passes (STEPS outer + n inner) decide between the GPU and the fallback; a
    budget that ignored the lanes sharing the driver's count would commit cut inner loops here."""
    budget = run(gpu, TAKING_TURNS, [1] * COUNT).budget
    one_loop = run(gpu, COUNTING, [1]).budget
    limits = gpu.device.loop_limits
    two_loops = loop_budget(limits, 2)  # the kernel has two loops: its budget is that of two
    assert budget == (lim.LOOP_BUDGET if two_loops is None else min(lim.LOOP_BUDGET, two_loops))
    assert budget < one_loop or limits.cut is None
    wide = 9000 if limits.cut is None else limits.cut // limits.lanes + 100  # too long for a shared count
    for n in (budget - STEPS, budget - STEPS + 1, wide):
        job = run(gpu, TAKING_TURNS, [n] * COUNT)
        assert job.output == [n] * COUNT, n
        assert job.status == (Status.OK if STEPS + n <= budget else Status.CPU_FALLBACK), n
        assert job.committed == (job.status == Status.OK)


def taking_turns_answer(i: int, n: int) -> int:
    """WITH_WRAPPERS as Wasm computes it for element i and n inner passes: the two ifs see b =
    0 .. n - 1 (before its increment) and both branch out when k == 0."""
    with_bit_1 = n // 2
    with_bit_2 = n // 4 * 2 + max(0, n % 4 - 2)
    a = 0 if i % STEPS == 0 else with_bit_1 + with_bit_2
    return (n ^ (a << 16)) & 0xFFFFFFFF


def test_block_wrappers_count_in_the_budget(gpu):
    """Four WGSL loops (two Wasm loops, two wrappers the driver keeps): the budget of four. With
    only the Wasm loops counted, n = two_loops - STEPS would be committed cut on lavapipe."""
    budget = run(gpu, WITH_WRAPPERS, [1] * COUNT).budget
    limits = gpu.device.loop_limits
    four = loop_budget(limits, 4)
    assert budget == (lim.LOOP_BUDGET if four is None else min(lim.LOOP_BUDGET, four))
    two_loops = loop_budget(limits, 2) or lim.LOOP_BUDGET
    for n in (budget - STEPS, min(two_loops, lim.LOOP_BUDGET) - STEPS):
        job = run(gpu, WITH_WRAPPERS, [n] * COUNT)
        assert job.output == [taking_turns_answer(i, n) for i in range(COUNT)], n
        assert job.status == (Status.OK if STEPS + n <= budget else Status.CPU_FALLBACK), n
