"""Why a GPU float result differs from the spec's: one class per difference, decided from the
case's own values (arguments, expected and actual result) and the function's opcodes.

The rules run in order and the first that holds names the class:

1. NaN quieting: both are NaNs, but not the NaN the spec requires (a signalling NaN passed
   through unquieted, a payload kept where the canonical NaN is required); also, after rules 2-4,
   any difference of a case whose argument is a signalling NaN bit pattern (the functions that
   return the NaN's bits as an i32).
2. Flush-to-zero: an argument or the expected result is subnormal (the device treats it as 0).
3. Constant folding: the device gave a zero where the spec gives a NaN, an infinity or the other
   zero (`x/0.0 -> 0`, `0/x -> 0`, `x-x -> 0`, `x*0 -> +0`, `x+0 -> x` on -0, ...).
4. Reassociation: the device returned one of the arguments unchanged where the spec does not
   (`(x+y)-y -> x`, `1/(1/x) -> x`, `x*y/y -> x`).
5. ULPs: both finite with the same sign and at most MAX_ULPS apart: division/sqrt rounding when
   the function divides or takes a root, else add/sub/mul rounding (contraction into fma).
6. Other: anything else; no adapter's record may contain it without being looked at.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from .literals import (F32_QUIET, F32_SIGN, MASK32, Expected, Value, ValueType, is_infinite, is_nan, is_subnormal,
                       is_zero)

MAX_ULPS = 4


class FloatClass(enum.StrEnum):
    NAN_QUIETING = "nan-quieting"
    FLUSH_TO_ZERO = "flush-to-zero"
    CONSTANT_FOLDING = "constant-folding"
    REASSOCIATION = "reassociation"
    DIV_SQRT_ULPS = "div-sqrt-ulps"
    ROUNDING_ULPS = "rounding-ulps"
    OTHER = "other"


DESCRIPTIONS: dict[FloatClass, str] = {
    FloatClass.NAN_QUIETING: "a NaN result that is not the NaN Wasm requires (signalling NaN not quieted)",
    FloatClass.FLUSH_TO_ZERO: "subnormal argument or result treated as zero",
    FloatClass.CONSTANT_FOLDING: "a zero where Wasm gives NaN, infinity or the other zero "
                                 "(x/0, 0/x, x-x, x*0, x+0 folded)",
    FloatClass.REASSOCIATION: "an argument returned unchanged ((x+y)-y -> x, 1/(1/x) -> x)",
    FloatClass.DIV_SQRT_ULPS: f"division or square root off by at most {MAX_ULPS} ulps",
    FloatClass.ROUNDING_ULPS: f"add/sub/mul off by at most {MAX_ULPS} ulps (fused or reordered)",
    FloatClass.OTHER: "none of the above",
}


def _ordered(bits: int) -> int:
    """A key in which adjacent f32 values differ by 1 (so ulp distance is a subtraction)."""
    return -(bits & ~F32_SIGN & MASK32) if bits & F32_SIGN else bits


def ulp_distance(a: int, b: int) -> int:
    return abs(_ordered(a) - _ordered(b))


def is_signalling_nan(bits: int) -> bool:
    return is_nan(bits) and not bits & F32_QUIET


def _expected_nan(expected: Expected) -> bool:
    return expected.nan is not None or (expected.bits is not None and is_nan(expected.bits))


@dataclass(frozen=True, slots=True)
class _Case:
    """One differing result word with what the rules look at."""

    args: tuple[Value, ...]
    float_args: tuple[int, ...]  # bits of the f32 arguments
    want: int | None  # the exact expected bits (None for a NaN pattern)
    expected: Expected
    got: int
    is_f32: bool  # the result is an f32 (else an i32 computed from floats)
    div_sqrt: bool


def _nan_for_nan(c: _Case) -> bool:
    return c.is_f32 and _expected_nan(c.expected) and is_nan(c.got)


def _subnormal(c: _Case) -> bool:
    return any(map(is_subnormal, c.float_args)) or (c.is_f32 and c.want is not None and is_subnormal(c.want))


def _zero_instead(c: _Case) -> bool:
    w = c.want
    return c.is_f32 and is_zero(c.got) and (w is None or is_nan(w) or is_infinite(w) or (is_zero(w) and w != c.got))


def _an_argument(c: _Case) -> bool:
    return c.is_f32 and c.got in c.float_args


def _signalling_argument(c: _Case) -> bool:
    return any(a.bits is not None and is_signalling_nan(a.bits) for a in c.args)


def _close(c: _Case) -> bool:
    w, g = c.want, c.got
    if not c.is_f32 or w is None or any(is_nan(b) or is_infinite(b) for b in (w, g)):
        return False
    return (w ^ g) & F32_SIGN == 0 and ulp_distance(w, g) <= MAX_ULPS


RULES: tuple[tuple[FloatClass, Callable[[_Case], bool]], ...] = (
    (FloatClass.NAN_QUIETING, _nan_for_nan),
    (FloatClass.FLUSH_TO_ZERO, _subnormal),
    (FloatClass.CONSTANT_FOLDING, _zero_instead),
    (FloatClass.REASSOCIATION, _an_argument),
    (FloatClass.NAN_QUIETING, _signalling_argument),
    (FloatClass.DIV_SQRT_ULPS, lambda c: c.div_sqrt and _close(c)),
    (FloatClass.ROUNDING_ULPS, _close),
)


def classify(args: tuple[Value, ...], expected: Expected, got: int, div_sqrt: bool) -> FloatClass:
    """The class of one differing result word (f32 bits, or an i32 computed from floats)."""
    float_args = tuple(a.bits for a in args if a.type is ValueType.F32 and a.bits is not None)
    case = _Case(args, float_args, expected.bits, expected, got, expected.type is ValueType.F32, div_sqrt)
    return next((cls for cls, holds in RULES if holds(case)), FloatClass.OTHER)
