"""The numeric instructions: one NumericOp row (numeric.py) per opcode, and the WGSL helper
functions some of them call. f32 add, sub and mul are the reference's subset (docs/design/compiler.md §1.3.5)
and become deferred nodes (lowering.py); the others are our extension of it, each emitted as a let
where it happens. The i32 and f32 rows are here; the i64 rows and their helpers are int64.py's,
the f64 ones float64.py's, merged into the same tables; strictfloat.py holds the exact forms of
the rounding f32 rows.

How values are carried (records.Form): an i32 is always a `u32` in WGSL (wrapping arithmetic is
Wasm's; signed operations bitcast to i32 just for the operator). An f32 is carried either as its
bit pattern in a `u32` (loads, constants, and the exact bit operations below) or as an `f32`
value (the results of rounding arithmetic). Each row says which form it wants for each operand
("u" = u32 bits, "f" = f32 value) and which form its result has.

Wasm semantics and how they are kept:

* Integer arithmetic is exact: u32 wraps like Wasm; shift counts are masked with `& 31u` as Wasm
  masks them (WGSL would reject an oversized constant shift); rotations, division and remainder go
  through helper functions whose divisor is never zero (a constant divisor can then never make the
  WGSL a const-expression error). Signed division and remainder work on the operands' magnitudes
  in u32 and fix the sign after (quotient negative when the signs differ, remainder with the
  dividend's sign, both truncating like Wasm): only u32 division reaches the driver, whose signed
  remainder was wrong on the H200 for some signs. INT_MIN / -1 traps before the helper runs, and
  INT_MIN % -1 gives 0 as Wasm wants (|INT_MIN| is 0x80000000 as a u32).
* Traps: a row with a `trap` condition is emitted as a test in main before the value is computed;
  when it holds, the shader raises KernelError.TRAP in the error word and returns, so the dispatch
  commits nothing and the guest's CPU runner traps exactly where Wasm does. div_s traps on a zero
  divisor and on INT_MIN / -1; rem_s only on zero (INT_MIN % -1 is 0, handled in the helper);
  trunc_f32_s / trunc_f32_u trap on NaN and out-of-range values, decided on the bit pattern.
* f32 abs, neg and copysign are bit operations in Wasm and here (NaN payloads kept); min and max
  follow Wasm, not WGSL: a NaN operand gives a (quieted) NaN, -0 < +0, decided on integer keys of
  the bit patterns so no GPU float mode can change the answer. The saturating truncations are
  integer code on the bits too (NaN -> 0, clamped to the target range).
* ceil, floor, trunc map to WGSL's; nearest is WGSL `round`, which rounds half to even like Wasm.
* f32 comparisons: eq, lt, gt, le, ge are WGSL's ordered comparisons (false on NaN, as Wasm);
  ne is `!(a == b)` (true on NaN, as Wasm), since WGSL's != becomes an ordered not-equal.
* Rounding arithmetic (add, sub, mul, div, sqrt, i32 -> f32 conversion) and f32 comparisons use the
  GPU's float units: GPUs may fuse, flush subnormals or round div/sqrt differently, and a kernel
  doing any of this is `is_float`, so it needs relaxed_float consent (docs/design/abi.md §5.5).
"""
from __future__ import annotations

from dataclasses import replace

from . import float64, int64, strictfloat
from .intrinsics import F32, I32
from .numeric import NumericOp, call_row, dependencies, row
from .records import Form

__all__ = ["NUMERIC", "SATURATING", "HELPERS", "NumericOp", "helper_text"]


