"""Pre-scan of a top-level construct: which locals it assigns and which constructs branches target.

control.py needs both before it emits the construct's first line: a local the construct assigns
must move into a WGSL var before the construct opens, and a construct some branch targets must be
emitted as a WGSL loop (WGSL has no labelled break). The scan only skips immediates, as the opcode
table's Imm column says; when it cannot finish (malformed or unsupported code) it answers
(None, None), and then every local and every construct counts as affected, which is always safe:
the main pass reports the real problem.
"""
from __future__ import annotations

import enum

from .contract import CompileError
from .reader import Reader, ReaderError

OP_END = 0x0B


class Imm(enum.IntEnum):
    """An instruction's immediates, as far as the pre-scan must know them."""

    OUTSIDE = 0  # not in the subset: the scan stops
    NONE = 1
    BLOCK_TYPE = 2  # opens a construct
    LABEL = 3  # br, br_if
    LABEL_TABLE = 4  # br_table
    LOCAL = 5  # local.get
    LOCAL_SET = 6  # local.set, local.tee: the local is assigned
    U32 = 7  # call's function index, 0xFC's sub-opcode
    I32 = 8
    F32 = 9
    SELECT_TYPES = 10
    I64 = 11
    F64 = 12


# Plain-int copies for the scan loop (enum attribute lookups are slow in CPython 3.11).
NONE, BLOCK_TYPE, LABEL, LABEL_TABLE, LOCAL, LOCAL_SET, U32, I32, F32, SELECT_TYPES, I64, F64 = (int(k) for k in (
    Imm.NONE, Imm.BLOCK_TYPE, Imm.LABEL, Imm.LABEL_TABLE, Imm.LOCAL, Imm.LOCAL_SET, Imm.U32, Imm.I32, Imm.F32,
    Imm.SELECT_TYPES, Imm.I64, Imm.F64))


def prescan(data: bytes, pos: int, end: int, kinds: bytes) -> tuple[set[int] | None, set[int] | None]:
    """(locals assigned, openings targeted by branches) of the construct opening at data[pos];
    `kinds` is the Imm of every opcode."""
    r = Reader(data, pos, end)
    labels: list[int] = []
    written: set[int] = set()
    targeted: set[int] = set()
    try:
        while r.pos < end:
            at = r.pos
            op = r.byte()
            kind = kinds[op]
            if kind == NONE:
                if op == OP_END:
                    labels.pop()
                    if not labels:
                        return written, targeted
            elif kind == BLOCK_TYPE:
                r.leb(33, True)
                labels.append(at)
            elif kind == LABEL or kind == LABEL_TABLE:
                for _ in range(r.count() + 1 if kind == LABEL_TABLE else 1):
                    depth = r.u32()
                    if depth < len(labels):
                        targeted.add(labels[-1 - depth])
            elif kind == LOCAL_SET:
                written.add(r.u32())
            elif kind == LOCAL or kind == U32:
                r.u32()
            elif kind == I32:
                r.leb(32, True)
            elif kind == F32:
                r.skip(4)
            elif kind == I64:
                r.leb(64, True)
            elif kind == F64:
                r.skip(8)
            elif kind == SELECT_TYPES:
                if r.u32() != 1:
                    break
                r.byte()
            else:
                break
    except (ReaderError, CompileError):
        pass
    return None, None
