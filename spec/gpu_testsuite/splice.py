"""Rewrite one function body so it can run inside a buffer kernel (the splice).

The kernel's param 0 is the element index, so every local index of the function moves up by one;
the body is wrapped in a block with the function's result types, so a `return` becomes a `br` to
that block (its depth is the nesting depth where the return stands) and branches to the function's
own label already land there. Nothing else changes: every other instruction is copied byte for byte.

Working on the binary rather than on the text: wasmtime's WAT parser has already resolved folded
expressions, symbolic labels, named locals, inline exports and type uses, so the rewrite is two
mechanical edits on a flat instruction stream, and the spliced body is exactly the function's code.

A body that reaches anything outside a pure function (calls, globals, memory, tables, references)
is refused with the reason; its cases are reported as not spliceable.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .binary import Reader, uleb

OP_BLOCK, OP_LOOP, OP_IF, OP_ELSE, OP_END = 0x02, 0x03, 0x04, 0x05, 0x0B
OP_BR, OP_BR_TABLE, OP_RETURN = 0x0C, 0x0E, 0x0F
OP_LOCAL_GET, OP_LOCAL_SET, OP_LOCAL_TEE = 0x20, 0x21, 0x22
OP_I32_CONST, OP_I64_CONST, OP_F32_CONST, OP_F64_CONST = 0x41, 0x42, 0x43, 0x44
OP_SELECT_TYPED, OP_MISC = 0x1C, 0xFC
BLOCK_EMPTY = 0x40


class Impurity(enum.StrEnum):
    """Why a function is not a pure function the runner can splice."""

    CALL = "calls a function"
    GLOBAL = "uses a global"
    MEMORY = "uses memory"
    TABLE = "uses a table"
    REFERENCE = "uses references"
    OPCODE = "uses an opcode the runner does not know"


class Immediate(enum.IntEnum):
    NONE = 0
    U32 = 1  # one LEB128 index or label
    BLOCK_TYPE = 2
    BR_TABLE = 3
    I32 = 4  # signed LEB128
    I64 = 5
    F32 = 6  # 4 raw bytes
    F64 = 7
    VALTYPES = 8  # typed select: a vector of value types


def _opcode_table() -> dict[int, Immediate]:
    table = {op: Immediate.NONE for op in (0x00, 0x01, OP_ELSE, OP_END, OP_RETURN, 0x1A, 0x1B)}
    table.update({op: Immediate.NONE for op in range(0x45, 0xC5)})  # numeric, conversions, extends
    table.update({OP_BLOCK: Immediate.BLOCK_TYPE, OP_LOOP: Immediate.BLOCK_TYPE, OP_IF: Immediate.BLOCK_TYPE,
                  OP_BR: Immediate.U32, 0x0D: Immediate.U32, OP_BR_TABLE: Immediate.BR_TABLE,
                  OP_LOCAL_GET: Immediate.U32, OP_LOCAL_SET: Immediate.U32, OP_LOCAL_TEE: Immediate.U32,
                  OP_I32_CONST: Immediate.I32, OP_I64_CONST: Immediate.I64, OP_F32_CONST: Immediate.F32,
                  OP_F64_CONST: Immediate.F64, OP_SELECT_TYPED: Immediate.VALTYPES})
    return table


OPCODES = _opcode_table()
SATURATING_SUBOPS = range(0, 8)  # 0xFC 0..7: the non-trapping float-to-int truncations


def _impurity(op: int) -> Impurity:
    if op in (0x10, 0x11, 0x12, 0x13, 0x14, 0x15):
        return Impurity.CALL
    if op in (0x23, 0x24):
        return Impurity.GLOBAL
    if 0x28 <= op <= 0x40:
        return Impurity.MEMORY
    if op in (0x25, 0x26):
        return Impurity.TABLE
    if 0xD0 <= op <= 0xD6:
        return Impurity.REFERENCE
    return Impurity.OPCODE


@dataclass(frozen=True, slots=True)
class Spliced:
    code: bytes  # the rewritten instructions, ending with the `end` of the wrapping block
    opcodes: frozenset[int]  # opcodes used (0xFC sub-opcodes as 0xFC00 | sub)


class NotPure(Exception):
    def __init__(self, reason: Impurity):
        super().__init__(reason.value)
        self.reason = reason


def _skip(r: Reader, imm: Immediate) -> None:
    """Move past one immediate that is copied unchanged."""
    if imm is Immediate.BLOCK_TYPE:
        if r.data[r.pos] in (BLOCK_EMPTY, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B):
            r.pos += 1
        else:
            r.sleb()  # a type index (s33); the guest keeps the module's types in place
    elif imm is Immediate.BR_TABLE:
        for _ in range(r.uleb() + 1):
            r.uleb()
    elif imm is Immediate.VALTYPES:
        r.take(r.uleb())
    elif imm in (Immediate.U32, Immediate.I32, Immediate.I64):
        r.uleb()  # the same byte length for signed and unsigned LEB128
    elif imm is Immediate.F32:
        r.take(4)
    elif imm is Immediate.F64:
        r.take(8)


def splice_body(code: bytes, local_shift: int = 1) -> Spliced:
    """Rewrite a function's instructions (final `end` included) for the wrapping block."""
    r = Reader(code)
    out = bytearray()
    used: set[int] = set()
    depth = 0  # open blocks inside the function body
    while True:
        start = r.pos
        op = r.byte()
        if op == OP_MISC:
            sub = r.uleb()
            if sub not in SATURATING_SUBOPS:
                raise NotPure(Impurity.MEMORY if sub in (8, 9, 10, 11) else Impurity.TABLE)
            used.add(0xFC00 | sub)
            out += code[start:r.pos]
            continue
        imm = OPCODES.get(op)
        if imm is None:
            raise NotPure(_impurity(op))
        used.add(op)
        if op in (OP_LOCAL_GET, OP_LOCAL_SET, OP_LOCAL_TEE):
            out.append(op)
            out += uleb(r.uleb() + local_shift)
            continue
        if op == OP_RETURN:
            out.append(OP_BR)
            out += uleb(depth)
            continue
        _skip(r, imm)
        out += code[start:r.pos]
        if imm is Immediate.BLOCK_TYPE:
            depth += 1
        elif op == OP_END:
            if depth == 0:
                if not r.done:
                    raise NotPure(Impurity.OPCODE)
                return Spliced(bytes(out), frozenset(used))
            depth -= 1


FLOAT_OPCODES = frozenset([OP_F32_CONST, OP_F64_CONST, *range(0x5B, 0x67), *range(0x8B, 0xA7),
                           *range(0xA8, 0xAC), *range(0xAE, 0xC0), *(0xFC00 | s for s in SATURATING_SUBOPS)])
DIV_SQRT_OPCODES = frozenset([0x91, 0x95])  # f32.sqrt, f32.div


def uses_floats(spliced: Spliced, value_types: tuple[int, ...]) -> bool:
    """Whether any f32/f64 value can occur: in the signature, the locals or an instruction."""
    return bool(spliced.opcodes & FLOAT_OPCODES) or any(t in (0x7D, 0x7C) for t in value_types)
