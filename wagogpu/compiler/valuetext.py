"""How a value is written in WGSL in a given form: constants, conversions between forms, and the
opaque float operands that keep drivers from folding float arithmetic.

Opaque operands (issue 16 item 3a). naga turns `bitcast<f32>(0x...u)` into a SPIR-V constant and
carries no NoContraction decoration, so a driver's inexact algebraic rules may fold `x + 0`,
`x * 0`, `0 / x`, `x / 0`, `x - x`, `(x + y) - y` or `1 / (1 / x)`, and may reassociate or fuse
products and sums; on lavapipe that changed 55 spec testsuite cases (docs/float-semantics.md).
Outside the reference subset, every f32 constant used as a float, and every f32 result of
rounding arithmetic, passes through an integer OR with a parameter-block word that is zero at
run time but that no compiler can know (OPAQUE_ZERO); the second operand of every binary rounding
op (but a constant, already opaque) passes through an XOR with it, so the two operands are
different values to the driver even when it can prove them equal: the same record, or two
computations of one value that it merges (`sqrt(|x|) - sqrt(|x|)` over two reads of one element
folded to +0 on lavapipe, where Wasm gives NaN for an infinite x). Integer ORs and XORs with zero
are exact, so the answer is unchanged; only the driver's freedom to rewrite it is gone.
"""
from __future__ import annotations

from .records import CONSTANT, INDEX, WIDE_TYPES, Form, Record

# A parameter-block word the host always writes as 0 (abi.kernel.parameter_block).
OPAQUE_ZERO = "params.pad2"

# naga types bitcast<f64>(vec2<u32>) as a vec2<f32>, so an f64's bits go through a u64 (shader-int64):
# float64.py's helpers f64_from_bits and f64_to_bits, which every row with an f64 value lists.
_CONVERSIONS: dict[tuple[Form, Form], str] = {
    (Form.BITS, Form.VALUE): "bitcast<f32>({})",
    (Form.VALUE, Form.BITS): "bitcast<u32>({})",
    (Form.PAIR, Form.DOUBLE): "f64_from_bits({})",
    (Form.DOUBLE, Form.PAIR): "f64_to_bits({})",
}


def converted(text: str, have: Form, want: Form) -> str:
    """`text`, a value in form `have`, rewritten in form `want` (the same Wasm type's other form)."""
    return text if have == want else _CONVERSIONS[have, want].format(text)


def wide_literal(value: int) -> str:
    """A 64-bit pattern as its vec2<u32> (low word, high word)."""
    return f"vec2<u32>(0x{value & 0xFFFFFFFF:08x}u, 0x{value >> 32:08x}u)"


def constant_text(rec: Record, form: Form, opaque: bool) -> str:
    """The WGSL of a constant (or the invocation index) record in `form`."""
    kind, wtype, value = rec
    if kind == INDEX:
        return converted("index", Form.BITS, form)
    assert kind == CONSTANT
    if wtype in WIDE_TYPES:
        bits = wide_literal(value)
        if form == Form.PAIR:
            return bits
        return f"f64_from_bits({bits} | vec2<u32>({OPAQUE_ZERO}))" if opaque else f"f64_from_bits({bits})"
    bits = f"0x{value:08x}u"
    if form == Form.BITS:
        return bits
    return f"bitcast<f32>({bits} | {OPAQUE_ZERO})" if opaque else f"bitcast<f32>({bits})"


def opaque_bits(text: str, wide: bool) -> str:
    """A constant's bit pattern (a u32, or a vec2<u32> when ``wide``) through the run-time zero."""
    return f"({text} | vec2<u32>({OPAQUE_ZERO}))" if wide else f"({text} | {OPAQUE_ZERO})"


def _through_zero(text: str, form: Form, operator: str) -> str:
    """A float value's bits combined with the run-time zero by `operator` (| or ^), as a float again."""
    if form == Form.VALUE:
        return f"bitcast<f32>(bitcast<u32>({text}) {operator} {OPAQUE_ZERO})"
    if form == Form.DOUBLE:
        return f"f64_from_bits(f64_to_bits({text}) {operator} vec2<u32>({OPAQUE_ZERO}))"
    return text


def opaque_result(expr: str, form: Form) -> str:
    """A float result the driver cannot reassociate across (integer OR with the run-time zero)."""
    return _through_zero(expr, form, "|")


def needs_second_copy(left: Record, right: Record) -> bool:
    """Whether a binary rounding op's second operand goes through second_copy: always, except a
    constant other than the first operand. A constant is opaque already (its OR), and an XOR with
    the same zero would undo that: `(c | z) ^ z` folds back to c, and `x * 0` with it."""
    return right[0] != CONSTANT or left == right


def second_copy(text: str, form: Form) -> str:
    """The second operand of a binary rounding op as a value the driver cannot prove equal to the first."""
    return _through_zero(text, form, "^")
