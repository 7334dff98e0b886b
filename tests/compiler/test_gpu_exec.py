"""Generated shaders executed on the test adapter (lavapipe in CI): semantics, not just validity."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import TWICE_BODY, A, E, K, config, lowered, read0, write1
from wagogpu.abi.f16 import f32_bits_to_half, half_to_f32_bits
from wagogpu.compiler import workgroup_grid
from wagogpu.compiler.wgsl import MAX_GRID_COUNT, ROW_INVOCATIONS
from wasmgen import F32, FULL, I32, TM, f32add, f32c, f32sub, i32c, lget, lset, ltee

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

RW1 = config((0, E.F32, A.READ), (1, E.F32, A.READ_WRITE))


def f32_words(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def run(gpu, body: bytes, kernel=K, groups=(), abi=TM, inputs=None, count=None) -> dict[int, np.ndarray]:
    lk = lowered(body, kernel, groups, abi)
    used = [s for s in range(8) if (lk.reads | lk.writes) >> s & 1]
    inputs = inputs or {}
    n = count if count is not None else len(next(iter(inputs.values())))
    slots = {s: inputs.get(s, np.zeros(n, np.uint32)) for s in used}
    return gpu.run_buffer_kernel(lk.wgsl, n, slots, {s for s in used if lk.writes >> s & 1})


def test_twice(gpu):
    out = run(gpu, TWICE_BODY, inputs={0: f32_words([1, 2, 3, 4.5])})
    assert out[1].view(np.float32).tolist() == [2, 4, 6, 9]


def test_count_guard(gpu):
    lk = lowered(TWICE_BODY)
    out = gpu.run_buffer_kernel(lk.wgsl, 3, {0: f32_words([1, 2, 3, 4]), 1: f32_words([9, 9, 9, 9])}, {1})
    assert out[1].view(np.float32).tolist() == [2, 4, 6, 9]


def read1() -> bytes:
    return TM.read("F32", TM.get(1), lget(0))


@pytest.mark.parametrize("body, groups, expected", ids=["snapshot", "loadBeforeStore", "zeroLocal", "readBeforeWrite",
                                                       "storeFirst", "savedOldValue"], argvalues=[
    (lset(1, f32c(1.0)) + write1(f32add(lget(1), ltee(1, f32c(2.0)))), [(1, F32)], 3.0),  # B-2 / B-13 snapshot
    (lset(1, f32add(read1(), f32c(1.0))) + write1(f32c(3.0)) + write1(lget(1)), [(1, F32)], 10.0),  # B-13
    (write1(f32sub(lget(1), f32c(1.0))), [(1, F32)], -1.0),  # B-13 zero local
    (write1(f32add(read1(), f32c(1.0))), [], 10.0),  # B-12 read-before-write
    (write1(f32c(3.0)) + write1(f32add(read1(), f32c(1.0))), [], 4.0),  # B-12 store-first
    (lset(1, read1()) + write1(f32c(3.0)) + write1(f32add(lget(1), f32c(1.0))), [(1, F32)], 10.0),  # saved old
])
def test_deferred_values_and_seeds(gpu, body, groups, expected):
    out = run(gpu, body, RW1, groups, inputs={0: f32_words([1, 2, 3, 4] * 17)[:65], 1: f32_words([9.0] * 65)})
    assert (out[1].view(np.float32) == expected).all()


def test_b14_saved_bits_are_exact(gpu):
    kernel = config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (2, E.F32, A.WRITE))
    body = lset(1, read0()) + write1(f32add(lget(1), f32c(1.0))) + TM.write("F32", TM.get(2), lget(0), lget(1))
    patterns = np.array([0x7FC12345, 0xFFC00001, 0x7F800001, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000,
                         0xFF800000, 0x3F800000, 0], dtype=np.uint32)
    out = run(gpu, body, kernel, [(1, F32)], inputs={0: patterns})
    assert (out[2] == patterns).all()
    assert out[1][8] == f32_words([2.0])[0]


@pytest.mark.parametrize("t, bits", [("I8", 8), ("U8", 8), ("I16", 16), ("U16", 16), ("I32", 32), ("U32", 32)])
def test_b15_integer_data(gpu, t, bits):
    kernel = config((0, E[t], A.WRITE), (1, E[t], A.WRITE))
    body = (lset(1, lget(0)) + lset(0, i32c(0)) + lset(0, lget(1))
            + FULL.write(t, FULL.get(0), lget(0), i32c(-1)) + FULL.write(t, FULL.get(1), lget(0), lget(1)))
    n = 70000 if bits == 8 else 300
    out = run(gpu, body, kernel, [(1, I32)], FULL, count=n)
    mask = (1 << bits) - 1
    assert (out[0] == mask).all()
    assert (out[1] == (np.arange(n, dtype=np.uint64) & mask).astype(np.uint32)).all()


@pytest.mark.parametrize("t, src_bits, expect", [
    ("I8", [0x7F, 0x80, 0xFF, 0x01], [0x7F, 0xFFFFFF80, 0xFFFFFFFF, 1]),
    ("U8", [0x7F, 0x80, 0xFF, 0x01], [0x7F, 0x80, 0xFF, 1]),
    ("I16", [0x7FFF, 0x8000, 0xFFFF, 0x0001], [0x7FFF, 0xFFFF8000, 0xFFFFFFFF, 1]),
    ("U16", [0x7FFF, 0x8000, 0xFFFF, 0x0001], [0x7FFF, 0x8000, 0xFFFF, 1]),
])
def test_narrow_loads(gpu, t, src_bits, expect):
    kernel = config((0, E[t], A.READ), (1, E.U32, A.WRITE))
    body = FULL.write("U32", FULL.get(1), lget(0), FULL.read(t, FULL.get(0), lget(0)))
    out = run(gpu, body, kernel, abi=FULL, inputs={0: np.array(src_bits, np.uint32)})
    assert out[1].tolist() == expect


def test_b16_f16_helpers_exhaustive(gpu):
    halves = np.arange(65536, dtype=np.uint32)
    roundtrip = config((0, E.F16, A.READ), (1, E.F16, A.WRITE))
    out = run(gpu, FULL.write("F16", FULL.get(1), lget(0), FULL.read("F16", FULL.get(0), lget(0))), roundtrip,
              abi=FULL, inputs={0: halves})[1]
    is_nan = ((halves & 0x7C00) == 0x7C00) & ((halves & 0x3FF) != 0)
    assert (out == np.where(is_nan, 0x7E00, halves)).all()
    widen = config((0, E.F16, A.READ), (1, E.F32, A.WRITE))
    out = run(gpu, FULL.write("F32", FULL.get(1), lget(0), FULL.read("F16", FULL.get(0), lget(0))), widen,
              abi=FULL, inputs={0: halves})[1]
    assert (out == half_to_f32_bits(halves)).all()
    narrow = config((0, E.F32, A.READ), (1, E.F16, A.WRITE))
    rng = np.random.default_rng(7)
    floats = np.concatenate([np.array([0x33000000, 0x33000001, 0x3F801000, 0x3F803000, 0x477FF000, 0xFFC12345,
                                       0x38800000, 0x387FC000, 0x33800001, 0x7F7FFFFF, 0x80000001], np.uint32),
                             rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32),
                             half_to_f32_bits(halves) + 0x1000])
    out = run(gpu, FULL.write("F16", FULL.get(1), lget(0), FULL.read("F32", FULL.get(0), lget(0))), narrow,
              abi=FULL, inputs={0: floats})[1]
    assert (out == f32_bits_to_half(floats)).all()
    assert out[:6].tolist() == [0, 1, 0x3C00, 0x3C02, 0x7C00, 0x7E00]


def test_workgroup_grid_formula():
    assert workgroup_grid(0) == (0, 0)
    assert workgroup_grid(1) == (1, 1)
    assert workgroup_grid(256) == (1, 1) and workgroup_grid(257) == (2, 1)
    assert workgroup_grid(ROW_INVOCATIONS) == (65535, 1)
    assert workgroup_grid(ROW_INVOCATIONS + 1) == (65535, 2)
    assert workgroup_grid(10_000_000) == (39063, 1)
    assert workgroup_grid(MAX_GRID_COUNT) == (65535, 256)
    for bad in (-1, MAX_GRID_COUNT + 1, 1.5, True):
        with pytest.raises(ValueError):
            workgroup_grid(bad)  # type: ignore[arg-type]
    # every index below the count is covered exactly once, and none wraps around in u32
    for count in (1, 255, 256, 65535 * 256, 65535 * 256 + 1, 3 * 65535 * 256 + 7, MAX_GRID_COUNT):
        x, y = workgroup_grid(count)
        assert x <= 65535 and y <= 65535 and x * y * 256 >= count
        assert (y - 1) * ROW_INVOCATIONS + x * 256 - 1 < 1 << 32


def test_two_dimensional_grid_on_device(gpu):
    """More than 65,535 workgroups: the index must come from id.x + id.y * 16776960."""
    kernel = config((0, E.U32, A.WRITE))
    body = FULL.write("U32", FULL.get(0), lget(0), lget(0))
    count = ROW_INVOCATIONS + 4097
    assert workgroup_grid(count)[1] == 2
    out = run(gpu, body, kernel, abi=FULL, count=count)[0]
    assert (out == np.arange(count, dtype=np.uint32)).all()
