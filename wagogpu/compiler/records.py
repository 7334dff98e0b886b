"""Value records, the two WGSL forms a value travels in, and the numbered-name tables.

A record is an immutable triple (kind, Wasm type byte, value), copied between the operand stack
and the locals, never mutated (docs/design/compiler.md §1.3.5 step 4). Because records are copied, `x + (x := 2)`
sees the old x, and the invocation index keeps its identity through locals, which is what makes
neighbour, gather and scatter writes impossible by construction.
"""
from __future__ import annotations

import enum

from .intrinsics import F32, F64, I32, I64


class Kind(enum.IntEnum):
    """What a record's third field means."""

    NUMBER = 0  # value n of the value table: a let, a var, a load or a deferred arithmetic node
    CONSTANT = 1  # an i32/i64 value or an f32/f64 bit pattern, unsigned (locals start as zero constants)
    INDEX = 2  # the original invocation index (param 0 and unchanged copies of it)
    HANDLE = 3  # the buffer that getBuffer(constant slot) selected; the value is the slot
    VAR = 4  # only in the locals: the local lives in the WGSL `var l<i>` (control flow assigns it)
    FRAME = 5  # an address in the shadow stack: the value is its offset from the kernel's entry stack pointer


class Form(enum.StrEnum):
    """How a value is carried in WGSL: an i32, or an f32's bit pattern, in a u32; or an f32 value.
    A 64-bit value (i64, or an f64's bit pattern) is two u32 words, low word first, in a
    vec2<u32>: wgpu's WGSL has no 64-bit integer without a device feature, and two words give
    every adapter the same exact integer code. An f64 value (rounding arithmetic, only on an
    adapter with shader-f64) is a WGSL f64."""

    BITS = "u"
    VALUE = "f"
    PAIR = "p"
    DOUBLE = "d"


WGSL_TYPE = {Form.BITS: "u32", Form.VALUE: "f32", Form.PAIR: "vec2<u32>", Form.DOUBLE: "f64"}

# The form each Wasm value type's bits travel in (by value-type byte).
BITS_FORM: dict[int, Form] = {I32: Form.BITS, F32: Form.BITS, I64: Form.PAIR, F64: Form.PAIR}
WIDE_TYPES = frozenset((I64, F64))


def local_var(i: int, wtype: int) -> str:
    """The WGSL var of local i when it holds a value of `wtype`: inlined callees reuse local
    indices with other types, so a 64-bit local's var (a vec2<u32>) has a name of its own."""
    return f"l{i}" if wtype != I64 and wtype != F64 else f"w{i}"

Record = tuple[int, int, int]

# Plain-int copies of the kinds for the hot loops (records hold these ints; Kind members compare equal).
NUMBER, CONSTANT, INDEX, HANDLE, VAR, FRAME = (int(k) for k in Kind)


class Names:
    """A grow-only table of numbered texts ("v12", "  let v12: f32 = ", ...), shared by all lowerings.

    String formatting is a large part of lowering time, so each numbered text is made once per
    process. A table is replaced, never mutated, so a lowering holding an older one never sees it
    change; a lowering that needs more names asks again.
    """

    def __init__(self, template: str):
        self.template = template
        self.table: list[str] = []

    def upto(self, n: int) -> list[str]:
        table = self.table
        if len(table) <= n:
            size = max(n + 1, 2 * len(table), 256)
            self.table = table = [self.template % i for i in range(size)]
        return table


V_NAMES = Names("v%d")  # a value's name
VALUE_LET = Names("  let v%d: f32 = ")  # the head of a deferred f32 node's statement
VALUE_OF_BITS = Names("bitcast<f32>(v%d)")  # a bits-form value used as an f32 operand
