"""Pre-scan of a top-level construct: which locals it assigns and which constructs branches target.

control.py needs both before it emits the construct's first line: a local the construct assigns
must move into a WGSL var before the construct opens, and a construct some branch targets must be
emitted as a WGSL loop (WGSL has no labelled break). The scan only skips immediates, as the opcode
table's Imm column says (optable.py); when it cannot finish (malformed or unsupported code) it answers
(None, None), and then every local and every construct counts as affected, which is always safe:
the main pass reports the real problem.
"""
from __future__ import annotations

from .contract import CompileError
from .optable import OP_END, Imm
from .reader import Reader, ReaderError

# Plain-int copies for the scan loop (enum attribute lookups are slow in CPython 3.11).
NONE, BLOCK, LABEL, LABEL_TABLE, LOCAL, LOCAL_SET, U32, I32, F32, SELECT, MEMARG, RETURN, I64, F64 = (
    int(k) for k in (Imm.NONE, Imm.BLOCK, Imm.LABEL, Imm.LABEL_TABLE, Imm.LOCAL, Imm.LOCAL_SET, Imm.U32,
                     Imm.I32, Imm.F32, Imm.SELECT, Imm.MEMARG, Imm.RETURN, Imm.I64, Imm.F64))


def prescan(data: bytes, pos: int, end: int, kinds: bytes,
            body: bool = False, last: list[int] | None = None) -> tuple[set[int] | None, set[int] | None]:
    """(locals assigned, openings targeted by branches) of the construct opening at data[pos];
    `kinds` is the Imm of every opcode. With `body`, data[pos:end] is a whole function body from
    its first instruction (an inlined callee): its own label is `pos`, which a `return` targets
    unless it directly precedes the final end. `last`, if given, receives the position of the last
    instruction that starts at the outermost level (the final end's predecessor at the end)."""
    r = Reader(data, pos, end)
    labels: list[int] = [pos] if body else []
    written: set[int] = set()
    targeted: set[int] = set()
    try:
        while r.pos < end:
            at = r.pos
            op = r.byte()
            kind = kinds[op]
            if last is not None and len(labels) == 1 and op != OP_END:
                last[:] = (at,)
            if kind == NONE:
                if op == OP_END:
                    labels.pop()
                    if not labels:
                        return written, targeted
            elif kind == BLOCK:
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
            elif kind == SELECT:
                if r.u32() != 1:
                    break
                r.byte()
            elif kind == MEMARG:
                r.memarg()
            elif kind == RETURN:
                if body and not (len(labels) == 1 and r.pos == end - 1 and data[r.pos] == OP_END):
                    targeted.add(labels[0])
            else:
                break
    except (ReaderError, CompileError):
        pass
    return None, None
