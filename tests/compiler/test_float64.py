"""f64 (float64.py): every f64 row lowered, validated by wgpu and run on the test adapter against wasmtime's
answer, over edge patterns (zeros, subnormals, infinities, NaNs, every truncation bound) and random ones.
The integer-coded rows are exact bit for bit (a NaN result: quiet, canonical when no operand is a NaN);
the native rows (add, sub, mul, div, sqrt: shader-f64) to the same, up to 2 ulps for division and square
root (relaxed_float; lavapipe gives them exactly). Traps where Wasm traps."""
from __future__ import annotations

import numpy as np
import pytest

from rowkit import F32, F64, I32, I64, kernel_of, run_gpu, wasm_answers
from wagogpu.compiler import float64, inspect_module
from wagogpu.compiler.contract import KernelError

NAMES = {
    0x61: "f64.eq", 0x62: "f64.ne", 0x63: "f64.lt", 0x64: "f64.gt", 0x65: "f64.le", 0x66: "f64.ge",
    0x99: "f64.abs", 0x9A: "f64.neg", 0x9B: "f64.ceil", 0x9C: "f64.floor", 0x9D: "f64.trunc",
    0x9E: "f64.nearest", 0x9F: "f64.sqrt", 0xA0: "f64.add", 0xA1: "f64.sub", 0xA2: "f64.mul", 0xA3: "f64.div",
    0xA4: "f64.min", 0xA5: "f64.max", 0xA6: "f64.copysign", 0xAA: "i32.trunc_f64_s", 0xAB: "i32.trunc_f64_u",
    0xB0: "i64.trunc_f64_s", 0xB1: "i64.trunc_f64_u", 0xB6: "f32.demote_f64", 0xB7: "f64.convert_i32_s",
    0xB8: "f64.convert_i32_u", 0xB9: "f64.convert_i64_s", 0xBA: "f64.convert_i64_u", 0xBB: "f64.promote_f32",
}
SAT_NAMES = {0x02: "i32.trunc_sat_f64_s", 0x03: "i32.trunc_sat_f64_u", 0x06: "i64.trunc_sat_f64_s",
             0x07: "i64.trunc_sat_f64_u"}
ROWS = [(n, float64.NUMERIC[op]) for op, n in NAMES.items()] + [(n, float64.SATURATING[op]) for op, n in SAT_NAMES.items()]
NATIVE = {"f64.add", "f64.sub", "f64.mul", "f64.div", "f64.sqrt"}


def f64_bits(*values: float) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.uint64).tolist()


EDGES = {
    F64: f64_bits(0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 4503599627370495.5,
                  4503599627370497.0, 2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0, -2147483648.5,
                  4294967295.0, 4294967296.0, 9.223372036854775e18, 9223372036854775808.0, -9223372036854775808.0,
                  1.8446744073709552e19, 1e300, -1e300, 1e-300, 3.4028234663852886e38, 3.4028235677973366e38,
                  1.401298464324817e-45, 7.006492321624085e-46, 1.1754942106924411e-38, np.inf, -np.inf)
    + [0x0000000000000001, 0x800FFFFFFFFFFFFF, 0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001,
       0x7FF4000000000000, 0x3FEFFFFFFFFFFFFF, 0xBFEFFFFFFFFFFFFF, 0xC1E0000000200000, 0xC1E00000001FFFFF],
    F32: [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000,
          0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x3EAAAAAB],
    I32: [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x12345678, 0x00FFFFFF, 0x01000001],
    I64: [0, 1, (1 << 64) - 1, (1 << 63) - 1, 1 << 63, (1 << 53) + 1, (1 << 54) + 2, (1 << 54) + 6,
          0x0020000000000001, 0xFFE0000000000001, 0x123456789ABCDEF0, 0x7FFFFFFFFFFFFC00, 0x7FFFFFFFFFFFFE00],
}