def _i32(expr: str, trap: str = "", helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((I32, I32), I32, "uu", "u", expr, trap, helpers)


def _i32_unary(expr: str) -> NumericOp:
    return row((I32,), I32, "u", "u", expr)


def _signed_compare(op: str) -> NumericOp:
    return _i32(f"u32(bitcast<i32>({{0}}) {op} bitcast<i32>({{1}}))")


def _f32_compare(op: str) -> NumericOp:
    return row((F32, F32), I32, "ff", "u", f"u32({{0}} {op} {{1}})", rounding=True)


def _f32_value(expr: str, arity: int = 1) -> NumericOp:
    return row((F32,) * arity, F32, "f" * arity, "f", expr, rounding=True)


def _f32_bits(expr: str, arity: int = 1, helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((F32,) * arity, F32, "u" * arity, "u", expr, helpers=helpers, is_float=True)


def _deferred(operator: str) -> NumericOp:
    """The reference's f32 arithmetic (docs/design/compiler.md §2.1.4): a node emitted when first used."""
    return NumericOp((F32, F32), F32, (Form.VALUE, Form.VALUE), Form.VALUE, f"{{0}} {operator} {{1}}",
                     is_float=True, infix=f" {operator} ", rounding=True)


ZERO_DIVISOR = "{1} == 0u"

_ROWS: dict[int, NumericOp] = {
    0x45: _i32_unary("u32({0} == 0u)"),  # i32.eqz
    0x46: _i32("u32({0} == {1})"),  # i32.eq
    0x47: _i32("u32({0} != {1})"),  # i32.ne
    0x48: _signed_compare("<"),  # i32.lt_s
    0x49: _i32("u32({0} < {1})"),  # i32.lt_u
    0x4A: _signed_compare(">"),  # i32.gt_s
    0x4B: _i32("u32({0} > {1})"),  # i32.gt_u
    0x4C: _signed_compare("<="),  # i32.le_s
    0x4D: _i32("u32({0} <= {1})"),  # i32.le_u
    0x4E: _signed_compare(">="),  # i32.ge_s
    0x4F: _i32("u32({0} >= {1})"),  # i32.ge_u
    0x5B: _f32_compare("=="),  # f32.eq
    # f32.ne is true when either operand is NaN; WGSL's != becomes an ordered not-equal in SPIR-V
    0x5C: row((F32, F32), I32, "ff", "u", "u32(!({0} == {1}))", rounding=True),
    0x5D: _f32_compare("<"),  # f32.lt
    0x5E: _f32_compare(">"),  # f32.gt
    0x5F: _f32_compare("<="),  # f32.le
    0x60: _f32_compare(">="),  # f32.ge
    0x67: _i32_unary("countLeadingZeros({0})"),  # i32.clz (32 for 0, as Wasm)
    0x68: _i32_unary("countTrailingZeros({0})"),  # i32.ctz
    0x69: _i32_unary("countOneBits({0})"),  # i32.popcnt
    0x6A: _i32("{0} + {1}"),  # i32.add
    0x6B: _i32("{0} - {1}"),  # i32.sub
    0x6C: _i32("{0} * {1}"),  # i32.mul
    0x6D: _i32("wasm_div_s({0}, {1})", "{1} == 0u || ({0} == 0x80000000u && {1} == 0xffffffffu)",
               ("wasm_div_s",)),  # i32.div_s
    0x6E: _i32("wasm_div_u({0}, {1})", ZERO_DIVISOR, ("wasm_div_u",)),  # i32.div_u
    0x6F: _i32("wasm_rem_s({0}, {1})", ZERO_DIVISOR, ("wasm_rem_s",)),  # i32.rem_s
    0x70: _i32("wasm_rem_u({0}, {1})", ZERO_DIVISOR, ("wasm_rem_u",)),  # i32.rem_u
    0x71: _i32("{0} & {1}"),  # i32.and
    0x72: _i32("{0} | {1}"),  # i32.or
    0x73: _i32("{0} ^ {1}"),  # i32.xor
    0x74: _i32("{0} << ({1} & 31u)"),  # i32.shl
    0x75: _i32("bitcast<u32>(bitcast<i32>({0}) >> ({1} & 31u))"),  # i32.shr_s
    0x76: _i32("{0} >> ({1} & 31u)"),  # i32.shr_u
    0x77: _i32("wasm_rotl({0}, {1})", helpers=("wasm_rotl",)),  # i32.rotl
    0x78: _i32("wasm_rotr({0}, {1})", helpers=("wasm_rotr",)),  # i32.rotr
    0x8B: _f32_bits("({0} & 0x7fffffffu)"),  # f32.abs
    0x8C: _f32_bits("({0} ^ 0x80000000u)"),  # f32.neg
    0x8D: _f32_value("ceil({0})"),  # f32.ceil
    0x8E: _f32_value("floor({0})"),  # f32.floor
    0x8F: _f32_value("trunc({0})"),  # f32.trunc
    0x90: _f32_value("round({0})"),  # f32.nearest (WGSL round: half to even)
    0x91: _f32_value("sqrt({0})"),  # f32.sqrt
    0x92: _deferred("+"),  # f32.add
    0x93: _deferred("-"),  # f32.sub
    0x94: _deferred("*"),  # f32.mul
    0x95: _f32_value("{0} / {1}", 2),  # f32.div
    0x96: _f32_bits("wasm_fmin({0}, {1})", 2, ("wasm_fkey", "wasm_fmin")),  # f32.min
    0x97: _f32_bits("wasm_fmax({0}, {1})", 2, ("wasm_fkey", "wasm_fmax")),  # f32.max
    0x98: _f32_bits("(({0} & 0x7fffffffu) | ({1} & 0x80000000u))", 2),  # f32.copysign
    # i32.trunc_f32_s: valid for -2^31 <= x < 2^31, i.e. bits < 0x4f000000 or 0x80000000..0xcf000000
    0xA8: row((F32,), I32, "u", "u", "bitcast<u32>(i32(bitcast<f32>({0})))",
                    "select({0} >= 0x4f000000u, {0} > 0xcf000000u, {0} >= 0x80000000u)", is_float=True),
    # i32.trunc_f32_u: valid for -1 < x < 2^32, i.e. bits < 0x4f800000 or 0x80000000..0xbf7fffff
    0xA9: row((F32,), I32, "u", "u", "select(u32(bitcast<f32>({0})), 0u, {0} >= 0x80000000u)",
                    "select({0} >= 0x4f800000u, {0} >= 0xbf800000u, {0} >= 0x80000000u)", is_float=True),
    0xB2: row((I32,), F32, "u", "f", "f32(bitcast<i32>({0}))", rounding=True),  # f32.convert_i32_s
    0xB3: row((I32,), F32, "u", "f", "f32({0})", rounding=True),  # f32.convert_i32_u
    0xC0: _i32_unary("bitcast<u32>(bitcast<i32>({0} << 24u) >> 24u)"),  # i32.extend8_s
    0xC1: _i32_unary("bitcast<u32>(bitcast<i32>({0} << 16u) >> 16u)"),  # i32.extend16_s
    **int64.NUMERIC,
    **float64.NUMERIC,
}
# Each rounding f32 row with its exact form for strict_float kernels (strictfloat.py).
NUMERIC: dict[int, NumericOp] = {opcode: replace(op, strict=strictfloat.STRICT[opcode])
                                 if opcode in strictfloat.STRICT else op for opcode, op in _ROWS.items()}

# 0xFC-prefixed instructions, by sub-opcode.
SATURATING: dict[int, NumericOp] = {
    0x00: call_row("wasm_trunc_sat_s", (F32,), I32, "u", "u", is_float=True),  # i32.trunc_sat_f32_s
    0x01: call_row("wasm_trunc_sat_u", (F32,), I32, "u", "u", is_float=True),  # i32.trunc_sat_f32_u
    **int64.SATURATING,
    **float64.SATURATING,
}

# Helper functions, in the order they appear in a shader. Integer-only code and no float literal,
# so no NaN or Inf constant is ever written.
_I32_HELPERS: dict[str, str] = {
    # Signed division and remainder on magnitudes in u32: exact on every input (the NVIDIA H200
    # driver gave wrong signed remainders for some operand signs through WGSL's i32 %).
    "wasm_div_s": """fn wasm_div_s(a: u32, b: u32) -> u32 {
  let d = select(b, 1u, b == 0u);
  let q = select(a, 0u - a, a >= 0x80000000u) / select(d, 0u - d, d >= 0x80000000u);
  return select(q, 0u - q, (a ^ d) >= 0x80000000u);
}
""",
    "wasm_div_u": """fn wasm_div_u(a: u32, b: u32) -> u32 {
  return a / select(b, 1u, b == 0u);
}
""",
    "wasm_rem_s": """fn wasm_rem_s(a: u32, b: u32) -> u32 {
  let d = select(b, 1u, b == 0u);
  let r = select(a, 0u - a, a >= 0x80000000u) % select(d, 0u - d, d >= 0x80000000u);
  return select(r, 0u - r, a >= 0x80000000u);
}
""",
    "wasm_rem_u": """fn wasm_rem_u(a: u32, b: u32) -> u32 {
  return a % select(b, 1u, b == 0u);
}
""",
    "wasm_rotl": """fn wasm_rotl(a: u32, b: u32) -> u32 {
  let k = b & 31u;
  return (a << k) | (a >> ((32u - k) & 31u));
}
""",
    "wasm_rotr": """fn wasm_rotr(a: u32, b: u32) -> u32 {
  let k = b & 31u;
  return (a >> k) | (a << ((32u - k) & 31u));
}
""",
    # Total order of non-NaN f32 bit patterns as i32 keys; -0 and +0 share key 0.
    "wasm_fkey": """fn wasm_fkey(b: u32) -> i32 {
  let m = bitcast<i32>(b & 0x7fffffffu);
  return select(m, -m, b >= 0x80000000u);
}
""",
    "wasm_fmin": """fn wasm_fmin(a: u32, b: u32) -> u32 {
  if ((a & 0x7fffffffu) > 0x7f800000u) { return a | 0x00400000u; }
  if ((b & 0x7fffffffu) > 0x7f800000u) { return b | 0x00400000u; }
  let ka = wasm_fkey(a);
  let kb = wasm_fkey(b);
  if (ka == kb) { return a | b; }
  return select(b, a, ka < kb);
}
""",
    "wasm_fmax": """fn wasm_fmax(a: u32, b: u32) -> u32 {
  if ((a & 0x7fffffffu) > 0x7f800000u) { return a | 0x00400000u; }
  if ((b & 0x7fffffffu) > 0x7f800000u) { return b | 0x00400000u; }
  let ka = wasm_fkey(a);
  let kb = wasm_fkey(b);
  if (ka == kb) { return a & b; }
  return select(b, a, ka > kb);
}
""",
    "wasm_trunc_sat_s": """fn wasm_trunc_sat_s(b: u32) -> u32 {
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  if (b < 0x80000000u) {
    if (b >= 0x4f000000u) { return 0x7fffffffu; }
  } else if (b > 0xcf000000u) {
    return 0x80000000u;
  }
  return bitcast<u32>(i32(bitcast<f32>(b)));
}
""",
    "wasm_trunc_sat_u": """fn wasm_trunc_sat_u(b: u32) -> u32 {
  if ((b & 0x7fffffffu) > 0x7f800000u || b >= 0x80000000u) { return 0u; }
  if (b >= 0x4f800000u) { return 0xffffffffu; }
  return u32(bitcast<f32>(b));
}
""",
}
HELPERS: dict[str, str] = {**_I32_HELPERS, **int64.HELPERS, **strictfloat.HELPERS, **float64.HELPERS}
HELPER_ORDER = tuple(HELPERS)
_DEPENDS = dependencies(HELPERS)


def helper_text(names: "frozenset[str] | set[str] | tuple[str, ...]") -> str:
    """The helper functions `names` need, with the helpers they call, in HELPER_ORDER (each once)."""
    needed: set[str] = set()
    for name in names:
        needed |= _DEPENDS[name]
    return "".join(HELPERS[n] for n in HELPER_ORDER if n in needed)
