"""Strict float (issue 16 item 3b): exact IEEE-754 binary32 arithmetic, comparisons, roundings and
int -> f32 conversions as integer code on the bit patterns, for kernels declared strict_float.

No GPU float mode can change an integer result: flush-to-zero, the driver's algebraic folding,
contraction into fused multiply-add and approximate division or square root never reach these
rows. Results are Wasm's: rounding to nearest, ties to even; subnormals kept; a NaN operand comes
back quieted (an arithmetic NaN), an invalid operation gives the canonical NaN 0x7fc00000;
comparisons order -0 == +0 and are false on NaN (ne true). A strict kernel therefore needs no
relaxed_float consent (docs/gpu.md), at about 6x the instructions of native arithmetic.

The algorithms were measured exact on lavapipe (0 wrong of 600,529 operand pairs per operation,
spec/proposals/README.md). Significands travel with their leading one at bit 30 and seven bits
below the rounding position, the lowest a sticky bit (ORed in by sf_jam); sf_pack's `e` is the
biased exponent minus one, so a significand s stands for s * 2^(e - 156).
"""
from __future__ import annotations

from .intrinsics import F32, I32
from .numeric import NumericOp, row


def _binary(name: str, result: int = F32) -> NumericOp:
    return row((F32, F32), result, "uu", "u", f"{name}({{0}}, {{1}})", helpers=(name,), is_float=True)


def _unary(name: str, param: int = F32) -> NumericOp:
    return row((param,), F32, "u", "u", f"{name}({{0}})", helpers=(name,), is_float=True)


# The exact form of each rounding f32 row (ops.py attaches them as NumericOp.strict), by opcode.
STRICT: dict[int, NumericOp] = {
    0x5B: _binary("sf_eq", I32), 0x5C: _binary("sf_ne", I32), 0x5D: _binary("sf_lt", I32),
    0x5E: _binary("sf_gt", I32), 0x5F: _binary("sf_le", I32), 0x60: _binary("sf_ge", I32),
    0x8D: _unary("sf_ceil"), 0x8E: _unary("sf_floor"), 0x8F: _unary("sf_trunc"), 0x90: _unary("sf_nearest"),
    0x91: _unary("sf_sqrt"), 0x92: _binary("sf_add"), 0x93: _binary("sf_sub"), 0x94: _binary("sf_mul"),
    0x95: _binary("sf_div"),
    0xB2: _unary("i32_to_f32", I32), 0xB3: _unary("u32_to_f32", I32),  # f32.convert_i32_s/u (int64.py)
}

# Comparisons on the integer keys of the bit patterns (-0 and +0 share key 0): false when unordered.
_ORDERED = {"sf_eq": "==", "sf_lt": "<", "sf_gt": ">", "sf_le": "<=", "sf_ge": ">="}

# How sf_mul and sf_div begin: a NaN operand decides the result; else the result's sign and the
# operands' magnitudes.
_PRODUCT_START = """  let nan = sf_nan_of(a, b);
  if (nan != 0u) { return nan; }
  let sign = (a ^ b) & 0x80000000u;
  let ma = a & 0x7fffffffu;
  let mb = b & 0x7fffffffu;
"""

