"""strict_float kernels (strictfloat.py): a randomized differential test of every exact f32 row on the test
adapter against IEEE-754 (numpy's binary32, which rounds to nearest even and keeps subnormals) with Wasm's
NaN rules, the WGSL they produce (integer code only), and what the flag changes and does not change."""
from __future__ import annotations

import re

import numpy as np
import pytest

from fixtures import A, E
from wagogpu.compiler import inspect_module, strictfloat
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.config import BindingConfig, KernelConfig
from watkit import kernel_module

NAMES = {0x5B: "f32.eq", 0x5C: "f32.ne", 0x5D: "f32.lt", 0x5E: "f32.gt", 0x5F: "f32.le", 0x60: "f32.ge",
         0x8D: "f32.ceil", 0x8E: "f32.floor", 0x8F: "f32.trunc", 0x90: "f32.nearest", 0x91: "f32.sqrt",
         0x92: "f32.add", 0x93: "f32.sub", 0x94: "f32.mul", 0x95: "f32.div", 0xB2: "f32.convert_i32_s",
         0xB3: "f32.convert_i32_u"}
I32, F32 = 0x7F, 0x7D
SPECIALS = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
                     0x80800000, 0x3F800000, 0xBF800000, 0x3F000000, 0x3FC00000, 0x40200000, 0x7F7FFFFF,
                     0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF,
                     0x4B000000, 0x4B7FFFFF, 0x3EFFFFFF, 0x33800000, 0x0C000000, 0x72000000], dtype=np.uint32)


def operand_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """f32 bit patterns from every class: uniform, subnormal, near 1, near overflow and underflow."""
    parts = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
             rng.integers(0, 1 << 23, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31),
             (rng.integers(0x3F000000, 0x40800000, n, dtype=np.uint32)) | (rng.integers(0, 2, n, dtype=np.uint32) << 31),
             rng.integers(0x7E000000, 0x7F800000, n, dtype=np.uint32),
             rng.integers(0x00800000, 0x0D000000, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31)]
    return np.concatenate(parts)


