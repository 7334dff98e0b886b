"""Which documented relaxed_float class explains a GPU float that differs from Wasm's (docs/gpu.md,
docs/float-semantics.md), for whole random expressions rather than single instructions.

A kernel with relaxed_float may see, per docs/gpu.md: fused or reordered rounding, flushed
subnormals, division and square root off by an ulp, the driver's constant folding and algebraic
rewrites (which assume finite values: `x - x -> 0`, `x * 0 -> +0`, `(x + y) - y -> x`), and NaNs
with another sign or payload. In an expression these compound, so the classes here are decided on
the result word alone, first match wins:

  nan-quieting       both are NaNs (sign or payload differ)
  constant-folding   Wasm's result is not finite (an infinity or NaN on the way folded away), or
                     both are zeros of different sign
  sign-of-nan        equal magnitude, other sign: a NaN's sign carried by copysign
  flush-to-zero      one side is subnormal or zero and the other is within 2^-126 of it
  rounding-ulps      same sign, at most MAX_ULPS apart
  reassociation      within REASSOCIATION_TOLERANCE * max(1, |wasm|) (rewrites and fused rounding
                     compounding through several operations)
  other              none of them: a failure

Integers, copies and F16 transport must be bit-exact and never come here.
"""
from __future__ import annotations

import enum
import math

import numpy as np

MAX_ULPS = 4
REASSOCIATION_TOLERANCE = 1e-4
SMALLEST_NORMAL = 2.0 ** -126
F16_ULPS = 1  # a half rounded from two f32 values a few ulps apart may differ by one half ulp


class FloatClass(enum.StrEnum):
    EXACT = "exact"
    NAN_QUIETING = "nan-quieting"
    CONSTANT_FOLDING = "constant-folding"
    SIGN_OF_NAN = "sign-of-nan"
    FLUSH_TO_ZERO = "flush-to-zero"
    ROUNDING_ULPS = "rounding-ulps"
    REASSOCIATION = "reassociation"
    OTHER = "other"


def _f32(bits: int) -> float:
    return float(np.array([bits], dtype="<u4").view("<f4")[0])


def _ordered(bits: int) -> int:
    return -(bits & 0x7FFFFFFF) if bits & 0x80000000 else bits


def ulps(a: int, b: int) -> int:
    return abs(_ordered(a) - _ordered(b))


def classify_f32(gpu: int, wasm: int) -> FloatClass:
    """The class of one differing f32 word (bits); EXACT when the bits agree."""
    if gpu == wasm:
        return FloatClass.EXACT
    g, w = _f32(gpu), _f32(wasm)
    if math.isnan(g) and math.isnan(w):
        return FloatClass.NAN_QUIETING
    if not math.isfinite(w) or (g == 0.0 and w == 0.0):
        return FloatClass.CONSTANT_FOLDING
    if not math.isfinite(g):
        return FloatClass.OTHER  # a non-finite value where Wasm's is finite: nothing documented allows it
    if abs(g) == abs(w):
        return FloatClass.SIGN_OF_NAN
    if min(abs(g), abs(w)) < SMALLEST_NORMAL and abs(g - w) < SMALLEST_NORMAL:
        return FloatClass.FLUSH_TO_ZERO
    if (gpu ^ wasm) & 0x80000000 == 0 and ulps(gpu, wasm) <= MAX_ULPS:
        return FloatClass.ROUNDING_ULPS
    if abs(g - w) <= REASSOCIATION_TOLERANCE * max(1.0, abs(w)):
        return FloatClass.REASSOCIATION
    return FloatClass.OTHER


def classify_f16(gpu: int, wasm: int) -> FloatClass:
    """A differing F16 result: its f32 value classified, or one half ulp of rounding."""
    if gpu == wasm:
        return FloatClass.EXACT
    if (gpu ^ wasm) & 0x8000 == 0 and abs(_ordered(gpu << 16) - _ordered(wasm << 16)) >> 16 <= F16_ULPS:
        return FloatClass.ROUNDING_ULPS
    widen = np.array([gpu, wasm], dtype="<u2").view("<f2").astype("<f4").view("<u4")
    cls = classify_f32(int(widen[0]), int(widen[1]))
    # a half is coarse: a reassociation-sized f32 difference can round to a half ~1e-3 away
    if cls is FloatClass.OTHER:
        g, w = (float(v) for v in widen.view("<f4"))
        if math.isfinite(g) and abs(g - w) <= 1e-3 * max(1.0, abs(w)):
            return FloatClass.REASSOCIATION
    return cls
