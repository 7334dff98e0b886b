"""How a value is written in WGSL in a given form: constants, conversions between forms, and the
opaque float operands that keep drivers from folding float arithmetic.

Opaque operands (issue 16 item 3a). naga turns `bitcast<f32>(0x...u)` into a SPIR-V constant and
carries no NoContraction decoration, so a driver's inexact algebraic rules may fold `x + 0`,
`x * 0`, `0 / x`, `x / 0`, `x - x`, `(x + y) - y` or `1 / (1 / x)`, and may reassociate or fuse
products and sums; on lavapipe that changed 55 spec testsuite cases (docs/float-semantics.md).
Outside the reference subset, every float constant (as a value or as its bits: a select of two
constants under a condition the driver can decide, or a let of one, is as foldable as the
constant) and every float result of rounding arithmetic passes through an integer OR with a
parameter-block word that is zero at run time but that no compiler can know (OPAQUE_ZERO). The
second operand of every binary rounding op passes through an XOR with another such word
(SECOND_ZERO), so the two operands are different values to the driver even when it can prove them
equal: the same record, two computations of one value that it merges (`sqrt(|x|) - sqrt(|x|)`
over two reads of one element folded to +0 on lavapipe, where Wasm gives NaN for an infinite x),
or two copies of one constant (`0 / 0` came out 1 on the H200). Integer ORs and XORs with zero
are exact, so the answer is unchanged; only the driver's freedom to rewrite it is gone.
"""
from __future__ import annotations

from .intrinsics import F32, F64
from .records import CONSTANT, INDEX, WIDE_TYPES, Form, Record

_FLOAT_TYPES = frozenset((F32, F64))

# A parameter-block word the host always writes as 0 (abi.kernel.parameter_block).
OPAQUE_ZERO = "params.pad2"
# Another such word, for the second copies: an XOR with OPAQUE_ZERO itself would undo the OR of a
# value the driver knows to be 0, `(0 | z) ^ z` being 0 (-0 * 0 came out +0 on lavapipe).
SECOND_ZERO = "params.pad1"

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
    hidden = opaque and wtype in _FLOAT_TYPES  # (a float's bits too: a select or a let of them is foldable)
    if wtype in WIDE_TYPES:
        bits = wide_literal(value)
        if hidden:
            bits = f"({bits} | vec2<u32>({OPAQUE_ZERO}))"
        return bits if form == Form.PAIR else f"f64_from_bits({bits})"
    bits = f"0x{value:08x}u"
    if hidden:
        bits = f"({bits} | {OPAQUE_ZERO})"
    return bits if form == Form.BITS else f"bitcast<f32>({bits})"


def _through_zero(text: str, form: Form, operator: str, zero: str) -> str:
    """A float value's bits combined with a run-time zero by `operator` (| or ^), as a float again."""
    if form == Form.VALUE:
        return f"bitcast<f32>(bitcast<u32>({text}) {operator} {zero})"
    if form == Form.DOUBLE:
        return f"f64_from_bits(f64_to_bits({text}) {operator} vec2<u32>({zero}))"
    return text


def opaque_result(expr: str, form: Form) -> str:
    """A float result the driver cannot reassociate across (integer OR with the run-time zero)."""
    return _through_zero(expr, form, "|", OPAQUE_ZERO)


def second_copy(text: str, form: Form) -> str:
    """The second operand of a binary rounding op as a value the driver cannot prove equal to the first."""
    return _through_zero(text, form, "^", SECOND_ZERO)