def operand_pairs(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = operand_bits(rng, n)
    b = operand_bits(rng, n)
    rng.shuffle(b)
    near = a ^ rng.integers(0, 4, a.size, dtype=np.uint32) ^ np.uint32(0x80000000)  # cancellation: a + (-a ~)
    grid_a, grid_b = np.meshgrid(SPECIALS, SPECIALS)
    return (np.concatenate([grid_a.ravel(), a, a, b]),
            np.concatenate([grid_b.ravel(), b, near, a[::-1]]))


def expected(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        table = {
            "f32.eq": lambda: x == y, "f32.ne": lambda: x != y, "f32.lt": lambda: x < y, "f32.gt": lambda: x > y,
            "f32.le": lambda: x <= y, "f32.ge": lambda: x >= y, "f32.ceil": lambda: np.ceil(x),
            "f32.floor": lambda: np.floor(x), "f32.trunc": lambda: np.trunc(x), "f32.nearest": lambda: np.rint(x),
            "f32.sqrt": lambda: np.sqrt(x), "f32.add": lambda: x + y, "f32.sub": lambda: x - y,
            "f32.mul": lambda: x * y, "f32.div": lambda: x / y,
            # every i32 is exact in f64, so one rounding to f32 is the correctly rounded conversion
            "f32.convert_i32_s": lambda: a.view(np.int32).astype(np.float64).astype(np.float32),
            "f32.convert_i32_u": lambda: a.astype(np.float64).astype(np.float32),
        }
        out = table[name]()
    return out.astype(np.uint32) if out.dtype == bool else out.view(np.uint32)


def wasm_equal(name: str, got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact bits, except that a NaN result may be any quiet NaN, and must be the canonical one (either
    sign) when no operand is a NaN (Wasm §4.3.3)."""
    if NAMES_RESULT[name] == I32:
        return got == want
    nan_want = (want & 0x7FFFFFFF) > 0x7F800000
    nan_in = ((a & 0x7FFFFFFF) > 0x7F800000) | (((b & 0x7FFFFFFF) > 0x7F800000) & (name in BINARY))
    quiet = (got & 0x7FC00000) == 0x7FC00000
    canonical = (got & 0x7FFFFFFF) == 0x7FC00000
    return np.where(nan_want, quiet & (canonical | nan_in), got == want)


ROWS = {name: strictfloat.STRICT[op] for op, name in NAMES.items()}
NAMES_RESULT = {name: row.result for name, row in ROWS.items()}
BINARY = {name for name, row in ROWS.items() if len(row.params) == 2}


def strict_kernel(name: str) -> tuple[bytes, KernelConfig]:
    row = ROWS[name]
    t = "I32" if row.params[0] == I32 else "F32"
    args = " ".join(f"(call $readBuffer{t} (call $getBuffer (i32.const {s})) (local.get $i))"
                    for s in range(len(row.params)))
    out = "I32" if row.result == I32 else "F32"
    body = f"(call $writeBuffer{out} (call $getBuffer (i32.const 2)) (local.get $i) ({name} {args}))"
    binds = [BindingConfig(s, E[t], A.READ) for s in range(len(row.params))] + [BindingConfig(2, E[out], A.WRITE)]
    return kernel_module(body), KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", binds, strict_float=True)


def test_every_rounding_f32_row_has_a_strict_form():
    from wagogpu.compiler.ops import NUMERIC
    f32_rounding = {op for op, row in NUMERIC.items() if row.rounding and not row.f64}
    assert f32_rounding == set(strictfloat.STRICT) == set(NAMES)
    assert all(not row.rounding and not row.f64 for row in strictfloat.STRICT.values())


@pytest.mark.parametrize("name", list(NAMES.values()))
def test_strict_row_is_exact_on_device(gpu, name):
    source, kernel = strict_kernel(name)
    lk = lower_kernel(decode_module(source), kernel)
    assert not lk.is_float  # exact: no relaxed_float consent needed
    main = lk.wgsl[lk.wgsl.index("fn main"):]
    assert not re.search(r"\bf32\b", main)  # integer code only: no float value, no float operator
    a, b = operand_pairs(seed=sum(map(ord, name)), n=20000)
    inputs = {0: a, 1: b} if name in BINARY else {0: a}
    out, err = gpu.run_kernel(lk.wgsl, a.size, {**inputs, 2: np.zeros(a.size, np.uint32)}, {2})
    assert err == 0
    want = expected(name, a, b)
    ok = wasm_equal(name, out[2], want, a, b)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (name, bad.size, [(hex(a[i]), hex(b[i]), hex(out[2][i]), hex(want[i])) for i in bad[:6]])


def test_strict_flag_changes_only_the_kernels_that_ask():
    source, kernel = strict_kernel("f32.add")
    relaxed = KernelConfig(1, kernel.export, kernel.cpu_export, kernel.bindings, relaxed_float=True)
    native = inspect_module(source, [relaxed]).kernels[1]
    strict = inspect_module(source, [kernel]).kernels[1]
    assert native.is_float and "sf_add" not in native.wgsl and " + " in native.wgsl
    assert not strict.is_float and "sf_add(" in strict.wgsl
    # copies and bit operations were exact already: the same WGSL either way
    copy = kernel_module("(call $writeBufferF32 (call $getBuffer (i32.const 2)) (local.get $i)"
                         " (f32.neg (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get $i))))")
    binds = [BindingConfig(0, E.F32, A.READ), BindingConfig(2, E.F32, A.WRITE)]
    plain = inspect_module(copy, [KernelConfig(1, kernel.export, kernel.cpu_export, binds)]).kernels[1]
    exact = inspect_module(copy, [KernelConfig(1, kernel.export, kernel.cpu_export, binds, strict_float=True)]).kernels[1]
    assert plain.wgsl == exact.wgsl and plain.is_float and not exact.is_float
