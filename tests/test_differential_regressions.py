"""Cases the differential fuzzer (fuzz/differential.py) found, reduced by hand, kept as they were
found: each must give the CPU's answer on the GPU path (status 0 with it, or status 1 and the
runner), as plain wasmtime does.

Loop cut: lavapipe stops every shader loop after 65,535 iterations, before wagogpu's loop budget
(2^20) fires, so a kernel counting `in[0]` trips commits 0xffff with status 0 (issue 16, item 1;
docs/gpu.md "Known problem on lavapipe"). The fuzzer found it as a data-dependent loop of 2,063,126
trips inside a random program; the reduced kernel is the loop alone.
"""
from __future__ import annotations

import pytest

from . import fuzz_support  # noqa: F401 (sys.path)
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
