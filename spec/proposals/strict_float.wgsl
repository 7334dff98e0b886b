// Exact IEEE-754 binary32 arithmetic on bit patterns, with Wasm's NaN rules: a NaN operand is
// returned quieted, an invalid operation gives the canonical NaN 0x7fc00000, subnormals are kept,
// rounding is to nearest, ties to even. Integer code only, so no float mode of a GPU or its
// driver (flush-to-zero, fast-math folding, fused multiply-add) can change a result.
//
// Significands are carried with the leading bit at bit 30 and seven bits below the rounding
// position (sticky ORed into bit 0); sf_pack's `e` is the biased exponent minus one, so a value
// is sig * 2^(e - 156).

fn sf_jam(x: u32, n: u32) -> u32 {
  if (n == 0u) { return x; }
  if (n >= 31u) { return u32(x != 0u); }
  return (x >> n) | u32((x << (32u - n)) != 0u);
}

fn sf_pack(sign: u32, e_in: i32, sig_in: u32) -> u32 {
  var e = e_in;
  var s = sig_in;
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

// The significand with its hidden bit (normalised to bit 23 for subnormals) and its exponent.
fn sf_unpack(a: u32) -> vec2<i32> {
  let e = i32((a >> 23u) & 0xffu);
  let m = a & 0x7fffffu;
  if (e != 0) { return vec2<i32>(i32(m | 0x800000u), e); }
  let shift = countLeadingZeros(m) - 8u;
  return vec2<i32>(i32(m << shift), 1 - i32(shift));
}

fn sf_is_nan(a: u32) -> bool {
  return (a & 0x7fffffffu) > 0x7f800000u;
}

fn sf_mul_wide(a: u32, b: u32) -> vec2<u32> {
  let ll = (a & 0xffffu) * (b & 0xffffu);
  let lh = (a & 0xffffu) * (b >> 16u);
  let hl = (a >> 16u) * (b & 0xffffu);
  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return vec2<u32>((a >> 16u) * (b >> 16u) + (lh >> 16u) + (hl >> 16u) + (mid >> 16u),
                   (ll & 0xffffu) | (mid << 16u));
}

fn wasm_fadd(a_in: u32, b_in: u32) -> u32 {
  if (sf_is_nan(a_in)) { return a_in | 0x400000u; }
  if (sf_is_nan(b_in)) { return b_in | 0x400000u; }
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
  let ma = (a & 0x7fffffu) | select(0u, 0x800000u, ((a >> 23u) & 0xffu) != 0u);
  let mb = (b & 0x7fffffu) | select(0u, 0x800000u, ((b >> 23u) & 0xffu) != 0u);
  let sa = ma << 7u;
  let sb = sf_jam(mb << 7u, ea - eb);
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

fn wasm_fsub(a: u32, b: u32) -> u32 {
  return wasm_fadd(a, b ^ 0x80000000u);
}

fn wasm_fmul(a: u32, b: u32) -> u32 {
  if (sf_is_nan(a)) { return a | 0x400000u; }
  if (sf_is_nan(b)) { return b | 0x400000u; }
  let sign = (a ^ b) & 0x80000000u;
  let ma = a & 0x7fffffffu;
  let mb = b & 0x7fffffffu;
  if (ma == 0x7f800000u || mb == 0x7f800000u) {
    if (ma == 0u || mb == 0u) { return 0x7fc00000u; }
    return sign | 0x7f800000u;
  }
  if (ma == 0u || mb == 0u) { return sign; }
  let ua = sf_unpack(a);
  let ub = sf_unpack(b);
  let p = sf_mul_wide(u32(ua.x), u32(ub.x));  // in [2^46, 2^48)
  var s = (p.x << 16u) | (p.y >> 16u) | u32((p.y & 0xffffu) != 0u);
  var e = ua.y + ub.y - 128;
  if (s >= 0x80000000u) { s = sf_jam(s, 1u); e = e + 1; }
  return sf_pack(sign, e, s);
}

fn wasm_fdiv(a: u32, b: u32) -> u32 {
  if (sf_is_nan(a)) { return a | 0x400000u; }
  if (sf_is_nan(b)) { return b | 0x400000u; }
  let sign = (a ^ b) & 0x80000000u;
  let ma = a & 0x7fffffffu;
  let mb = b & 0x7fffffffu;
  if (ma == 0x7f800000u) {
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

fn wasm_fsqrt(a: u32) -> u32 {
  if (sf_is_nan(a)) { return a | 0x400000u; }
  if ((a & 0x7fffffffu) == 0u) { return a; }
  if (a >= 0x80000000u) { return 0x7fc00000u; }
  if (a == 0x7f800000u) { return a; }
  let ua = sf_unpack(a);
  var t = ua.y - 150;  // a = m * 2^t, m in [2^23, 2^24)
  var m = u32(ua.x);
  if ((t & 1) != 0) { m = m << 1u; t = t - 1; } else { m = m << 2u; t = t - 2; }
  // m in [2^24, 2^26), t even: sqrt(a) = sqrt(m * 2^36) * 2^(t/2 - 18); the root is in [2^30, 2^31)
  let hi = m << 4u;  // m * 2^36 = hi * 2^32
  var r = 0u;
  for (var bit = 30i; bit >= 0; bit = bit - 1) {
    let c = r | (1u << u32(bit));
    let sq = sf_mul_wide(c, c);
    if (sq.x < hi || (sq.x == hi && sq.y == 0u)) { r = c; }
  }
  let sq = sf_mul_wide(r, r);
  return sf_pack(0u, t / 2 + 138, r | u32(sq.x != hi || sq.y != 0u));
}

// Comparisons on integer keys: -0 == +0, NaN unordered (ne true), subnormals distinct from 0.
fn sf_key(b: u32) -> i32 {
  let m = bitcast<i32>(b & 0x7fffffffu);
  return select(m, -m, b >= 0x80000000u);
}

fn sf_ordered(a: u32, b: u32) -> bool {
  return !sf_is_nan(a) && !sf_is_nan(b);
}

fn wasm_feq(a: u32, b: u32) -> u32 { return u32(sf_ordered(a, b) && sf_key(a) == sf_key(b)); }
fn wasm_fne(a: u32, b: u32) -> u32 { return 1u - wasm_feq(a, b); }
fn wasm_flt(a: u32, b: u32) -> u32 { return u32(sf_ordered(a, b) && sf_key(a) < sf_key(b)); }
fn wasm_fgt(a: u32, b: u32) -> u32 { return u32(sf_ordered(a, b) && sf_key(a) > sf_key(b)); }
fn wasm_fle(a: u32, b: u32) -> u32 { return u32(sf_ordered(a, b) && sf_key(a) <= sf_key(b)); }
fn wasm_fge(a: u32, b: u32) -> u32 { return u32(sf_ordered(a, b) && sf_key(a) >= sf_key(b)); }

// Rounding to an integral value on the bits. `up` says whether a dropped fraction moves the
// magnitude up one unit: decided per mode from the sign, the fraction and (nearest) the halfway bit.
fn sf_round_int(a: u32, mode: u32) -> u32 {
  let e = (a >> 23u) & 0xffu;
  let sign = a & 0x80000000u;
  if (e >= 150u) { return select(a, a | 0x400000u, sf_is_nan(a)); }
  if ((a & 0x7fffffffu) == 0u) { return a; }
  let neg = sign != 0u;
  if (e < 127u) {  // 0 < |a| < 1
    var one = false;
    if (mode == 1u) { one = neg; }  // floor
    if (mode == 2u) { one = !neg; }  // ceil
    if (mode == 3u) { one = e == 126u && (a & 0x7fffffu) != 0u; }  // nearest: above one half
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

fn wasm_ftrunc(a: u32) -> u32 { return sf_round_int(a, 0u); }
fn wasm_ffloor(a: u32) -> u32 { return sf_round_int(a, 1u); }
fn wasm_fceil(a: u32) -> u32 { return sf_round_int(a, 2u); }
fn wasm_fnearest(a: u32) -> u32 { return sf_round_int(a, 3u); }
