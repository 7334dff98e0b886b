"""Go's stack as the tracer (gotrace.py) keeps it: cells at compile-time offsets, never memory.

Go passes arguments and results on its stack, in linear memory below the stack pointer (global
0). In a traced kernel the stack pointer is a compile-time address (a STACK value), so every
access through it names one cell: a store records the value stored, a load of the same cell gets
it back, reinterpreted or narrowed as the load says. The invocation so has a private frame of its
own, and no byte of guest memory is read or written for it. A load of a cell nothing stored, or
of part of one, is refused: the trace cannot know what memory holds there.

Loads through any other address read guest memory (the lowering binds the memory snapshot and
checks it against the guest, memload.py); a store there is refused, since the CPU runner's writes
to Go's heap and package variables could not be published.
"""
from __future__ import annotations

from .gobody import CONST, G, GUARD, LOCAL, STACK, Body, Val
from .intrinsics import F32, F64, I32, I64

# load opcode -> (bytes, result type, sign-extends); store opcode -> (bytes, operand type)
LOADS = {0x28: (4, I32, False), 0x29: (8, I64, False), 0x2A: (4, F32, False), 0x2B: (8, F64, False),
         0x2C: (1, I32, True), 0x2D: (1, I32, False), 0x2E: (2, I32, True), 0x2F: (2, I32, False),
         0x30: (1, I64, True), 0x31: (1, I64, False), 0x32: (2, I64, True), 0x33: (2, I64, False),
         0x34: (4, I64, True), 0x35: (4, I64, False)}
STORES = {0x36: (4, I32), 0x37: (8, I64), 0x38: (4, F32), 0x39: (8, F64), 0x3A: (1, I32), 0x3B: (2, I32),
          0x3C: (1, I64), 0x3D: (2, I64), 0x3E: (4, I64)}
REINTERPRET = {(F32, I32): 0xBC, (I32, F32): 0xBE, (F64, I64): 0xBD, (I64, F64): 0xBF}
STACKGUARD_OFFSET = 16  # runtime.g: stack.lo, stack.hi, then stackguard0 (wasm: 8-byte words)
M32 = (1 << 32) - 1


class Blocked(Exception):
    """What ends one traced path: the reason, in Go's terms. The path raises the error word there
    (the CPU runner then runs the guest as Wasm does)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


Cells = dict[int, tuple[int, Val]]  # offset -> (width, value: I32/F32 for 1-4 bytes, I64/F64 for 8)


def unary(body: Body, value: Val, opcode: int, result: int) -> Val:
    return body.compute([value], bytes((opcode,)), result)  # type: ignore[return-value]


def wrap(body: Body, value: Val) -> Val:
    """The low word of an i64 value."""
    kind, _, payload = value
    if kind == CONST:
        return (CONST, I32, payload & M32)
    if kind == STACK:
        return (STACK, I32, payload)
    if kind == G:
        return (G, I32, 0)
    return unary(body, value, 0xA7, I32)


def retype(body: Body, value: Val, wtype: int) -> Val:
    """The same bits as `wtype` (i32 <-> f32, i64 <-> f64)."""
    if value[1] == wtype:
        return value
    if value[0] == LOCAL or value[0] == CONST:
        if value[0] == CONST:
            return (CONST, wtype, value[2])
        return unary(body, value, REINTERPRET[value[1], wtype], wtype)
    raise Blocked("a Go pointer reinterpreted as a float")


def store(cells: Cells, body: Body, offset: int, width: int, value: Val) -> None:
    if value[1] == I64 and width < 8:
        value = wrap(body, value)
    for other in [o for o, (w, _) in cells.items() if o < offset + width and offset < o + w]:
        del cells[other]
    cells[offset] = (width, value)


def load(cells: Cells, body: Body, offset: int, width: int, wtype: int, sign: bool) -> Val:
    cell = cells.get(offset)
    if cell is None:
        raise Blocked("a read of Go stack memory the kernel did not write (a caller's frame or an escaped variable)")
    stored, value = cell
    if width == 8:
        if stored != 8:
            raise Blocked("a Go stack word read wider than it was written")
        return retype(body, value, wtype)
    if stored == 8:
        value = wrap(body, retype(body, value, I64))
    elif stored < width:
        raise Blocked("a Go stack word read wider than it was written")
    if width == 4 and wtype != I64:
        return retype(body, value, wtype)
    value = retype(body, value, I32)
    if width < 4:
        value = narrow(body, value, width, sign)
    if wtype == I64:
        return extend(body, value, sign)
    return value


def narrow(body: Body, value: Val, width: int, sign: bool) -> Val:
    if value[0] == CONST:
        bits = value[2] & ((1 << 8 * width) - 1)
        if sign and bits >> (8 * width - 1):
            bits = (bits - (1 << 8 * width)) & M32
        return (CONST, I32, bits)
    if value[0] != LOCAL:
        raise Blocked("part of a Go pointer read as a number")
    if sign:
        return unary(body, value, 0xC0 if width == 1 else 0xC1, I32)
    return body.compute([value, (CONST, I32, 0xFF if width == 1 else 0xFFFF)], bytes((0x71,)), I32)  # type: ignore


def extend(body: Body, value: Val, sign: bool) -> Val:
    kind, _, payload = value
    if kind == CONST:
        return (CONST, I64, (payload - (1 << 32) if sign and payload >> 31 else payload) & ((1 << 64) - 1))
    if kind == STACK and not sign:
        return (STACK, I64, payload)
    if kind != LOCAL:
        raise Blocked("a Go pointer widened as a signed number")
    return unary(body, value, 0xAC if sign else 0xAD, I64)


def goroutine_load(address: Val, offset: int, opcode: int) -> Val:
    """A load through the g pointer: only its stackguard0, which the prologue compares the stack
    pointer with. The traced kernel's stack is its private frame, with room for every frame the
    trace allows, so the guard is modelled as below it (GUARD; gotrace folds the comparison)."""
    if address[0] == G and offset == STACKGUARD_OFFSET and opcode == 0x28:
        return (GUARD, I32, 0)
    raise Blocked("a read of the goroutine's runtime state (the scheduler, a panic or defer record)")
