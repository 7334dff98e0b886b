"""Wasm text constants as bit patterns, and what an expected result accepts.

f32 literals are rounded from their exact rational value (fractions.Fraction) straight to binary32,
round-half-to-even, subnormals included: going through a Python float would round twice, and the
testsuite's float_literals.wast checks exactly such halfway cases. Only i32 and f32 get bits; other
types keep their literal text so that a case naming them is reported as outside the runner's types.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

F32_SIGN = 0x8000_0000
F32_EXP = 0x7F80_0000
F32_QUIET = 0x0040_0000
F32_MANTISSA = 0x007F_FFFF
F32_CANONICAL_NAN = 0x7FC0_0000
MASK32 = 0xFFFF_FFFF


class ValueType(enum.StrEnum):
    I32 = "i32"
    F32 = "f32"
    I64 = "i64"
    F64 = "f64"
    OTHER = "other"  # references and anything else


class NanPattern(enum.StrEnum):
    """The result patterns of assert_return besides exact values (the spec's NaN rules)."""

    CANONICAL = "nan:canonical"  # the quiet NaN with an all-zero payload, either sign
    ARITHMETIC = "nan:arithmetic"  # any NaN whose quiet bit is set, either sign


@dataclass(frozen=True, slots=True)
class Value:
    type: ValueType
    bits: int | None  # the 32-bit pattern of an i32/f32; None for other types
    text: str  # the literal as written


@dataclass(frozen=True, slots=True)
class Expected:
    type: ValueType
    bits: int | None  # exact pattern, or None when a NaN pattern (or another type) is expected
    nan: NanPattern | None
    text: str

    def accepts(self, bits: int) -> bool:
        """Whether the result `bits` satisfies this expectation (bit-exact unless a NaN pattern)."""
        if self.nan is NanPattern.CANONICAL:
            return bits & ~F32_SIGN & MASK32 == F32_CANONICAL_NAN
        if self.nan is NanPattern.ARITHMETIC:
            return bits & F32_EXP == F32_EXP and bits & F32_QUIET != 0
        return bits == self.bits


def _int_literal(text: str) -> int:
    t = text.replace("_", "")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    return sign * (int(t[2:], 16) if t.lower().startswith("0x") else int(t, 10))


def _hex_fraction(t: str) -> Fraction:
    """The exact value of a hex float body such as `1.fffffep+127` (after the 0x)."""
    mantissa, _, exponent = t.lower().partition("p")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac) or "0"
    value = Fraction(int(digits, 16), 16 ** len(frac))
    return value * Fraction(2) ** int(exponent or "0")


def _round_to_f32(value: Fraction) -> int:
    """Magnitude bits of the binary32 nearest to value >= 0 (ties to even); overflow gives inf."""
    if value == 0:
        return 0
    exp = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exp > value:
        exp -= 1
    exp = max(exp, -126)  # below the normal range the spacing stays 2^-149
    scaled = value / Fraction(2) ** (exp - 23)
    m = scaled.numerator // scaled.denominator
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m & 1):
        m += 1
    if m == 1 << 24:
        m, exp = m >> 1, exp + 1
    if exp > 127:
        return F32_EXP
    if m < 1 << 23:  # subnormal: exponent field 0
        return m
    return ((exp + 127) << 23) | (m - (1 << 23))


def f32_bits(text: str) -> int:
    """The binary32 pattern of an f32 literal: decimal, hex, inf, nan, nan:0x..., with a sign."""
    t = text.replace("_", "")
    sign = F32_SIGN if t.startswith("-") else 0
    t = t.lstrip("+-")
    if t == "inf":
        return sign | F32_EXP
    if t == "nan":
        return sign | F32_CANONICAL_NAN
    if t.startswith("nan:0x"):
        payload = int(t[6:], 16)
        if not 0 < payload <= F32_MANTISSA:
            raise ValueError(f"NaN payload out of range in {text!r}")
        return sign | F32_EXP | payload
    value = _hex_fraction(t[2:]) if t.lower().startswith("0x") else Fraction(t)
    return sign | _round_to_f32(value)


def parse_value(const: tuple[str, str]) -> Value:
    """An argument constant such as ("f32.const", "-0x1p-149")."""
    head, text = const
    kind = head.removesuffix(".const")
    if kind == ValueType.I32:
        return Value(ValueType.I32, _int_literal(text) & MASK32, text)
    if kind == ValueType.F32:
        return Value(ValueType.F32, f32_bits(text), text)
    known = kind in ValueType.__members__.values()
    return Value(ValueType(kind) if known else ValueType.OTHER, None, text)


def parse_expected(const: tuple[str, str]) -> Expected:
    """A result constant; f32 results may be the NaN patterns nan:canonical / nan:arithmetic."""
    head, text = const
    if head == "f32.const" and text in NanPattern.__members__.values():
        return Expected(ValueType.F32, None, NanPattern(text), text)
    if head.removesuffix(".const") in (ValueType.F64, ValueType.I64) or head.startswith("ref"):
        return Expected(parse_value(const).type, None, None, text)
    value = parse_value(const)
    return Expected(value.type, value.bits, None, text)


def is_nan(bits: int) -> bool:
    return bits & F32_EXP == F32_EXP and bits & F32_MANTISSA != 0


def is_subnormal(bits: int) -> bool:
    return bits & F32_EXP == 0 and bits & F32_MANTISSA != 0


def is_zero(bits: int) -> bool:
    return bits & ~F32_SIGN & MASK32 == 0


def is_infinite(bits: int) -> bool:
    return bits & ~F32_SIGN & MASK32 == F32_EXP


def f32_text(bits: int) -> str:
    """The f32 pattern in the testsuite's notation: hex float, inf, nan:0x..., with a sign."""
    sign = "-" if bits & F32_SIGN else ""
    magnitude = bits & ~F32_SIGN & MASK32
    if is_nan(bits):
        return f"{sign}nan:0x{magnitude & F32_MANTISSA:x}"
    if magnitude == F32_EXP:
        return f"{sign}inf"
    value = float(np.frombuffer(np.uint32(magnitude).tobytes(), dtype=np.float32)[0])
    mantissa, _, exponent = value.hex().partition("p")
    return f"{sign}{mantissa.rstrip('0').rstrip('.')}p{exponent}"
