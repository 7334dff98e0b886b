"""The numeric instructions as the Go tracer (gotrace.py) sees them: operand and result types, and
the integer ones it evaluates when every operand is a constant.

Folding matters for what Go emits: loop counters, the resume state and the comparisons that pick
a path are constants in a kernel whose trip counts are fixed, and a folded comparison decides the
path at compile time. Only operations that cannot trap fold (no division); floats never fold (the
lowering owns their rounding rules). Values are unsigned bit patterns.
"""
from __future__ import annotations

from typing import Callable

from .intrinsics import F32, F64, I32, I64

Sig = tuple[tuple[int, ...], int]
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
WIDTH = {I32: 32, I64: 64}

# (first opcode, last opcode, operand types, result type)
_RANGES: tuple[tuple[int, int, tuple[int, ...], int], ...] = (
    (0x45, 0x45, (I32,), I32), (0x46, 0x4F, (I32, I32), I32), (0x50, 0x50, (I64,), I32),
    (0x51, 0x5A, (I64, I64), I32), (0x5B, 0x60, (F32, F32), I32), (0x61, 0x66, (F64, F64), I32),
    (0x67, 0x69, (I32,), I32), (0x6A, 0x78, (I32, I32), I32), (0x79, 0x7B, (I64,), I64),
    (0x7C, 0x8A, (I64, I64), I64), (0x8B, 0x91, (F32,), F32), (0x92, 0x98, (F32, F32), F32),
    (0x99, 0x9F, (F64,), F64), (0xA0, 0xA6, (F64, F64), F64), (0xA7, 0xA7, (I64,), I32),
    (0xA8, 0xA9, (F32,), I32), (0xAA, 0xAB, (F64,), I32), (0xAC, 0xAD, (I32,), I64),
    (0xAE, 0xAF, (F32,), I64), (0xB0, 0xB1, (F64,), I64), (0xB2, 0xB3, (I32,), F32),
    (0xB4, 0xB5, (I64,), F32), (0xB6, 0xB6, (F64,), F32), (0xB7, 0xB8, (I32,), F64),
    (0xB9, 0xBA, (I64,), F64), (0xBB, 0xBB, (F32,), F64), (0xBC, 0xBC, (F32,), I32),
    (0xBD, 0xBD, (F64,), I64), (0xBE, 0xBE, (I32,), F32), (0xBF, 0xBF, (I64,), F64),
    (0xC0, 0xC1, (I32,), I32), (0xC2, 0xC4, (I64,), I64),
)
SIGNATURES: dict[int, Sig] = {op: (params, result) for lo, hi, params, result in _RANGES
                              for op in range(lo, hi + 1)}
# 0xFC-prefixed saturating truncations: sub-opcode -> signature
SAT_SIGNATURES: dict[int, Sig] = {0: ((F32,), I32), 1: ((F32,), I32), 2: ((F64,), I32), 3: ((F64,), I32),
                                  4: ((F32,), I64), 5: ((F32,), I64), 6: ((F64,), I64), 7: ((F64,), I64)}


def signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def _compare(bits: int) -> dict[int, Callable[[int, int], bool]]:
    s = lambda v: signed(v, bits)  # noqa: E731
    return {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: s(a) < s(b), 3: lambda a, b: a < b,
            4: lambda a, b: s(a) > s(b), 5: lambda a, b: a > b, 6: lambda a, b: s(a) <= s(b),
            7: lambda a, b: a <= b, 8: lambda a, b: s(a) >= s(b), 9: lambda a, b: a >= b}


def _binary(bits: int) -> dict[int, Callable[[int, int], int]]:
    mask = (1 << bits) - 1
    return {0: lambda a, b: a + b, 1: lambda a, b: a - b, 2: lambda a, b: a * b, 7: lambda a, b: a & b,
            8: lambda a, b: a | b, 9: lambda a, b: a ^ b, 10: lambda a, b: a << (b % bits),
            11: lambda a, b: signed(a, bits) >> (b % bits), 12: lambda a, b: a >> (b % bits),
            13: lambda a, b: (a << (b % bits) | a >> (bits - b % bits)) & mask,
            14: lambda a, b: (a >> (b % bits) | a << (bits - b % bits)) & mask}


_CMP32, _CMP64, _BIN32, _BIN64 = _compare(32), _compare(64), _binary(32), _binary(64)
_UNARY: dict[int, Callable[[int], int]] = {
    0x45: lambda a: int(a == 0), 0x50: lambda a: int(a == 0), 0x69: lambda a: bin(a).count("1"),
    0x7B: lambda a: bin(a).count("1"), 0x67: lambda a: 32 - a.bit_length(), 0x79: lambda a: 64 - a.bit_length(),
    0xA7: lambda a: a & M32, 0xAC: lambda a: signed(a, 32) & M64, 0xAD: lambda a: a,
    0xC0: lambda a: signed(a & 0xFF, 8) & M32, 0xC1: lambda a: signed(a & 0xFFFF, 16) & M32,
    0xC2: lambda a: signed(a & 0xFF, 8) & M64, 0xC3: lambda a: signed(a & 0xFFFF, 16) & M64,
    0xC4: lambda a: signed(a & M32, 32) & M64}


def fold(opcode: int, values: list[int]) -> int | None:
    """The result bits of integer instruction `opcode` on constant operands, None where it does
    not fold (floats, division, a trap)."""
    if len(values) == 1:
        unary = _UNARY.get(opcode)
        return None if unary is None else unary(values[0])
    a, b = values
    if 0x46 <= opcode <= 0x4F:
        return int(_CMP32[opcode - 0x46](a, b))
    if 0x51 <= opcode <= 0x5A:
        return int(_CMP64[opcode - 0x51](a, b))
    if 0x6A <= opcode <= 0x78:
        op = _BIN32.get(opcode - 0x6A)
        return None if op is None else op(a, b) & M32
    if 0x7C <= opcode <= 0x8A:
        op = _BIN64.get(opcode - 0x7C)
        return None if op is None else op(a, b) & M64
    return None
