"""The corpus, in kernel-ID order (ID = position + 1): every kernel's contract and its numpy answer.

The sources in src/c/kernels.c, src/zig/corpus.zig, src/as/kernels.ts and src/go/kernels.go list
the same kernels in the same order; `python3 -m tests.corpus.report` checks every module exports
exactly the kernels its language is given here, and the CPU-only runs check each answer.
"""
from __future__ import annotations

import numpy as np

from wagogpu import Access, ElementType

from .kernels import DTYPES, GO_TOO, I32_MAX, I32_MIN, INF, LIBM, NAN, U32_MAX, Arrays, Domain, Kernel, Slot

E, A = ElementType, Access
f32, f64 = np.float32, np.float64

FLOAT_EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, 1e-39, -1e-39, 3.0e38, -3.0e38, INF, -INF, NAN)
U32_EDGES = (0, 1, 2, 0x7FFFFFFF, 0x80000000, U32_MAX, 0xDEADBEEF, 0x01000000)
I32_EDGES = (0, 1, -1, I32_MIN, I32_MAX, 2, -2, 65536)
U8_EDGES = (0, 1, 127, 128, 254, 255)


def f(lo: float, hi: float, *edges: float) -> Domain:
    return Domain(lo, hi, edges)


U32 = Domain(0, U32_MAX, U32_EDGES)
I32 = Domain(I32_MIN, I32_MAX, I32_EDGES, small=(-1000, 1000))
U8 = Domain(0, 255, U8_EDGES)


def rd(slot: int, t: ElementType, domain: Domain) -> Slot:
    return Slot(slot, t, A.READ, domain)


def wr(slot: int, t: ElementType) -> Slot:
    return Slot(slot, t, A.WRITE)


def unary(t_in: ElementType, domain: Domain, t_out: ElementType) -> tuple[Slot, ...]:
    return (rd(0, t_in, domain), wr(1, t_out))


def binary(t_in: ElementType, da: Domain, db: Domain, t_out: ElementType) -> tuple[Slot, ...]:
    return (rd(0, t_in, da), rd(1, t_in, db), wr(2, t_out))


def out(slot: int, values: np.ndarray, t: ElementType) -> Arrays:
    with np.errstate(all="ignore"):
        return {slot: np.asarray(values).astype(DTYPES[t])}


def u32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.uint32)


# ---- float activations and polynomials --------------------------------------------------------
def _saxpy(v: Arrays) -> Arrays:
    return out(1, f32(2.5) * v[0] + v[1], E.F32)


def _relu(v: Arrays) -> Arrays:
    return out(1, np.where(v[0] > 0, v[0], f32(0)), E.F32)


def _leaky_relu(v: Arrays) -> Arrays:
    return out(1, np.where(v[0] > 0, v[0], f32(0.01) * v[0]), E.F32)


def _sigmoid(v: Arrays) -> Arrays:
    return out(1, 1.0 / (1.0 + np.exp(-v[0].astype(f64))), E.F32)


def _tanh(v: Arrays) -> Arrays:
    return out(1, np.tanh(v[0].astype(f64)), E.F32)


def _gelu(v: Arrays) -> Arrays:
    x = v[0].astype(f64)
    return out(1, 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x))), E.F32)


def _softplus(v: Arrays) -> Arrays:
    x = v[0].astype(f64)
    return out(1, np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0)))), E.F32)


def _poly5(v: Arrays) -> Arrays:
    x = v[0]
    p = ((((f32(-0.125) * x + f32(0.75)) * x - f32(1.25)) * x + f32(0.5)) * x + f32(2.0)) * x + f32(0.0625)
    return out(1, p, E.F32)


def _rational_tanh(v: Arrays) -> Arrays:
    x = v[0]
    return out(1, x * (f32(27) + x * x) / (f32(27) + f32(9) * x * x), E.F32)


def _clamp_unit(v: Arrays) -> Arrays:
    return out(1, np.minimum(np.maximum(v[0], f32(-1)), f32(1)), E.F32)


def _gamma_pow(v: Arrays) -> Arrays:
    return out(1, np.power(v[0].astype(f64), float(f32(0.45454545))), E.F32)


def _phase_wrap(v: Arrays) -> Arrays:
    return out(1, np.fmod(v[0], f32(6.2831855)), E.F32)


