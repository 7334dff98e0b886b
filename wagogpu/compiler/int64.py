"""i64 instructions in 32-bit words: one NumericOp row per opcode and the WGSL helpers they call.

An i64 travels as a vec2<u32> (low word, high word): wgpu's WGSL has no 64-bit integer without a
device feature that not every adapter has, and two words give every adapter the same code. Every
row is integer code, so every result is bit-exact:

* add and sub carry and borrow between the words; mul is the low 64 bits of the product, built
  from a 32 x 32 -> 64 product of 16-bit halves plus the two cross products of the high words;
* shift and rotate counts are taken mod 64, as Wasm does; the signed shift keeps the sign word;
* comparisons compare the high words first (signed ones with the sign bits flipped, which turns
  the signed order into the unsigned one), then the low words;
* div and rem are a restoring long division that starts at the dividend's leading one (at most
  64 steps; one u32 division when both operands fit in 32 bits). Signed ones divide magnitudes
  and fix the signs after, truncating like Wasm. A zero divisor and INT64_MIN / -1 trap before
  the helper runs (rows' `trap`); INT64_MIN % -1 is 0, as Wasm wants.
* conversions to f32 round to nearest even in integer code (no float unit is involved, so the
  answer is Wasm's on every adapter); f32 -> i64 truncations decide their traps and saturation on
  the f32 bit pattern and build the integer from the significand.
"""
from __future__ import annotations

from .intrinsics import F32, I32, I64
from .numeric import NumericOp, call_row, row

ZERO64 = "vec2<u32>(0u, 0u)"


