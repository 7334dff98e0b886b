"""f64 instructions: one NumericOp row per opcode and the WGSL helpers they call.

An f64 travels as its bit pattern in a vec2<u32> (low word, high word), like an i64 (int64.py).
Everything Wasm defines exactly is integer code on those bits, so it needs no f64 support on the
adapter and gives Wasm's answer on every one: abs, neg, copysign; min and max (NaN -> a quieted
NaN, -0 < +0); the comparisons (on integer keys of the patterns, false when unordered, so no
flush-to-zero can change them); ceil, floor, trunc and nearest; every conversion (promote,
demote, int -> f64 rounded to nearest even, f64 -> int truncations with their traps decided on
the bits, and the saturating ones).

Only the rounding arithmetic, add, sub, mul, div and sqrt, uses WGSL's f64 (rows with `f64`): an
adapter runs those only with the shader-f64 feature, and shader-int64 for the u64 that carries an
f64's bits in and out (naga has no bitcast between f64 and vec2<u32>); elsewhere the host gives
the kernel to the CPU with the reason "f64 needs the adapter's shader-f64 feature". The kernel needs
relaxed_float consent, strict_float or not: GPUs may round f64 division and square root
differently, and these rows have no exact integer form here.
"""
from __future__ import annotations

from .intrinsics import F32, F64, I32, I64
from .numeric import NumericOp, row

QUIET = "vec2<u32>(0u, 0x00080000u)"


def _native(expr: str, arity: int = 2) -> NumericOp:
    return row((F64,) * arity, F64, "d" * arity, "d", expr, helpers=("f64_from_bits", "f64_to_bits"), rounding=True)


