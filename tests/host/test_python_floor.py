"""bench.python_floor's direct host: the floor under the host-only figures makes the checks it
claims (docs/check-order.md's statuses, in order) and moves the words it says it moves."""
from __future__ import annotations

import numpy as np

from bench.bytecodes import count_bytecodes
from bench.python_floor import _IN, _OUT, FloorHost, floor_figures
from wagogpu.abi.table import Status


def test_the_floor_round_trip_moves_the_words_and_checks_them() -> None:
    figures = floor_figures(256, 0)
    assert figures["python_floor_checked"] is True
    assert all(figures[k] > 0 for k in ("python_floor_round_trip_us", "python_floor_resident_dispatch_us"))


def test_the_floor_answers_the_spec_statuses_in_order() -> None:
    floor = FloorHost(16, kernel_id=3)
    memory = np.zeros(64, np.uint32)
    floor.span = lambda: (memory.ctypes.data, memory.nbytes)
    assert floor.set(99, 0, 0, 0, 16) == Status.INVALID_HANDLE
    assert floor.set(_IN, 8, 0, 0, 9) == Status.INVALID_RANGE  # past the buffer's end
    assert floor.set(_IN, 0, 1, 0, 16) == Status.INVALID_RANGE  # no memory 1
    assert floor.copy(_OUT, 0, 0, memory.nbytes - 60, 16) == Status.INVALID_RANGE  # past the memory's end
    assert floor.copy(_OUT, 0, 0, memory.nbytes, 0) == Status.OK  # an offset at the end, count 0
    assert floor.dispatch(2, 16) == Status.INVALID_KERNEL
    assert floor.dispatch(3, 17) == Status.INVALID_RANGE
    memory[:16] = np.arange(16) + 7
    assert floor.set(_IN, 0, 0, 0, 16) == Status.OK and np.array_equal(floor.buffers[_IN].cpu, memory[:16])
    floor.buffers[_OUT].device[:] = 5
    assert floor.dispatch(3, 16) == Status.OK and floor.buffers[_OUT].gpu_current
    assert floor.copy(_OUT, 0, 0, 128, 16) == Status.OK and np.all(memory[32:48] == 5)
    assert floor.last is not None and floor.last.import_name == "copyBuffer32" and floor.last.status == 0
    assert floor.calls == {"setBuffer32": 4, "copyBuffer32": 3, "dispatch": 3}
    floor.closed = True
    assert floor.dispatch(3, 16) == Status.INVALID_STATE


def _sum_to(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_bytecode_counts_are_exact_and_cover_only_the_named_files() -> None:
    here = (__file__,)
    ten, twenty = (count_bytecodes(lambda n=n: _sum_to(n), here) for n in (10, 20))
    assert ten == count_bytecodes(lambda: _sum_to(10), here)  # the same call, the same count
    assert twenty.opcodes > ten.opcodes and ten.frames == twenty.frames == 2  # the lambda and _sum_to
    per_pass = (twenty.opcodes - ten.opcodes) / 10
    assert per_pass == int(per_pass) and per_pass >= 3  # each loop pass adds the same opcodes
    assert count_bytecodes(lambda: _sum_to(10), ("no such file",)).opcodes == 0
    skipped = count_bytecodes(lambda: _sum_to(20), here, skip=(("test_python_floor", "_sum_to"),))
    assert skipped.frames == 1 and 0 < skipped.opcodes < ten.opcodes  # the lambda alone
    floor = FloorHost(4, kernel_id=0)
    assert count_bytecodes(lambda: floor.dispatch(1, 4), ("bench/python_floor",)).frames == 2  # dispatch, _record