HELPERS: dict[str, str] = {
    **{name: f"""fn {name}(a: u32, b: u32) -> u32 {{
  return u32(sf_ordered(a, b) && wasm_fkey(a) {op} wasm_fkey(b));
}}
""" for name, op in _ORDERED.items()},
    # x >> n with every bit shifted out ORed into bit 0 (the sticky bit).
    "sf_jam": """fn sf_jam(x: u32, n: u32) -> u32 {
  if (n == 0u) { return x; }
  if (n >= 31u) { return u32(x != 0u); }
  return (x >> n) | u32((x << (32u - n)) != 0u);
}
""",
    # Round s * 2^(e - 156) to the nearest f32 (ties to even), subnormal or infinite as it falls.
    "sf_pack": """fn sf_pack(sign: u32, e_in: i32, s_in: u32) -> u32 {
  var e = e_in;
  var s = s_in;
  if (e < 0) {
    s = sf_jam(s, u32(-e));
    e = 0;
  } else if (e >= 0xfd && (e > 0xfd || s + 0x40u >= 0x80000000u)) {
    return sign | 0x7f800000u;
  }
  let rest = s & 0x7fu;
  s = (s + 0x40u) >> 7u;
  if (rest == 0x40u) { s = s & 0xfffffffeu; }
  if (s == 0u) { e = 0; }
  return sign | ((u32(e) << 23u) + s);
}
""",
    # (significand with its leading one at bit 23, exponent), subnormals normalised; a != 0.
    "sf_unpack": """fn sf_unpack(a: u32) -> vec2<i32> {
  let e = i32((a >> 23u) & 0xffu);
  let m = a & 0x7fffffu;
  if (e != 0) { return vec2<i32>(i32(m | 0x800000u), e); }
  let shift = countLeadingZeros(m) - 8u;
  return vec2<i32>(i32(m << shift), 1 - i32(shift));
}
""",
    "sf_is_nan": """fn sf_is_nan(a: u32) -> bool {
  return (a & 0x7fffffffu) > 0x7f800000u;
}
""",
    # The quieted NaN operand of a binary operation (the first one), or 0 when neither is a NaN.
    "sf_nan_of": """fn sf_nan_of(a: u32, b: u32) -> u32 {
  if (sf_is_nan(a)) { return a | 0x400000u; }
  if (sf_is_nan(b)) { return b | 0x400000u; }
  return 0u;
}
""",
    "sf_add": """fn sf_add(a_in: u32, b_in: u32) -> u32 {
  let nan = sf_nan_of(a_in, b_in);
  if (nan != 0u) { return nan; }
  var a = a_in;
  var b = b_in;
  if ((a & 0x7fffffffu) < (b & 0x7fffffffu)) { a = b_in; b = a_in; }
  let sign = a & 0x80000000u;
  let opposite = ((a ^ b) & 0x80000000u) != 0u;
  if ((a & 0x7fffffffu) == 0x7f800000u) {
    if (opposite && (b & 0x7fffffffu) == 0x7f800000u) { return 0x7fc00000u; }
    return a;
  }
  if ((b & 0x7fffffffu) == 0u) {
    if ((a & 0x7fffffffu) == 0u) { return a & b; }
    return a;
  }
  let ea = max((a >> 23u) & 0xffu, 1u);
  let eb = max((b >> 23u) & 0xffu, 1u);
  let sa = ((a & 0x7fffffu) | select(0u, 0x800000u, ((a >> 23u) & 0xffu) != 0u)) << 7u;
  let sb = sf_jam(((b & 0x7fffffu) | select(0u, 0x800000u, ((b >> 23u) & 0xffu) != 0u)) << 7u, ea - eb);
  if (!opposite) {
    var s = sa + sb;
    var e = i32(ea) - 1;
    if (s >= 0x80000000u) { s = sf_jam(s, 1u); e = e + 1; }
    return sf_pack(sign, e, s);
  }
  let s = sa - sb;
  if (s == 0u) { return 0u; }
  let shift = min(countLeadingZeros(s) - 1u, ea - 1u);
  return sf_pack(sign, i32(ea) - 1 - i32(shift), s << shift);
}
""",
    "sf_sub": """fn sf_sub(a: u32, b: u32) -> u32 {
  if (sf_is_nan(b)) { return sf_add(a, b); }
  return sf_add(a, b ^ 0x80000000u);
}
""",
    "sf_mul": """fn sf_mul(a: u32, b: u32) -> u32 {
""" + _PRODUCT_START + """  if (ma == 0x7f800000u || mb == 0x7f800000u) {
    if (ma == 0u || mb == 0u) { return 0x7fc00000u; }
    return sign | 0x7f800000u;
  }
  if (ma == 0u || mb == 0u) { return sign; }
  let ua = sf_unpack(a);
  let ub = sf_unpack(b);
  let p = u32_mul_wide(u32(ua.x), u32(ub.x));  // in [2^46, 2^48): (low word, high word)
  var s = (p.y << 16u) | (p.x >> 16u) | u32((p.x & 0xffffu) != 0u);
  var e = ua.y + ub.y - 128;
  if (s >= 0x80000000u) { s = sf_jam(s, 1u); e = e + 1; }
  return sf_pack(sign, e, s);
}
""",
    # Restoring division: 31 quotient bits, the remainder's rest as the sticky bit.
    "sf_div": """fn sf_div(a: u32, b: u32) -> u32 {
""" + _PRODUCT_START + """  if (ma == 0x7f800000u) {
    if (mb == 0x7f800000u) { return 0x7fc00000u; }
    return sign | 0x7f800000u;
  }
  if (mb == 0x7f800000u) { return sign; }
  if (mb == 0u) {
    if (ma == 0u) { return 0x7fc00000u; }
    return sign | 0x7f800000u;
  }
  if (ma == 0u) { return sign; }
  let ua = sf_unpack(a);
  let ub = sf_unpack(b);
  var rem = u32(ua.x);
  let d = u32(ub.x);
  var e = ua.y - ub.y + 126;
  if (rem < d) { rem = rem << 1u; e = e - 1; }
  var q = 0u;
  for (var i = 0u; i < 31u; i = i + 1u) {
    q = q << 1u;
    if (rem >= d) { rem = rem - d; q = q | 1u; }
    rem = rem << 1u;
  }
  return sf_pack(sign, e, q | u32(rem != 0u));
}
""",
    # Bit-by-bit square root of the significand scaled to an even exponent; the 64-bit square of
    # the candidate decides each bit, and whether it is exact gives the sticky bit.
    "sf_sqrt": """fn sf_sqrt(a: u32) -> u32 {
  if (sf_is_nan(a)) { return a | 0x400000u; }
  if ((a & 0x7fffffffu) == 0u) { return a; }
  if (a >= 0x80000000u) { return 0x7fc00000u; }
  if (a == 0x7f800000u) { return a; }
  let ua = sf_unpack(a);
  var t = ua.y - 150;
  var m = u32(ua.x);
  if ((t & 1) != 0) { m = m << 1u; t = t - 1; } else { m = m << 2u; t = t - 2; }
  let hi = m << 4u;
  var r = 0u;
  for (var bit = 30i; bit >= 0; bit = bit - 1) {
    let c = r | (1u << u32(bit));
    let sq = u32_mul_wide(c, c);
    if (sq.y < hi || (sq.y == hi && sq.x == 0u)) { r = c; }
  }
  let sq = u32_mul_wide(r, r);
  return sf_pack(0u, t / 2 + 138, r | u32(sq.y != hi || sq.x != 0u));
}
""",
    "sf_ordered": """fn sf_ordered(a: u32, b: u32) -> bool {
  return !sf_is_nan(a) && !sf_is_nan(b);
}
""",
    "sf_ne": """fn sf_ne(a: u32, b: u32) -> u32 {
  return 1u - sf_eq(a, b);
}
""",
    # Rounding to an integral value (mode 0 trunc, 1 floor, 2 ceil, 3 nearest): whether the
    # dropped fraction moves the magnitude up one unit is decided from the sign, the fraction
    # and, for nearest, the halfway point and the kept unit's parity.
    "sf_round_int": """fn sf_round_int(a: u32, mode: u32) -> u32 {
  let e = (a >> 23u) & 0xffu;
  let sign = a & 0x80000000u;
  if (e >= 150u) { return select(a, a | 0x400000u, sf_is_nan(a)); }
  if ((a & 0x7fffffffu) == 0u) { return a; }
  let neg = sign != 0u;
  if (e < 127u) {
    var one = false;
    if (mode == 1u) { one = neg; }
    if (mode == 2u) { one = !neg; }
    if (mode == 3u) { one = e == 126u && (a & 0x7fffffu) != 0u; }
    return sign | select(0u, 0x3f800000u, one);
  }
  let unit = 1u << (150u - e);
  let frac = a & (unit - 1u);
  let t = a & ~(unit - 1u);
  var up = false;
  if (mode == 1u) { up = neg && frac != 0u; }
  if (mode == 2u) { up = !neg && frac != 0u; }
  if (mode == 3u) { up = frac > (unit >> 1u) || (frac == (unit >> 1u) && (t & unit) != 0u); }
  return t + select(0u, unit, up);
}
""",
    "sf_trunc": """fn sf_trunc(a: u32) -> u32 {
  return sf_round_int(a, 0u);
}
""",
    "sf_floor": """fn sf_floor(a: u32) -> u32 {
  return sf_round_int(a, 1u);
}
""",
    "sf_ceil": """fn sf_ceil(a: u32) -> u32 {
  return sf_round_int(a, 2u);
}
""",
    "sf_nearest": """fn sf_nearest(a: u32) -> u32 {
  return sf_round_int(a, 3u);
}
""",
}
