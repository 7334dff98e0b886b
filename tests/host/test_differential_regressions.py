"""Cases the differential fuzzer (fuzz/differential.py) found, reduced by hand, kept as they were
found: each must give the CPU's answer on the GPU path (status 0 with it, or status 1 and the
runner), as plain wasmtime does.

Loop cut: lavapipe stops shader loops after about 65,535 iterations, before wagogpu's loop budget
(2^20) fires, so a kernel counting `in[0]` trips commits 0xffff with status 0 (issue 16, item 1;
docs/gpu.md "Known problem on lavapipe"). The fuzzer found it as a data-dependent loop of 2,063,126
trips inside a random program; the reduced kernel is the loop alone.

The cut is per invocation, not per loop: the fuzzer then found a program with two loops of 42,396
trips each (each far below 65,535) whose second loop stopped after 23,137 trips (65,533 in all),
status 0 (tests/fixtures/fuzz/differential-two-loops-cut.json, kept as found). Reduced: two loops
of 32,768 trips give 65,533 instead of 65,536. A probe that measures one loop's cut and a budget
per loop would not catch it; the budget must count every loop of the invocation together.

Folded floats outside the reference subset: once the fuzzer held kernels whose float operands are
opaque to the driver to Wasm's floats on a software adapter, it found `y * max(sqrt(|h|), -2.5)`
with y a select of two float constants under a condition the driver can decide: the select's
constants were bare bits, so lavapipe knew y = 0 and folded `0 * inf` to 0 where Wasm gives NaN
(tests/fixtures/fuzz/differential-select-of-constants-folded.json, kept as found; reduced in
tests/host/test_control_flow_gpu.py). Then `(floor(-0) * y) * f32((i - i) >> 28)`, -0 in Wasm and
+0 on lavapipe: the driver knew the conversion was 0, so `0 | z` was z and the second copy's
`z ^ z` a known 0 (differential-known-zero-second-copy.json; the second copy now XORs another zero
word).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .. import fuzz_support  # noqa: F401 (sys.path)
import differential  # noqa: E402

COUNTING_LOOP = (
    "(local.set $k0 (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i)))"
    " (block $e (loop $l (br_if $e (i32.eqz (local.get $k0)))"
    " (local.set $c (i32.add (local.get $c) (i32.const 1)))"
    " (local.set $k0 (i32.sub (local.get $k0) (i32.const 1))) (br $l)))"
    " (call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i) (local.get $c))")


@pytest.fixture(scope="module")
def diff():
    d = differential.Differential()
    yield d
    d.close()


@pytest.mark.parametrize("trips", [65535, 65536, 1_100_000])
def test_counting_loop_gives_the_cpu_answer(diff, trips):
    inputs = {s: [0] * 64 for s in range(8)}
    inputs[0][0] = trips
    diff.check(differential.Case(COUNTING_LOOP, False, 1, 64, inputs), differential.Stats())


TWO_LOOPS = COUNTING_LOOP.replace(" (call $writeBufferI32", " " + COUNTING_LOOP.split(" (call $writeBufferI32")[0]
                                  .replace("$e", "$e2").replace("$l", "$l2") + " (call $writeBufferI32")


@pytest.mark.parametrize("trips", [30000, 32768])
def test_two_loops_share_no_cut(diff, trips):
    inputs = {s: [0] * 64 for s in range(8)}
    inputs[0][0] = trips
    diff.check(differential.Case(TWO_LOOPS, False, 1, 64, inputs), differential.Stats())


def test_the_two_loop_program_as_found(diff):
    path = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz" / "differential-two-loops-cut.json"
    diff.check(differential.Case.from_json(path.read_text()), differential.Stats())


@pytest.mark.parametrize("name", ["differential-select-of-constants-folded.json",
                                  "differential-known-zero-second-copy.json"])
def test_a_folded_float_outside_the_reference_subset_as_found(diff, name):
    path = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz" / name
    stats = differential.Stats()
    diff.check(differential.Case.from_json(path.read_text()), stats)
    assert stats.gpu_ran == 1 and stats.exact_floats == (1 if diff.software else 0)