def _bits(expr: str, arity: int = 1, helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((F64,) * arity, F64, "p" * arity, "p", expr, helpers=helpers, is_float=True)


def _compare(name: str) -> NumericOp:
    return row((F64, F64), I32, "pp", "u", f"{name}({{0}}, {{1}})", helpers=(name,), is_float=True)


def _convert(param: int, result: int, name: str, trap: str = "") -> NumericOp:
    forms = {I32: "u", F32: "u", I64: "p", F64: "p"}
    helpers = (name, "i64_lt_u") if trap else (name,)
    return row((param,), result, forms[param], forms[result], f"{name}({{0}})", trap, helpers, is_float=True)


def _below(hi: int, lo: int = 0) -> str:
    """The operand's bits, as an unsigned 64-bit number, are below hi:lo."""
    return f"i64_lt_u({{0}}, vec2<u32>(0x{lo:08x}u, 0x{hi:08x}u))"


def _trunc_trap(positive: tuple[int, int], negative: tuple[int, int], negative_inclusive: bool = False) -> str:
    """Wasm traps unless the bits are below `positive` (sign clear) or below `negative` (sign set;
    at or below it when inclusive); NaNs are above both."""
    neg = _below(*negative)
    if negative_inclusive:
        neg = f"({neg} || all({{0}} == vec2<u32>(0x{negative[1]:08x}u, 0x{negative[0]:08x}u)))"
    return f"select(!{_below(*positive)}, !{neg}, {{0}}.y >= 0x80000000u)"


NUMERIC: dict[int, NumericOp] = {
    0x61: _compare("f64_eq"), 0x62: _compare("f64_ne"), 0x63: _compare("f64_lt"),
    0x64: _compare("f64_gt"), 0x65: _compare("f64_le"), 0x66: _compare("f64_ge"),
    0x99: _bits("({0} & vec2<u32>(0xffffffffu, 0x7fffffffu))"),  # f64.abs
    0x9A: _bits("({0} ^ vec2<u32>(0u, 0x80000000u))"),  # f64.neg
    0x9B: _bits("f64_round_int({0}, 2u)", helpers=("f64_round_int",)),  # f64.ceil
    0x9C: _bits("f64_round_int({0}, 1u)", helpers=("f64_round_int",)),  # f64.floor
    0x9D: _bits("f64_round_int({0}, 0u)", helpers=("f64_round_int",)),  # f64.trunc
    0x9E: _bits("f64_round_int({0}, 3u)", helpers=("f64_round_int",)),  # f64.nearest
    0x9F: _native("sqrt({0})", 1),  # f64.sqrt
    0xA0: _native("{0} + {1}"),  # f64.add
    0xA1: _native("{0} - {1}"),  # f64.sub
    0xA2: _native("{0} * {1}"),  # f64.mul
    0xA3: _native("{0} / {1}"),  # f64.div
    0xA4: _bits("f64_min({0}, {1})", 2, ("f64_min",)),  # f64.min
    0xA5: _bits("f64_max({0}, {1})", 2, ("f64_max",)),  # f64.max
    0xA6: _bits("(({0} & vec2<u32>(0xffffffffu, 0x7fffffffu)) | ({1} & vec2<u32>(0u, 0x80000000u)))", 2),
    # i32.trunc_f64_s: valid for -2^31 - 1 < x < 2^31; i32.trunc_f64_u: -1 < x < 2^32
    0xAA: _convert(F64, I32, "f64_to_i32", _trunc_trap((0x41E00000, 0), (0xC1E00000, 0x00200000))),
    0xAB: _convert(F64, I32, "f64_to_u32", _trunc_trap((0x41F00000, 0), (0xBFF00000, 0))),
    # i64.trunc_f64_s: valid for -2^63 <= x < 2^63; i64.trunc_f64_u: -1 < x < 2^64
    0xB0: _convert(F64, I64, "f64_to_i64", _trunc_trap((0x43E00000, 0), (0xC3E00000, 0), True)),
    0xB1: _convert(F64, I64, "f64_to_u64", _trunc_trap((0x43F00000, 0), (0xBFF00000, 0))),
    0xB6: _convert(F64, F32, "f64_to_f32"),  # f32.demote_f64
    0xB7: _convert(I32, F64, "i32_to_f64"),  # f64.convert_i32_s
    0xB8: _convert(I32, F64, "u32_to_f64"),  # f64.convert_i32_u
    0xB9: _convert(I64, F64, "i64_to_f64"),  # f64.convert_i64_s
    0xBA: _convert(I64, F64, "u64_to_f64"),  # f64.convert_i64_u
    0xBB: _convert(F32, F64, "f32_to_f64"),  # f64.promote_f32
}

# 0xFC-prefixed instructions, by sub-opcode.
SATURATING: dict[int, NumericOp] = {
    0x02: _convert(F64, I32, "f64_to_i32_sat"), 0x03: _convert(F64, I32, "f64_to_u32_sat"),
    0x06: _convert(F64, I64, "f64_to_i64_sat"), 0x07: _convert(F64, I64, "f64_to_u64_sat"),
}

# Comparisons on integer keys of the patterns (-0 and +0 share key 0): false when unordered.
_ORDERED = {"f64_lt": "i64_lt_s(f64_key(a), f64_key(b))", "f64_gt": "i64_lt_s(f64_key(b), f64_key(a))",
            "f64_le": "!i64_lt_s(f64_key(b), f64_key(a))", "f64_ge": "!i64_lt_s(f64_key(a), f64_key(b))",
            "f64_eq": "all(f64_key(a) == f64_key(b))"}

HELPERS: dict[str, str] = {
    # An f64 value from its bits and back, through a u64 (naga's bitcast<f64> takes no vec2<u32>).
    "f64_from_bits": """fn f64_from_bits(p: vec2<u32>) -> f64 {
  return bitcast<f64>(u64(p.x) | (u64(p.y) << 32u));
}
""",
    "f64_to_bits": """fn f64_to_bits(x: f64) -> vec2<u32> {
  let w = bitcast<u64>(x);
  return vec2<u32>(u32(w), u32(w >> 32u));
}
""",
    "f64_is_nan": """fn f64_is_nan(a: vec2<u32>) -> bool {
  let h = a.y & 0x7fffffffu;
  return h > 0x7ff00000u || (h == 0x7ff00000u && a.x != 0u);
}
""",
    # Total order of non-NaN f64 patterns as i64 keys (two's complement of the sign-magnitude).
    "f64_key": """fn f64_key(a: vec2<u32>) -> vec2<u32> {
  let m = vec2<u32>(a.x, a.y & 0x7fffffffu);
  return select(m, i64_neg(m), a.y >= 0x80000000u);
}
""",
    **{name: f"""fn {name}(a: vec2<u32>, b: vec2<u32>) -> u32 {{
  return u32(!f64_is_nan(a) && !f64_is_nan(b) && {test});
}}
""" for name, test in _ORDERED.items()},
    "f64_ne": """fn f64_ne(a: vec2<u32>, b: vec2<u32>) -> u32 {
  return 1u - f64_eq(a, b);
}
""",
    "f64_min": f"""fn f64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {{
  if (f64_is_nan(a)) {{ return a | {QUIET}; }}
  if (f64_is_nan(b)) {{ return b | {QUIET}; }}
  if (all(f64_key(a) == f64_key(b))) {{ return a | b; }}
  return select(b, a, i64_lt_s(f64_key(a), f64_key(b)));
}}
""",
    "f64_max": f"""fn f64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {{
  if (f64_is_nan(a)) {{ return a | {QUIET}; }}
  if (f64_is_nan(b)) {{ return b | {QUIET}; }}
  if (all(f64_key(a) == f64_key(b))) {{ return a & b; }}
  return select(b, a, i64_lt_s(f64_key(b), f64_key(a)));
}}
""",
    # Rounding to an integral value (mode 0 trunc, 1 floor, 2 ceil, 3 nearest), as strictfloat's
    # sf_round_int on 64-bit patterns: whether the dropped fraction moves the magnitude up a unit.
    "f64_round_int": f"""fn f64_round_int(a: vec2<u32>, mode: u32) -> vec2<u32> {{
  let e = (a.y >> 20u) & 0x7ffu;
  let sign = a.y & 0x80000000u;
  if (e >= 1075u) {{ return select(a, a | {QUIET}, f64_is_nan(a)); }}
  if ((a.x | (a.y & 0x7fffffffu)) == 0u) {{ return a; }}
  let neg = sign != 0u;
  if (e < 1023u) {{
    var one = false;
    if (mode == 1u) {{ one = neg; }}
    if (mode == 2u) {{ one = !neg; }}
    if (mode == 3u) {{ one = e == 1022u && ((a.y & 0xfffffu) | a.x) != 0u; }}
    return vec2<u32>(0u, sign | select(0u, 0x3ff00000u, one));
  }}
  let unit = i64_shl(vec2<u32>(1u, 0u), vec2<u32>(1075u - e, 0u));
  let mask = i64_sub(unit, vec2<u32>(1u, 0u));
  let frac = a & mask;
  let t = a & ~mask;
  let half = i64_shr_u(unit, vec2<u32>(1u, 0u));
  let inexact = (frac.x | frac.y) != 0u;
  var up = false;
  if (mode == 1u) {{ up = neg && inexact; }}
  if (mode == 2u) {{ up = !neg && inexact; }}
  if (mode == 3u) {{ up = i64_lt_u(half, frac) || (all(frac == half) && ((t.x & unit.x) | (t.y & unit.y)) != 0u); }}
  return select(t, i64_add(t, unit), up);
}}
""",
    # |trunc(x)| for the bits of a finite x with |x| < 2^64 (the significand is m * 2^(e - 1075)).
    "f64_to_u64": """fn f64_to_u64(a: vec2<u32>) -> vec2<u32> {
  let e = (a.y >> 20u) & 0x7ffu;
  if (e < 1023u) { return vec2<u32>(0u, 0u); }
  let m = vec2<u32>(a.x, (a.y & 0xfffffu) | 0x100000u);
  if (e < 1075u) { return i64_shr_u(m, vec2<u32>(1075u - e, 0u)); }
  return i64_shl(m, vec2<u32>(e - 1075u, 0u));
}
""",
    "f64_to_i64": """fn f64_to_i64(a: vec2<u32>) -> vec2<u32> {
  let m = f64_to_u64(a);
  return select(m, i64_neg(m), a.y >= 0x80000000u);
}
""",
    "f64_to_i32": """fn f64_to_i32(a: vec2<u32>) -> u32 {
  return f64_to_i64(a).x;
}
""",
    "f64_to_u32": """fn f64_to_u32(a: vec2<u32>) -> u32 {
  return f64_to_u64(a).x;
}
""",
    "f64_to_i32_sat": """fn f64_to_i32_sat(a: vec2<u32>) -> u32 {
  if (f64_is_nan(a)) { return 0u; }
  if (a.y < 0x80000000u) {
    if (!i64_lt_u(a, vec2<u32>(0u, 0x41e00000u))) { return 0x7fffffffu; }
  } else if (!i64_lt_u(a, vec2<u32>(0u, 0xc1e00000u))) {
    return 0x80000000u;
  }
  return f64_to_i64(a).x;
}
""",
    "f64_to_u32_sat": """fn f64_to_u32_sat(a: vec2<u32>) -> u32 {
  if (f64_is_nan(a) || a.y >= 0x80000000u) { return 0u; }
  if (!i64_lt_u(a, vec2<u32>(0u, 0x41f00000u))) { return 0xffffffffu; }
  return f64_to_u64(a).x;
}
""",
    "f64_to_i64_sat": """fn f64_to_i64_sat(a: vec2<u32>) -> vec2<u32> {
  if (f64_is_nan(a)) { return vec2<u32>(0u, 0u); }
  if (a.y < 0x80000000u) {
    if (!i64_lt_u(a, vec2<u32>(0u, 0x43e00000u))) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
  } else if (!i64_lt_u(a, vec2<u32>(0u, 0xc3e00000u))) {
    return vec2<u32>(0u, 0x80000000u);
  }
  return f64_to_i64(a);
}
""",
    "f64_to_u64_sat": """fn f64_to_u64_sat(a: vec2<u32>) -> vec2<u32> {
  if (f64_is_nan(a) || a.y >= 0x80000000u) { return vec2<u32>(0u, 0u); }
  if (!i64_lt_u(a, vec2<u32>(0u, 0x43f00000u))) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
  return f64_to_u64(a);
}
""",
    # Every u32 is exact in f64: the bits below the leading one become the top of the fraction.
    "u32_to_f64": """fn u32_to_f64(x: u32) -> vec2<u32> {
  if (x == 0u) { return vec2<u32>(0u, 0u); }
  let z = countLeadingZeros(x);
  let frac = (x << z) << 1u;
  return vec2<u32>(frac << 20u, ((1054u - z) << 20u) | (frac >> 12u));
}
""",
    "i32_to_f64": """fn i32_to_f64(x: u32) -> vec2<u32> {
  let m = u32_to_f64(select(x, 0u - x, x >= 0x80000000u));
  return vec2<u32>(m.x, m.y | (x & 0x80000000u));
}
""",
    # 64 bits rounded to a 53-bit significand, to nearest even (a carry moves into the exponent).
    "u64_to_f64": """fn u64_to_f64(a: vec2<u32>) -> vec2<u32> {
  if (a.y == 0u) { return u32_to_f64(a.x); }
  let z = countLeadingZeros(a.y);
  let m = i64_shl(a, vec2<u32>(z, 0u));
  let rest = m.x & 0x7ffu;
  let lo = (m.x >> 11u) | (m.y << 21u);
  let hi = ((1086u - z) << 20u) | ((m.y >> 11u) & 0xfffffu);
  let up = rest > 0x400u || (rest == 0x400u && (lo & 1u) == 1u);
  return i64_add(vec2<u32>(lo, hi), vec2<u32>(u32(up), 0u));
}
""",
    "i64_to_f64": """fn i64_to_f64(a: vec2<u32>) -> vec2<u32> {
  let m = u64_to_f64(i64_abs(a));
  return vec2<u32>(m.x, m.y | (a.y & 0x80000000u));
}
""",
    # Exact: subnormals normalised, a NaN keeps its payload and is quieted.
    "f32_to_f64": """fn f32_to_f64(b: u32) -> vec2<u32> {
  let sign = b & 0x80000000u;
  let e = (b >> 23u) & 0xffu;
  let m = b & 0x7fffffu;
  if (e == 255u) { return vec2<u32>(m << 29u, sign | 0x7ff00000u | (m >> 3u) | select(0u, 0x80000u, m != 0u)); }
  if (e == 0u) {
    if (m == 0u) { return vec2<u32>(0u, sign); }
    let shift = countLeadingZeros(m) - 8u;
    let n = (m << shift) & 0x7fffffu;
    return vec2<u32>(n << 29u, sign | ((897u - shift) << 20u) | (n >> 3u));
  }
  return vec2<u32>(m << 29u, sign | ((e + 896u) << 20u) | (m >> 3u));
}
""",
    # Rounded to f32 by strictfloat's sf_pack: the significand to bit 30 with a sticky bit.
    "f64_to_f32": """fn f64_to_f32(a: vec2<u32>) -> u32 {
  let sign = a.y & 0x80000000u;
  let e = (a.y >> 20u) & 0x7ffu;
  if (e == 0x7ffu) {
    if (f64_is_nan(a)) { return sign | 0x7fc00000u | ((a.y & 0xfffffu) << 3u) | (a.x >> 29u); }
    return sign | 0x7f800000u;
  }
  if ((a.x | (a.y & 0x7fffffffu)) == 0u) { return sign; }
  let high = (a.y & 0xfffffu) | select(0u, 0x100000u, e != 0u);
  let s = (high << 10u) | (a.x >> 22u) | u32((a.x & 0x3fffffu) != 0u);
  return sf_pack(sign, i32(e) - 897, s);
}
""",
}
