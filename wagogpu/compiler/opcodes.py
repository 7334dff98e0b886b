"""The GPU lowering column of the opcode table: one row per instruction of the GPU subset, keyed
by the opcode of its row in optable.OPCODES (which holds its name and immediates). Adding a GPU
instruction is a row here.

A row names its handler (a function of the Lowering workspace that returns True when the body is
done) and how lower.run_fast treats it (Fast: inlined, called, or handed over to the checked
loop). Numeric rows come from ops.py, one
per opcode; an opcode without a row is "unsupported opcode 0x..".

The rows with a Fast kind other than HANDOVER are exactly the reference's subset (docs/design/compiler.md
§1.3.5: end, call, local.get/set/tee, i32/f32.const, f32.add/sub/mul), so a kernel inside it is
lowered by the fast loop alone and keeps the reference's WGSL byte for byte.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import partial
from typing import Callable

from . import access, control, globalvars, instructions, memaccess
from .contract import CompileError
from .frames import FrameKind
from .intrinsics import F32, F64, I32, I64
from .lowering import UNSUPPORTED, Lowering
from .ops import NUMERIC, NumericOp
from .optable import OPCODES, Imm

Handler = Callable[[Lowering], "bool | None"]


class Fast(enum.IntEnum):
    """How lower.run_fast runs a row."""

    HANDOVER = 0  # not at all: the checked loop continues from this instruction
    HANDLER = 1  # it calls the row's handler
    LOCAL_GET = 2  # inlined (the handler's semantics while no construct has opened)
    LOCAL_SET = 3
    LOCAL_TEE = 4
    F32_CONST = 5
    DEFERRED = 6  # an f32 add/sub/mul node


@dataclass(frozen=True, slots=True)
class Row:
    handler: Handler
    fast: Fast = Fast.HANDOVER
    op: NumericOp | None = None  # the deferred node's op (Fast.DEFERRED)


def unsupported(st: Lowering) -> None:
    """The handler of every opcode without a row."""
    raise CompileError(UNSUPPORTED, f"unsupported opcode 0x{st.r.data[st.r.pos - 1]:02x}")


def unsupported_as(st: Lowering, reason: str) -> None:
    """The handler of an opcode that stays on the CPU for a reason worth saying."""
    raise CompileError(UNSUPPORTED, reason)


def _numeric(op: NumericOp) -> Row:
    if op.deferred:
        return Row(partial(instructions.deferred, op=op), fast=Fast.DEFERRED, op=op)
    return Row(partial(instructions.numeric, op=op))


LOWERING: dict[int, Row] = {
    0x00: Row(control.unreachable),
    0x01: Row(instructions.nop),
    0x02: Row(partial(control.block, kind=FrameKind.BLOCK)),
    0x03: Row(partial(control.block, kind=FrameKind.LOOP)),
    0x04: Row(control.if_),
    0x05: Row(control.else_),
    0x0B: Row(control.end, fast=Fast.HANDLER),
    0x0C: Row(control.br),
    0x0D: Row(control.br_if),
    0x0E: Row(control.br_table),
    0x0F: Row(control.return_),
    0x10: Row(access.call, Fast.HANDLER),
    0x11: Row(partial(unsupported_as, reason="call_indirect (its target is known only at run time)")),
    0x1A: Row(instructions.drop),
    0x1B: Row(partial(instructions.select, typed=False)),
    0x1C: Row(partial(instructions.select, typed=True)),
    0x20: Row(instructions.local_get, Fast.LOCAL_GET),
    0x21: Row(partial(instructions.local_set, tee=False), Fast.LOCAL_SET),
    0x22: Row(partial(instructions.local_set, tee=True), Fast.LOCAL_TEE),
    0x23: Row(globalvars.global_get),
    0x24: Row(globalvars.global_set),
    **{opcode: Row(partial(memaccess.load, access=a)) for opcode, a in memaccess.LOADS.items()},
    **{opcode: Row(partial(memaccess.store, access=a)) for opcode, a in memaccess.STORES.items()},
    0x41: Row(instructions.i32_const, Fast.HANDLER),
    0x42: Row(instructions.i64_const),
    0x43: Row(instructions.f32_const, Fast.F32_CONST),
    0x44: Row(instructions.f64_const),
    0xBC: Row(partial(instructions.reinterpret, result=I32)),
    0xBD: Row(partial(instructions.reinterpret, result=I64)),
    0xBE: Row(partial(instructions.reinterpret, result=F32)),
    0xBF: Row(partial(instructions.reinterpret, result=F64)),
    0xFC: Row(instructions.prefixed),
    **{opcode: _numeric(op) for opcode, op in NUMERIC.items()},
}

# Per opcode, for the drivers and the pre-scan (derived from the tables, never set by hand).
HANDLERS: list[Handler] = [row.handler if (row := LOWERING.get(op)) else unsupported for op in range(256)]
FAST_KIND = bytes(row.fast if (row := LOWERING.get(op)) else Fast.HANDOVER for op in range(256))
DEFERRED_OPS: dict[int, NumericOp] = {opcode: row.op for opcode, row in LOWERING.items() if row.op is not None}
SCAN_KINDS = bytes(OPCODES[op].imm if op in LOWERING else Imm.OUTSIDE for op in range(256))
