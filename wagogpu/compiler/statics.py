"""What a module declares statically for kernels to use: its globals and its data segments.

Kernels compiled from C, Zig or AssemblyScript read immutable globals (constants the linker
placed there), move the stack-pointer global, and load constant tables that data segments put
into memory. The decoder records both here so the lowering can decide what runs on the GPU.

These parsers never reject a module: globals and data are outside the reference's decoder, so a
module whose global or data section holds something this reader does not know (a GC constant
expression, say) stays verified; the facts it could not read are marked unknown, and a kernel
that needs them stays on the CPU with that reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from .contract import CompileError
from .reader import Reader, ReaderError

# Constant-expression opcodes and the value-type byte of what they push.
OP_I32_CONST, OP_I64_CONST, OP_F32_CONST, OP_F64_CONST = 0x41, 0x42, 0x43, 0x44
OP_GLOBAL_GET, OP_END = 0x23, 0x0B
I32, I64, F32, F64 = 0x7F, 0x7E, 0x7D, 0x7C
DATA_ACTIVE, DATA_PASSIVE, DATA_ACTIVE_INDEXED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class GlobalDecl:
    """One global in index order (imports first). `value` is the init expression's constant (an
    integer or a float's bit pattern) when it is a single plain constant, else None."""

    type: int  # Wasm value-type byte
    mutable: bool
    imported: bool
    value: int | None = None


@dataclass(frozen=True, slots=True)
class DataSegment:
    """An active data segment: `size` bytes written at `offset` of memory `memory` when the module
    is instantiated (offset None: given by an expression this reader does not evaluate)."""

    memory: int
    offset: int | None
    size: int


@dataclass(slots=True)
class Statics:
    """Globals and active data segments of a module; `*_known` is False when a section could not
    be read completely (then its list may be partial)."""

    globals: list[GlobalDecl]
    data: list[DataSegment]
    globals_known: bool = True
    data_known: bool = True


def _const_expr(r: Reader) -> tuple[int, int] | None:
    """(type, value) of an expression that is one constant followed by end; None otherwise, with
    the reader past the expression's end when it could find it."""
    op = r.byte()
    result: tuple[int, int] | None = None
    if op == OP_I32_CONST:
        result = (I32, r.leb(32, True) & 0xFFFFFFFF)
    elif op == OP_I64_CONST:
        result = (I64, r.leb(64, True) & 0xFFFFFFFFFFFFFFFF)
    elif op == OP_F32_CONST:
        result = (F32, int.from_bytes(r.take(4), "little"))
    elif op == OP_F64_CONST:
        result = (F64, int.from_bytes(r.take(8), "little"))
    elif op == OP_GLOBAL_GET:
        r.u32()
    else:
        raise ReaderError("constant expression not understood")
    if r.byte() != OP_END:
        raise ReaderError("constant expression not understood")
    return result


def read_globals(r: Reader, statics: Statics) -> None:
    """The global section: value type, mutability, init expression per entry."""
    try:
        for _ in range(r.count()):
            wtype = r.byte()
            mutable = r.byte() == 1
            init = _const_expr(r)
            value = init[1] if init is not None and init[0] == wtype else None
            statics.globals.append(GlobalDecl(wtype, mutable, False, value))
    except (ReaderError, CompileError):  # never reject a module over its globals (see the docstring)
        statics.globals_known = False
    r.pos = r.end


def read_data(r: Reader, statics: Statics) -> None:
    """The data section: where each active segment lands and how long it is."""
    try:
        for _ in range(r.count()):
            flags = r.u32()
            if flags == DATA_PASSIVE:
                r.skip(r.u32())
                continue
            if flags not in (DATA_ACTIVE, DATA_ACTIVE_INDEXED):
                raise ReaderError("data segment flags not understood")
            memory = r.u32() if flags == DATA_ACTIVE_INDEXED else 0
            init = _const_expr(r)
            size = r.u32()
            r.skip(size)
            offset = init[1] if init is not None and init[0] in (I32, I64) else None
            statics.data.append(DataSegment(memory, offset, size))
    except (ReaderError, CompileError):  # as read_globals
        statics.data_known = False
    r.pos = r.end