def _random(rng: np.random.Generator, wtype: int, n: int) -> list[int]:
    bits = 64 if wtype in (I64, F64) else 32
    raw = rng.integers(0, 1 << 62, n, dtype=np.uint64) * 4 + rng.integers(0, 4, n, dtype=np.uint64)
    values = [int(v) >> (64 - bits) for v in raw]
    if wtype == F64:  # and values near 1, of moderate magnitude: most arithmetic happens there
        values += f64_bits(*rng.uniform(-8, 8, n // 2)) + f64_bits(*rng.uniform(-1e10, 1e10, n // 2))
    return values


def operands(row, seed: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    t = row.params[0]
    if len(row.params) == 1:
        return [(v,) for v in EDGES[t] + _random(rng, t, 2000)]
    pairs = [(x, y) for x in EDGES[t] for y in EDGES[t]]
    return pairs + list(zip(_random(rng, t, 3000), _random(rng, t, 3000)))


def _nan(bits: int, wtype: int) -> bool:
    return (bits & ((1 << 63) - 1)) > 0x7FF0000000000000 if wtype == F64 else (bits & 0x7FFFFFFF) > 0x7F800000


# ulps a GPU's f64 division and square root may be off by (relaxed_float; lavapipe is exact)
ULPS = {"f64.div": 2, "f64.sqrt": 2}


def agrees(name: str, row, ops: tuple[int, ...], got: int, want: int) -> bool:
    """Wasm's answer: the bits, except that a NaN result is any quiet NaN, canonical when no operand is one."""
    if got == want or row.result not in (F32, F64):
        return got == want
    if not _nan(want, row.result):
        return got >> 63 == want >> 63 and abs(got - want) <= ULPS.get(name, 0)
    quiet = 1 << 51 if row.result == F64 else 1 << 22
    payload = got & (quiet - 1)
    nan_in = any(_nan(v, t) for v, t in zip(ops, row.params))
    return _nan(got, row.result) and bool(got & quiet) and (nan_in or payload == 0)


def test_every_f64_row_is_tested():
    assert set(NAMES) == set(float64.NUMERIC) and set(SAT_NAMES) == set(float64.SATURATING)
    assert {n for n, row in ROWS if row.f64} == NATIVE  # the rest is integer code: no shader-f64 needed


@pytest.mark.parametrize("name, row", ROWS, ids=[name for name, _ in ROWS])
def test_f64_instruction_on_device(gpu, name, row):
    ops = operands(row, seed=sum(map(ord, name)))
    want, traps = wasm_answers(name, row, ops)
    ok = [o for o, t in zip(ops, traps) if not t]
    lk, got, err = run_gpu(gpu, name, row, ok)
    assert err == 0 and lk.is_float and lk.f64 == (name in NATIVE)
    wrong = [(o, g, w) for o, g, w in zip(ok, got, [w for w, t in zip(want, traps) if not t]) if not agrees(name, row, o, g, w)]
    assert not wrong, (name, len(wrong), [tuple(map(hex, o)) + (hex(g), hex(w)) for o, g, w in wrong[:5]])
    assert lk.error_word == bool(row.trap)
    bad = [o for o, t in zip(ops, traps) if t]
    if bad:
        for batch in (bad[:1], ok[:5] + bad + ok[5:9]):
            assert run_gpu(gpu, name, row, batch)[2] == KernelError.TRAP, name


def test_f64_plans_say_whether_they_need_the_feature():
    exact, _ = kernel_of("f64.nearest", float64.NUMERIC[0x9E])
    native, kernel = kernel_of("f64.mul", float64.NUMERIC[0xA2])
    assert not inspect_module(exact, [kernel]).kernels[1].needs_f64
    plan = inspect_module(native, [kernel]).kernels[1]
    assert plan.needs_f64 and plan.is_float and "bitcast<f64>" in plan.wgsl
    strict_source, strict = kernel_of("f64.mul", float64.NUMERIC[0xA2], strict=True)
    assert inspect_module(strict_source, [strict]).kernels[1].is_float  # no exact form: consent still needed