def _sine_wave(v: Arrays) -> Arrays:
    return out(1, np.sin(v[0].astype(f64)) * 0.5 + 0.5, E.F32)


def _length2d(v: Arrays) -> Arrays:
    return out(2, np.sqrt(v[0] * v[0] + v[1] * v[1]), E.F32)


def _smoothstep(v: Arrays) -> Arrays:
    t = (v[0] - f32(0.25)) * f32(2.0)
    t = np.where(t < 0, f32(0), np.where(t > 1, f32(1), t))
    return out(1, t * t * (f32(3.0) - f32(2.0) * t), E.F32)


def _fir3(v: Arrays) -> Arrays:
    x = v[0]
    x1 = np.concatenate((x[:1], x[:-1]))
    x2 = np.concatenate((x[:1], x[:1], x[:-2]))
    return out(1, f32(0.5) * x + f32(0.25) * x1 + f32(0.25) * x2, E.F32)


# ---- quantisation and conversions -------------------------------------------------------------
def _dequant_u8(v: Arrays) -> Arrays:
    return out(1, (v[0].astype(np.int32) - 128).astype(f32) * f32(0.05), E.F32)


def _quant_i8(v: Arrays) -> Arrays:
    return out(1, np.clip(np.rint(v[0] * f32(16)), -128, 127), E.I8)


def _quant_u8_sat(v: Arrays) -> Arrays:
    s = v[0] * f32(255) + f32(0.5)
    return out(1, np.where(s <= 0, 0, np.where(s >= 255, 255, np.trunc(np.clip(s, 0, 255)))), E.U8)


def _to_fixed16(v: Arrays) -> Arrays:
    x = v[0]
    inside = np.clip(x, f32(-32768), np.nextafter(f32(32768), f32(0)))  # the guest's own range test
    scaled = np.trunc(inside * f32(65536)).astype(np.int64)
    return out(1, np.where(x >= 32768, I32_MAX, np.where(x < -32768, I32_MIN, scaled)), E.I32)


def _f64_horner(v: Arrays) -> Arrays:
    t = v[0].astype(f64)
    return out(1, ((0.125 * t - 0.5) * t + 1.25) * t + 0.3333333333333333, E.F32)


def _f64_scale(v: Arrays) -> Arrays:
    return out(1, v[0] * 1.5 + 0.25, E.F64)


def _f16_scale(v: Arrays) -> Arrays:
    return out(1, v[0].astype(f32) * f32(0.5) + f32(1.0), E.F16)


# ---- hashes and bit tricks ---------------------------------------------------------------------
def _fnv1a(v: Arrays) -> Arrays:
    x, h = u32(v[0]), np.full(v[0].shape, 2166136261, dtype=np.uint32)
    for k in range(4):
        h = (h ^ ((x >> np.uint32(8 * k)) & np.uint32(0xFF))) * np.uint32(16777619)
    return out(1, h, E.U32)


def _fmix32(v: Arrays) -> Arrays:
    h = u32(v[0])
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return out(1, h, E.U32)


def _xorshift32(v: Arrays) -> Arrays:
    x = u32(v[0])
    for _ in range(3):
        x ^= x << np.uint32(13)
        x ^= x >> np.uint32(17)
        x ^= x << np.uint32(5)
    return out(1, x, E.U32)


def _fmix64(v: Arrays) -> Arrays:
    k = (v[1].astype(np.uint64) << np.uint64(32)) | v[0].astype(np.uint64)
    for mul in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        k ^= k >> np.uint64(33)
        k *= np.uint64(mul)
    k ^= k >> np.uint64(33)
    return out(2, (k ^ (k >> np.uint64(32))) & np.uint64(U32_MAX), E.U32)


def _pcg_hash(v: Arrays) -> Arrays:
    state = v[0].astype(np.uint64) * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
    xs = (((state >> np.uint64(18)) ^ state) >> np.uint64(27)) & np.uint64(U32_MAX)
    rot = (state >> np.uint64(59)).astype(np.uint32)
    xs = xs.astype(np.uint32)
    return out(1, (xs >> rot) | (xs << ((np.uint32(32) - rot) & np.uint32(31))), E.U32)


def _popcount(v: Arrays) -> Arrays:
    return out(1, np.bitwise_count(u32(v[0])), E.I32)


def _bit_width(v: Arrays) -> Arrays:
    x = u32(v[0]).astype(np.int64)
    return out(1, np.array([int(a).bit_length() for a in x]), E.I32)