def _binary(expr: str, trap: str = "", helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((I64, I64), I64, "pp", "p", expr, trap, helpers)


def _binary_call(name: str, trap: str = "") -> NumericOp:
    return call_row(name, (I64, I64), I64, "pp", "p", trap)


def _unary(expr: str, helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((I64,), I64, "p", "p", expr, helpers=helpers)


def _compare(expr: str, helpers: tuple[str, ...] = ()) -> NumericOp:
    return row((I64, I64), I32, "pp", "u", f"u32({expr})", helpers=helpers)


def _call(name: str) -> str:
    return f"{name}({{0}}, {{1}})"


ZERO_DIVISOR = f"all({{1}} == {ZERO64})"
SIGNED_OVERFLOW = "(all({0} == vec2<u32>(0u, 0x80000000u)) && all({1} == vec2<u32>(0xffffffffu, 0xffffffffu)))"

NUMERIC: dict[int, NumericOp] = {
    0x50: row((I64,), I32, "p", "u", f"u32(all({{0}} == {ZERO64}))"),  # i64.eqz
    0x51: _compare("all({0} == {1})"),  # i64.eq
    0x52: _compare("any({0} != {1})"),  # i64.ne
    0x53: _compare(_call("i64_lt_s"), ("i64_lt_s",)),  # i64.lt_s
    0x54: _compare(_call("i64_lt_u"), ("i64_lt_u",)),  # i64.lt_u
    0x55: _compare("i64_lt_s({1}, {0})", ("i64_lt_s",)),  # i64.gt_s
    0x56: _compare("i64_lt_u({1}, {0})", ("i64_lt_u",)),  # i64.gt_u
    0x57: _compare("!i64_lt_s({1}, {0})", ("i64_lt_s",)),  # i64.le_s
    0x58: _compare("!i64_lt_u({1}, {0})", ("i64_lt_u",)),  # i64.le_u
    0x59: _compare("!i64_lt_s({0}, {1})", ("i64_lt_s",)),  # i64.ge_s
    0x5A: _compare("!i64_lt_u({0}, {1})", ("i64_lt_u",)),  # i64.ge_u
    0x79: _unary("vec2<u32>(i64_clz({0}), 0u)", ("i64_clz",)),  # i64.clz
    0x7A: _unary("vec2<u32>(i64_ctz({0}), 0u)", ("i64_ctz",)),  # i64.ctz
    0x7B: _unary("vec2<u32>(countOneBits({0}.x) + countOneBits({0}.y), 0u)"),  # i64.popcnt
    0x7C: _binary_call("i64_add"),  # i64.add
    0x7D: _binary_call("i64_sub"),  # i64.sub
    0x7E: _binary_call("i64_mul"),  # i64.mul
    0x7F: _binary_call("i64_div_s", f"{ZERO_DIVISOR} || {SIGNED_OVERFLOW}"),  # i64.div_s
    0x80: _binary_call("i64_div_u", ZERO_DIVISOR),  # i64.div_u
    0x81: _binary_call("i64_rem_s", ZERO_DIVISOR),  # i64.rem_s
    0x82: _binary_call("i64_rem_u", ZERO_DIVISOR),  # i64.rem_u
    0x83: _binary("({0} & {1})"),  # i64.and
    0x84: _binary("({0} | {1})"),  # i64.or
    0x85: _binary("({0} ^ {1})"),  # i64.xor
    0x86: _binary_call("i64_shl"),  # i64.shl
    0x87: _binary_call("i64_shr_s"),  # i64.shr_s
    0x88: _binary_call("i64_shr_u"),  # i64.shr_u
    0x89: _binary_call("i64_rotl"),  # i64.rotl
    0x8A: _binary_call("i64_rotr"),  # i64.rotr
    0xA7: row((I64,), I32, "p", "u", "{0}.x"),  # i32.wrap_i64
    0xAC: call_row("i64_from_i32", (I32,), I64, "u", "p"),  # i64.extend_i32_s
    0xAD: row((I32,), I64, "u", "p", "vec2<u32>({0}, 0u)"),  # i64.extend_i32_u
    # i64.trunc_f32_s: valid for -2^63 <= x < 2^63, i.e. bits < 0x5f000000 or 0x80000000..0xdf000000
    0xAE: row((F32,), I64, "u", "p", "f32_to_i64({0})",
              "select({0} >= 0x5f000000u, {0} > 0xdf000000u, {0} >= 0x80000000u)", ("f32_to_i64",), True),
    # i64.trunc_f32_u: valid for -1 < x < 2^64, i.e. bits < 0x5f800000 or 0x80000000..0xbf7fffff
    0xAF: row((F32,), I64, "u", "p", "f32_to_u64({0})",
              "select({0} >= 0x5f800000u, {0} >= 0xbf800000u, {0} >= 0x80000000u)", ("f32_to_u64",), True),
    0xB4: call_row("i64_to_f32", (I64,), F32, "p", "u", is_float=True),  # f32.convert_i64_s
    0xB5: call_row("u64_to_f32", (I64,), F32, "p", "u", is_float=True),  # f32.convert_i64_u
    0xC2: _unary("i64_from_i32(bitcast<u32>(bitcast<i32>({0}.x << 24u) >> 24u))", ("i64_from_i32",)),  # extend8_s
    0xC3: _unary("i64_from_i32(bitcast<u32>(bitcast<i32>({0}.x << 16u) >> 16u))", ("i64_from_i32",)),  # extend16_s
    0xC4: _unary("i64_from_i32({0}.x)", ("i64_from_i32",)),  # i64.extend32_s
}

# 0xFC-prefixed instructions, by sub-opcode.
SATURATING: dict[int, NumericOp] = {
    0x04: call_row("f32_to_i64_sat", (F32,), I64, "u", "p", is_float=True),  # i64.trunc_sat_f32_s
    0x05: call_row("f32_to_u64_sat", (F32,), I64, "u", "p", is_float=True),  # i64.trunc_sat_f32_u
}

HELPERS: dict[str, str] = {
    "i64_from_i32": """fn i64_from_i32(x: u32) -> vec2<u32> {
  return vec2<u32>(x, bitcast<u32>(bitcast<i32>(x) >> 31u));
}
""",
    "i64_add": """fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + u32(lo < a.x));
}
""",
    "i64_sub": """fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - u32(a.x < b.x));
}
""",
    "i64_neg": """fn i64_neg(a: vec2<u32>) -> vec2<u32> {
  return i64_sub(vec2<u32>(0u, 0u), a);
}
""",
    "i64_abs": """fn i64_abs(a: vec2<u32>) -> vec2<u32> {
  return select(a, i64_neg(a), a.y >= 0x80000000u);
}
""",
    # (low word, high word) of the full product of two u32, from 16-bit halves.
    "u32_mul_wide": """fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
  let low = (a & 0xffffu) * (b & 0xffffu);
  let cross1 = (a & 0xffffu) * (b >> 16u);
  let cross2 = (a >> 16u) * (b & 0xffffu);
  let mid = (low >> 16u) + (cross1 & 0xffffu) + (cross2 & 0xffffu);
  return vec2<u32>((low & 0xffffu) | (mid << 16u),
                   (a >> 16u) * (b >> 16u) + (cross1 >> 16u) + (cross2 >> 16u) + (mid >> 16u));
}
""",
    "i64_mul": """fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let p = u32_mul_wide(a.x, b.x);
  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
""",
    "i64_shl": """fn i64_shl(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let k = b.x & 63u;
  if (k == 0u) { return a; }
  if (k < 32u) { return vec2<u32>(a.x << k, (a.y << k) | (a.x >> (32u - k))); }
  return vec2<u32>(0u, a.x << (k - 32u));
}
""",
    "i64_shr_u": """fn i64_shr_u(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let k = b.x & 63u;
  if (k == 0u) { return a; }
  if (k < 32u) { return vec2<u32>((a.x >> k) | (a.y << (32u - k)), a.y >> k); }
  return vec2<u32>(a.y >> (k - 32u), 0u);
}
""",
    "i64_shr_s": """fn i64_shr_s(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let k = b.x & 63u;
  let high = bitcast<i32>(a.y);
  if (k == 0u) { return a; }
  if (k < 32u) { return vec2<u32>((a.x >> k) | (a.y << (32u - k)), bitcast<u32>(high >> k)); }
  return vec2<u32>(bitcast<u32>(high >> (k - 32u)), bitcast<u32>(high >> 31u));
}
""",
    "i64_rotl": """fn i64_rotl(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let k = b.x & 63u;
  return i64_shl(a, vec2<u32>(k, 0u)) | i64_shr_u(a, vec2<u32>((64u - k) & 63u, 0u));
}
""",
    "i64_rotr": """fn i64_rotr(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let k = b.x & 63u;
  return i64_shr_u(a, vec2<u32>(k, 0u)) | i64_shl(a, vec2<u32>((64u - k) & 63u, 0u));
}
""",
    "i64_clz": """fn i64_clz(a: vec2<u32>) -> u32 {
  return select(32u + countLeadingZeros(a.x), countLeadingZeros(a.y), a.y != 0u);
}
""",
    "i64_ctz": """fn i64_ctz(a: vec2<u32>) -> u32 {
  return select(32u + countTrailingZeros(a.y), countTrailingZeros(a.x), a.x != 0u);
}
""",
    "i64_lt_u": """fn i64_lt_u(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y < b.y || (a.y == b.y && a.x < b.x);
}
""",
    # Flipping both sign bits turns the signed order into the unsigned one.
    "i64_lt_s": """fn i64_lt_s(a: vec2<u32>, b: vec2<u32>) -> bool {
  return i64_lt_u(a ^ vec2<u32>(0u, 0x80000000u), b ^ vec2<u32>(0u, 0x80000000u));
}
""",
    # (quotient, remainder) of unsigned 64-bit operands. Restoring division from the dividend's
    # leading one: `over` is the bit shifted out of the partial remainder, which then exceeds any
    # divisor. A zero divisor (never reached: rows trap first) gives all ones and the dividend.
    "u64_divmod": """fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
  if ((n.y | d.y) == 0u) {
    let e = select(d.x, 1u, d.x == 0u);
    return vec4<u32>(n.x / e, 0u, n.x % e, 0u);
  }
  let z = i64_clz(n);
  var bits = i64_shl(n, vec2<u32>(z, 0u));
  var q = vec2<u32>(0u, 0u);
  var r = vec2<u32>(0u, 0u);
  for (var i = z; i < 64u; i = i + 1u) {
    let over = r.y >> 31u;
    r = vec2<u32>((r.x << 1u) | (bits.y >> 31u), (r.y << 1u) | (r.x >> 31u));
    bits = vec2<u32>(bits.x << 1u, (bits.y << 1u) | (bits.x >> 31u));
    let take = over != 0u || !i64_lt_u(r, d);
    if (take) { r = i64_sub(r, d); }
    q = vec2<u32>((q.x << 1u) | u32(take), (q.y << 1u) | (q.x >> 31u));
  }
  return vec4<u32>(q, r);
}
""",
    "i64_div_u": """fn i64_div_u(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return u64_divmod(a, b).xy;
}
""",
    "i64_rem_u": """fn i64_rem_u(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return u64_divmod(a, b).zw;
}
""",
    "i64_div_s": """fn i64_div_s(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let q = u64_divmod(i64_abs(a), i64_abs(b)).xy;
  return select(q, i64_neg(q), ((a.y ^ b.y) & 0x80000000u) != 0u);
}
""",
    "i64_rem_s": """fn i64_rem_s(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let r = u64_divmod(i64_abs(a), i64_abs(b)).zw;
  return select(r, i64_neg(r), a.y >= 0x80000000u);
}
""",
    # f32 bits of hi * 2^(p - 31) (hi's leading one at bit 31), rounded to nearest even; `sticky`
    # says whether non-zero bits were dropped below hi.
    "f32_round_bits": """fn f32_round_bits(hi: u32, sticky: bool, p: u32) -> u32 {
  let m = hi >> 8u;
  let rest = hi & 0xffu;
  let up = rest > 0x80u || (rest == 0x80u && (sticky || (m & 1u) == 1u));
  return (((127u + p) << 23u) | (m & 0x7fffffu)) + u32(up);
}
""",
    "u32_to_f32": """fn u32_to_f32(x: u32) -> u32 {
  if (x == 0u) { return 0u; }
  let z = countLeadingZeros(x);
  return f32_round_bits(x << z, false, 31u - z);
}
""",
    "i32_to_f32": """fn i32_to_f32(x: u32) -> u32 {
  return (x & 0x80000000u) | u32_to_f32(select(x, 0u - x, x >= 0x80000000u));
}
""",
    "u64_to_f32": """fn u64_to_f32(a: vec2<u32>) -> u32 {
  if (a.y == 0u) { return u32_to_f32(a.x); }
  let z = countLeadingZeros(a.y);
  let hi = select(a.y, (a.y << z) | (a.x >> (32u - z)), z != 0u);
  let lo = select(a.x, a.x << z, z != 0u);
  return f32_round_bits(hi, lo != 0u, 63u - z);
}
""",
    "i64_to_f32": """fn i64_to_f32(a: vec2<u32>) -> u32 {
  return (a.y & 0x80000000u) | u64_to_f32(i64_abs(a));
}
""",
    # |trunc(x)| for the f32 bits b of a finite x with |x| < 2^64.
    "f32_to_u64": """fn f32_to_u64(b: u32) -> vec2<u32> {
  let e = (b >> 23u) & 0xffu;
  if (e < 127u) { return vec2<u32>(0u, 0u); }
  let m = (b & 0x7fffffu) | 0x800000u;
  if (e < 150u) { return vec2<u32>(m >> (150u - e), 0u); }
  return i64_shl(vec2<u32>(m, 0u), vec2<u32>(e - 150u, 0u));
}
""",
    "f32_to_i64": """fn f32_to_i64(b: u32) -> vec2<u32> {
  let m = f32_to_u64(b);
  return select(m, i64_neg(m), b >= 0x80000000u);
}
""",
    "f32_to_i64_sat": """fn f32_to_i64_sat(b: u32) -> vec2<u32> {
  if ((b & 0x7fffffffu) > 0x7f800000u) { return vec2<u32>(0u, 0u); }
  if (b < 0x80000000u) {
    if (b >= 0x5f000000u) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
  } else if (b >= 0xdf000000u) {
    return vec2<u32>(0u, 0x80000000u);
  }
  return f32_to_i64(b);
}
""",
    "f32_to_u64_sat": """fn f32_to_u64_sat(b: u32) -> vec2<u32> {
  if ((b & 0x7fffffffu) > 0x7f800000u || b >= 0x80000000u) { return vec2<u32>(0u, 0u); }
  if (b >= 0x5f800000u) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
  return f32_to_u64(b);
}
""",
}
