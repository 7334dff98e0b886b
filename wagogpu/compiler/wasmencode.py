"""Wasm binary encoding for the CPU-kernel backend (cpukernel.py): LEB128, vectors, sections,
memargs and the few instruction sequences the backend emits.

The backend copies the guest's own instruction bytes wherever it can; only what it adds or
rewrites is encoded here, so every encoding the module relies on has one place.
"""
from __future__ import annotations

from collections.abc import Iterable

import struct

from .intrinsics import F32, F64, I32, I64
from .optable import OPCODES, PREFIX_FC
from .reader import MEMORY_INDEX_FLAG, WASM_HEADER

HEADER = WASM_HEADER  # (the reader checks for it; one constant for both)
#: Opcode by mnemonic, from the compiler's one opcode-name table.
OPCODE: dict[str, int] = {row.name: op for op, row in OPCODES.items()
                         if (row.name != "select" or op == 0x1B) and op != PREFIX_FC}
FUNC_TYPE = 0x60


class Section:
    TYPE = 1
    IMPORT = 2
    FUNCTION = 3
    GLOBAL = 6
    EXPORT = 7
    CODE = 10


def uleb(value: int) -> bytes:
    """Unsigned LEB128 of a non-negative integer."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(value: int) -> bytes:
    """Signed LEB128 of any integer."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if (value == 0 and not b & 0x40) or (value == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


#: The constant instruction's opcode and immediate width (bits) per numeric value type.
CONST_OPS = {I32: (0x41, 32), I64: (0x42, 64), F32: (0x43, 32), F64: (0x44, 64)}


def const(value_type: int, bits: int) -> bytes:
    """The instruction that pushes the constant of a numeric value type whose bit pattern is `bits`
    (of either sign: reduced to the type's width first)."""
    opcode, width = CONST_OPS[value_type]
    bits &= (1 << width) - 1
    if value_type == I32 or value_type == I64:
        return bytes((opcode,)) + sleb(bits - (1 << width) if bits >> (width - 1) else bits)
    return bytes((opcode,)) + struct.pack("<I" if width == 32 else "<Q", bits)


def name(text: str) -> bytes:
    raw = text.encode()
    return uleb(len(raw)) + raw


def vector(items: Iterable[bytes]) -> bytes:
    items = list(items)
    return uleb(len(items)) + b"".join(items)


def section(section_id: int, payload: bytes) -> bytes:
    return bytes([section_id]) + uleb(len(payload)) + payload


def func_type(params: bytes, results: bytes) -> bytes:
    return bytes([FUNC_TYPE]) + uleb(len(params)) + params + uleb(len(results)) + results


def memory_import(module: str, field: str, shared_pages: int = 0) -> bytes:
    """An imported 32-bit memory of at least 0 pages: with no maximum (any unshared memory links),
    or shared with at most `shared_pages`."""
    if shared_pages:
        return name(module) + name(field) + b"\x02\x03\x00" + uleb(shared_pages)
    return name(module) + name(field) + b"\x02\x00\x00"


def memarg(memory: int, align_log2: int, offset: int) -> bytes:
    """A memarg naming `memory` (implicit when 0)."""
    if memory:
        return uleb(align_log2 | MEMORY_INDEX_FLAG) + uleb(memory) + uleb(offset)
    return uleb(align_log2) + uleb(offset)


def op(mnemonic: str, *immediates: bytes) -> bytes:
    return bytes([OPCODE[mnemonic]]) + b"".join(immediates)


def i32_const(value: int) -> bytes:
    return op("i32.const", sleb(value - (1 << 32) if value >= 1 << 31 else value))


def local(mnemonic: str, index: int) -> bytes:
    return op(mnemonic, uleb(index))


TRAP_IF = op("if", b"\x40") + op("unreachable") + op("end")  # pops an i32: non-zero traps


def body(locals_: Iterable[tuple[int, int]], code: bytes) -> bytes:
    """A code-section entry: local groups (count, type) and the code up to its final end."""
    groups = vector(uleb(n) + bytes([t]) for n, t in locals_)
    return uleb(len(groups) + len(code)) + groups + code