def _bswap32(v: Arrays) -> Arrays:
    return out(1, u32(v[0]).byteswap(), E.U32)


GAMMA_LUT = (0, 16, 38, 59, 78, 96, 113, 129, 145, 160, 175, 189, 203, 217, 230, 243)


def _lut_gamma(v: Arrays) -> Arrays:
    return out(1, np.array(GAMMA_LUT)[v[0] >> 4], E.U8)


def _switch_op(v: Arrays) -> Arrays:
    a, b, op = u32(v[0]), u32(v[1]), v[2] & 7
    s = b & np.uint32(31)
    table = (a + b, a - b, a * b, a & b, a | b, a ^ b, a << s, u32(v[0].astype(np.int32) >> s.astype(np.int32)))
    return out(3, np.choose(op, table), E.I32)


UTF8_LEN = (1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4)


def _utf8_len(v: Arrays) -> Arrays:
    return out(1, np.array(UTF8_LEN)[v[0] >> 4], E.I32)


# ---- integer arithmetic ------------------------------------------------------------------------
def _safe_div(v: Arrays) -> tuple[np.ndarray, np.ndarray]:
    """Truncating quotient and remainder in int64, with the guest's two guards."""
    a, b = v[0].astype(np.int64), v[1].astype(np.int64)
    d = np.where(b == 0, 1, b)
    q = np.sign(a) * np.sign(d) * (np.abs(a) // np.abs(d))
    r = a - q * d
    overflow = (a == I32_MIN) & (b == -1)
    return np.where(b == 0, 0, np.where(overflow, I32_MIN, q)), np.where((b == 0) | overflow, 0, r)


def _safe_div_out(v: Arrays) -> Arrays:
    q, r = _safe_div(v)
    return {**out(2, q, E.I32), **out(3, r, E.I32)}


def _sat_add_i16(v: Arrays) -> Arrays:
    return out(2, np.clip(v[0].astype(np.int32) + v[1], -32768, 32767), E.I16)


def _mulhi_i32(v: Arrays) -> Arrays:
    return out(2, (v[0].astype(np.int64) * v[1].astype(np.int64)) >> 32, E.I32)


def _absdiff_u8(v: Arrays) -> Arrays:
    return out(2, np.abs(v[0].astype(np.int32) - v[1]), E.U8)


def _gcd(v: Arrays) -> Arrays:
    return out(2, np.gcd(v[0].astype(np.uint64), v[1].astype(np.uint64)), E.U32)


def _collatz_one(n: int) -> int:
    steps = 0
    while n != 1 and steps < 100:
        n = (3 * n + 1) & U32_MAX if n & 1 else n >> 1
        steps += 1
    return steps


def _collatz(v: Arrays) -> Arrays:
    return out(1, np.array([_collatz_one(int(n)) for n in v[0]]), E.I32)


def _i64_mix(v: Arrays) -> Arrays:
    with np.errstate(all="ignore"):
        return out(2, v[0] * np.int64(3) + (v[1] >> np.int64(7)), E.I64)


def _rgb565(v: Arrays) -> Arrays:
    r, g, b = (v[s].astype(np.uint32) for s in (0, 1, 2))
    return out(3, ((r >> 3) << 11) | ((g >> 2) << 5) | (b >> 3), E.U16)


def _stencil_2d(v: Arrays) -> Arrays:
    x = v[0].astype(np.int32)
    i = np.arange(x.size)
    left = np.where(i % 16 != 0, np.roll(x, 1), x)
    up = np.where(i >= 16, np.roll(x, 16), x)
    return out(1, np.abs(x - left) + np.abs(x - up), E.I32)


I64 = Domain(-(2**63), 2**63 - 1, (0, 1, -1, -(2**63), 2**63 - 1, 128, -128), small=(-10**6, 10**6))
F32_UNIT = f(-3.0, 3.0, 0.0, -0.0, 1.0, -1.0, INF, -INF)

KERNELS: tuple[Kernel, ...] = (
    Kernel("saxpy", (rd(0, E.F32, f(-100, 100, *FLOAT_EDGES)), Slot(1, E.F32, A.READ_WRITE, f(-100, 100))),
           _saxpy, "y = 2.5*x + y, in place", GO_TOO, scale=256.0),
    Kernel("relu", unary(E.F32, f(-10, 10, *FLOAT_EDGES), E.F32), _relu, "x > 0 ? x : 0", GO_TOO),
    Kernel("leaky_relu", unary(E.F32, f(-10, 10, *FLOAT_EDGES), E.F32), _leaky_relu, "x > 0 ? x : 0.01x"),
    Kernel("sigmoid", unary(E.F32, f(-20, 20, 0.0, -0.0, 100.0, -100.0, 88.5, -88.5, INF, -INF, NAN), E.F32),
           _sigmoid, "1/(1+expf(-x))", GO_TOO, LIBM),
    Kernel("tanh_act", unary(E.F32, f(-10, 10, 0.0, -0.0, 20.0, -20.0, 1e-39, INF, -INF, NAN), E.F32),
           _tanh, "tanhf(x)", reference_bound=LIBM),
    Kernel("gelu", unary(E.F32, f(-6, 6, 0.0, -0.0, 10.0, -10.0), E.F32), _gelu,
           "tanh-approximated GELU (tanhf)", reference_bound=LIBM, scale=8.0),
    Kernel("softplus", unary(E.F32, f(-20, 30, 0.0, -0.0, 20.0, -20.0, 100.0, -100.0), E.F32), _softplus,
           "x > 20 ? x : log1pf(expf(x))", reference_bound=LIBM),
    Kernel("poly5", unary(E.F32, f(-4, 4, 0.0, -0.0, 1.0, -1.0, 4.0, -4.0), E.F32), _poly5,
           "degree-5 polynomial, Horner", scale=512.0),
    Kernel("rational_tanh", unary(E.F32, f(-3, 3, 0.0, -0.0, 3.0, -3.0, 1e-39), E.F32), _rational_tanh,
           "x(27+x^2)/(27+9x^2)", scale=4.0),
    Kernel("clamp_unit", unary(E.F32, F32_UNIT, E.F32), _clamp_unit, "fminf(fmaxf(x, -1), 1)"),
    Kernel("gamma_pow", unary(E.F32, f(0, 1, 0.0, 1.0, 1e-39, 0.5), E.F32), _gamma_pow, "powf(x, 1/2.2)",
           reference_bound=LIBM),
    Kernel("phase_wrap", unary(E.F32, f(-100, 100, 0.0, -0.0, 6.2831855, -6.2831855, 1e-39), E.F32), _phase_wrap,
           "fmodf(x, 2pi)", reference_bound=LIBM, scale=8.0),
    Kernel("sine_wave", unary(E.F32, f(-10, 10, 0.0, -0.0, 3.1415927, -3.1415927), E.F32), _sine_wave,
           "sinf(x)/2 + 1/2", reference_bound=LIBM),
    Kernel("length2d", binary(E.F32, f(-100, 100, 0.0, -0.0, 3.0, 1e19, INF), f(-100, 100, 0.0, 0.0, 4.0, 1e19, 1.0),
                              E.F32), _length2d, "sqrtf(x*x + y*y)", scale=256.0),
    Kernel("smoothstep", unary(E.F32, f(-0.5, 1.5, 0.25, 0.75, 0.0, 1.0), E.F32), _smoothstep,
           "smoothstep(0.25, 0.75, x)"),
    Kernel("fir3", unary(E.F32, f(-10, 10), E.F32), _fir3, "causal 3-tap filter on x[i], x[i-1], x[i-2]",
           scale=16.0),
    Kernel("dequant_u8", unary(E.U8, U8, E.F32), _dequant_u8, "(q - 128) * 0.05"),
    Kernel("quant_i8", unary(E.F32, f(-10, 10, 0.0, -0.0, 7.9, -8.1, 100.0, -100.0, INF, -INF), E.I8), _quant_i8,
           "clamp(roundf(16x), -128, 127)"),
    Kernel("quant_u8_sat", unary(E.F32, f(-0.5, 1.5, 0.0, 1.0, 0.5, INF, -INF), E.U8), _quant_u8_sat,
           "saturating 255x + 0.5 to u8"),
    Kernel("fnv1a", unary(E.U32, U32, E.U32), _fnv1a, "FNV-1a over the 4 bytes", GO_TOO),
    Kernel("fmix32", unary(E.U32, U32, E.U32), _fmix32, "murmur3 32-bit finalizer"),
    Kernel("xorshift32", unary(E.U32, U32, E.U32), _xorshift32, "three xorshift32 rounds", GO_TOO),
    Kernel("fmix64", (rd(0, E.U32, U32), rd(1, E.U32, U32), wr(2, E.U32)), _fmix64,
           "murmur3 64-bit finalizer of hi:lo, folded to 32 bits"),
    Kernel("pcg_hash", unary(E.U32, U32, E.U32), _pcg_hash, "PCG32 output of one 64-bit LCG step"),
    Kernel("popcount", unary(E.U32, U32, E.I32), _popcount, "population count", GO_TOO),
    Kernel("bit_width", unary(E.U32, U32, E.I32), _bit_width, "32 - clz(x), 0 for 0"),
    Kernel("bswap32", unary(E.U32, U32, E.U32), _bswap32, "byte swap"),
    Kernel("lut_gamma", unary(E.U8, U8, E.U8), _lut_gamma, "static const 16-entry table", GO_TOO),
    Kernel("switch_op", (rd(0, E.I32, I32), rd(1, E.I32, I32), rd(2, E.U8, U8), wr(3, E.I32)), _switch_op,
           "switch over 8 integer operations"),
    Kernel("utf8_len", unary(E.U8, U8, E.I32), _utf8_len, "switch on the lead byte's high nibble"),
    Kernel("safe_div", (rd(0, E.I32, Domain(I32_MIN, I32_MAX, (I32_MIN, I32_MIN, 7, -7, 7, -7, 0, I32_MAX),
                                             small=(-1000, 1000))),
                        rd(1, E.I32, Domain(-50, 50, (-1, 0, 2, 2, -2, -2, 0, -1))), wr(2, E.I32), wr(3, E.I32)),
           _safe_div_out, "checked i32 quotient and remainder", GO_TOO),
    Kernel("sat_add_i16", binary(E.I16, Domain(-32768, 32767, (32767, -32768, 0, 20000)),
                                 Domain(-32768, 32767, (1, -1, 0, 20000)), E.I16), _sat_add_i16,
           "saturating i16 add"),
    Kernel("to_fixed16", unary(E.F32, f(-40000, 40000, 0.0, -0.0, 32767.99, 32768.0, -32768.0, -32768.5, INF, -INF,
                                       1e-39, 0.5), E.I32), _to_fixed16, "saturating f32 to Q16.16",
           scale=65536.0),
    Kernel("mulhi_i32", binary(E.I32, I32, I32, E.I32), _mulhi_i32, "high word of the i64 product"),
    Kernel("absdiff_u8", binary(E.U8, U8, U8, E.U8), _absdiff_u8, "|a - b| on bytes"),
    Kernel("gcd", binary(E.U32, Domain(0, 5000, (0, 0, 5, U32_MAX, 12, 1 << 31)),
                         Domain(0, 5000, (0, 5, 0, 3, 18, 1 << 30)), E.U32), _gcd, "Euclid's loop"),
    Kernel("collatz", unary(E.U32, Domain(1, 10000, (0, 1, 2, 27, U32_MAX, 0x80000001)), E.I32), _collatz,
           "Collatz steps to 1, at most 100"),
    Kernel("f64_horner", unary(E.F32, f(-8, 8, 0.0, -0.0, 8.0, -8.0), E.F32), _f64_horner,
           "cubic in double precision", scale=128.0),
    Kernel("i64_mix", binary(E.I64, I64, I64, E.I64), _i64_mix, "3a + (b >> 7) on I64 buffers"),
    Kernel("f64_scale", unary(E.F64, f(-1e6, 1e6, 0.0, -0.0, 1e300, INF, NAN), E.F64), _f64_scale,
           "1.5x + 0.25 on F64 buffers"),
    Kernel("rgb565", (rd(0, E.U8, U8), rd(1, E.U8, U8), rd(2, E.U8, U8), wr(3, E.U16)), _rgb565,
           "pack 8-bit r, g, b into 5:6:5"),
    Kernel("f16_scale", unary(E.F16, f(-100, 100, 0.0, -0.0, 65504.0, -65504.0, 6e-8, INF, NAN), E.F16),
           _f16_scale, "x/2 + 1 on F16 buffers"),
    Kernel("stencil_2d", unary(E.U8, U8, E.I32), _stencil_2d,
           "|x - left| + |x - up| on a 16-wide grid"),
)

BY_NAME = {k.name: k for k in KERNELS}
assert len(BY_NAME) == len(KERNELS)
