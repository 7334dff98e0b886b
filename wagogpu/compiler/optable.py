"""The Wasm opcode table: one row per instruction of the MVP (and the 0xFC-prefixed ones), with its
mnemonic and its immediates. It is the one place an opcode's facts stand: the GPU lowering
(opcodes.py) adds a handler column keyed by the same opcode, the pre-scan (prescan.py) skips
immediates as the Imm column says, and explain.py names blockers from the mnemonic.

The walker below goes through a body instruction by instruction without lowering it (explain.py,
inline.never_returns); it is bounded like the reader (every read checked), and an opcode the table
does not know ends the walk.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterator

from .reader import Reader, ReaderError

OP_END = 0x0B
PREFIX_FC = 0xFC


class Imm(enum.IntEnum):
    """An instruction's immediates (values are bytes in the pre-scan's table: keep them < 256)."""

    OUTSIDE = 0  # pre-scan only: not in the GPU subset, the scan stops
    NONE = 1
    BLOCK = 2  # a block type (signed 33-bit): opens a construct
    LABEL = 3  # br, br_if
    LABEL_TABLE = 4  # br_table: count, labels, default
    U32 = 5  # one index (call, global, 0xFC's sub-opcode)
    U32X2 = 6  # two indices (call_indirect, memory/table copy)
    LOCAL = 7  # local.get
    LOCAL_SET = 8  # local.set, local.tee: the local is assigned
    I32 = 9
    I64 = 10
    F32 = 11
    F64 = 12
    MEMARG = 13  # alignment (bit 6: a memory index follows) and offset
    SELECT = 14  # select t*: count, types
    ZERO = 15  # a reserved byte (memory.size / memory.grow)
    RETURN = 16  # no immediate; a branch to the function's label


@dataclass(frozen=True, slots=True)
class Opcode:
    name: str
    imm: Imm = Imm.NONE


def _run(first: int, names: str, imm: Imm = Imm.NONE) -> dict[int, Opcode]:
    """Consecutive opcodes from `first`, one per name."""
    return {first + i: Opcode(name, imm) for i, name in enumerate(names.split())}


_MEMORY = ("i32.load i64.load f32.load f64.load i32.load8_s i32.load8_u i32.load16_s i32.load16_u i64.load8_s "
           "i64.load8_u i64.load16_s i64.load16_u i64.load32_s i64.load32_u i32.store i64.store f32.store "
           "f64.store i32.store8 i32.store16 i64.store8 i64.store16 i64.store32")
_NUMERIC = ("i32.eqz i32.eq i32.ne i32.lt_s i32.lt_u i32.gt_s i32.gt_u i32.le_s i32.le_u i32.ge_s i32.ge_u "
            "i64.eqz i64.eq i64.ne i64.lt_s i64.lt_u i64.gt_s i64.gt_u i64.le_s i64.le_u i64.ge_s i64.ge_u "
            "f32.eq f32.ne f32.lt f32.gt f32.le f32.ge f64.eq f64.ne f64.lt f64.gt f64.le f64.ge "
            "i32.clz i32.ctz i32.popcnt i32.add i32.sub i32.mul i32.div_s i32.div_u i32.rem_s i32.rem_u "
            "i32.and i32.or i32.xor i32.shl i32.shr_s i32.shr_u i32.rotl i32.rotr "
            "i64.clz i64.ctz i64.popcnt i64.add i64.sub i64.mul i64.div_s i64.div_u i64.rem_s i64.rem_u "
            "i64.and i64.or i64.xor i64.shl i64.shr_s i64.shr_u i64.rotl i64.rotr "
            "f32.abs f32.neg f32.ceil f32.floor f32.trunc f32.nearest f32.sqrt f32.add f32.sub f32.mul "
            "f32.div f32.min f32.max f32.copysign f64.abs f64.neg f64.ceil f64.floor f64.trunc f64.nearest "
            "f64.sqrt f64.add f64.sub f64.mul f64.div f64.min f64.max f64.copysign "
            "i32.wrap_i64 i32.trunc_f32_s i32.trunc_f32_u i32.trunc_f64_s i32.trunc_f64_u i64.extend_i32_s "
            "i64.extend_i32_u i64.trunc_f32_s i64.trunc_f32_u i64.trunc_f64_s i64.trunc_f64_u "
            "f32.convert_i32_s f32.convert_i32_u f32.convert_i64_s f32.convert_i64_u f32.demote_f64 "
            "f64.convert_i32_s f64.convert_i32_u f64.convert_i64_s f64.convert_i64_u f64.promote_f32 "
            "i32.reinterpret_f32 i64.reinterpret_f64 f32.reinterpret_i32 f64.reinterpret_i64 "
            "i32.extend8_s i32.extend16_s i64.extend8_s i64.extend16_s i64.extend32_s")

OPCODES: dict[int, Opcode] = {
    0x00: Opcode("unreachable"), 0x01: Opcode("nop"), 0x02: Opcode("block", Imm.BLOCK),
    0x03: Opcode("loop", Imm.BLOCK), 0x04: Opcode("if", Imm.BLOCK), 0x05: Opcode("else"), OP_END: Opcode("end"),
    0x0C: Opcode("br", Imm.LABEL), 0x0D: Opcode("br_if", Imm.LABEL), 0x0E: Opcode("br_table", Imm.LABEL_TABLE),
    0x0F: Opcode("return", Imm.RETURN), 0x10: Opcode("call", Imm.U32), 0x11: Opcode("call_indirect", Imm.U32X2),
    0x12: Opcode("return_call", Imm.U32), 0x13: Opcode("return_call_indirect", Imm.U32X2),
    0x1A: Opcode("drop"), 0x1B: Opcode("select"), 0x1C: Opcode("select", Imm.SELECT),
    0x20: Opcode("local.get", Imm.LOCAL), 0x21: Opcode("local.set", Imm.LOCAL_SET),
    0x22: Opcode("local.tee", Imm.LOCAL_SET), 0x23: Opcode("global.get", Imm.U32),
    0x24: Opcode("global.set", Imm.U32), 0x25: Opcode("table.get", Imm.U32), 0x26: Opcode("table.set", Imm.U32),
    **_run(0x28, _MEMORY, Imm.MEMARG),
    0x3F: Opcode("memory.size", Imm.ZERO), 0x40: Opcode("memory.grow", Imm.ZERO),
    0x41: Opcode("i32.const", Imm.I32), 0x42: Opcode("i64.const", Imm.I64), 0x43: Opcode("f32.const", Imm.F32),
    0x44: Opcode("f64.const", Imm.F64),
    **_run(0x45, _NUMERIC),
    0xD0: Opcode("ref.null", Imm.I32), 0xD1: Opcode("ref.is_null"), 0xD2: Opcode("ref.func", Imm.U32),
    PREFIX_FC: Opcode("0xfc", Imm.U32),  # the prefix: its sub-opcode (PREFIXED) follows as a u32
}
# 0xFC-prefixed: the saturating truncations, then bulk memory and table instructions.
PREFIXED: dict[int, Opcode] = {
    **_run(0, "i32.trunc_sat_f32_s i32.trunc_sat_f32_u i32.trunc_sat_f64_s i32.trunc_sat_f64_u "
              "i64.trunc_sat_f32_s i64.trunc_sat_f32_u i64.trunc_sat_f64_s i64.trunc_sat_f64_u"),
    8: Opcode("memory.init", Imm.U32X2), 9: Opcode("data.drop", Imm.U32), 10: Opcode("memory.copy", Imm.U32X2),
    11: Opcode("memory.fill", Imm.U32), 12: Opcode("table.init", Imm.U32X2), 13: Opcode("elem.drop", Imm.U32),
    14: Opcode("table.copy", Imm.U32X2), 15: Opcode("table.grow", Imm.U32), 16: Opcode("table.size", Imm.U32),
    17: Opcode("table.fill", Imm.U32),
}
_UNKNOWN = Opcode("")


def opcode_name(data: bytes, pos: int) -> str:
    """The mnemonic of the instruction at data[pos] (with its hex code when unknown)."""
    op = data[pos] if pos < len(data) else -1
    if op == PREFIX_FC:
        r = Reader(data, pos + 1)
        try:
            sub = r.u32()
        except ReaderError:  # a truncated prefix is named by its byte
            return "0xfc"
        return PREFIXED.get(sub, Opcode(f"0xfc 0x{sub:02x}")).name
    row = OPCODES.get(op)
    return row.name if row else f"0x{op:02x}"


@dataclass(frozen=True, slots=True)
class Instruction:
    at: int  # byte offset of the opcode in the module
    opcode: int
    name: str
    depth: int  # open blocks around it (0: the function's top level)
    index: int = -1  # the U32 immediate (call target, local, global), else -1
    label: int = -1  # br / br_if depth, else -1


def _immediate(r: Reader, imm: Imm) -> tuple[int, int]:
    """Skip one immediate; (index, label) where the instruction has one."""
    if imm in (Imm.U32, Imm.LOCAL, Imm.LOCAL_SET):
        return r.u32(), -1
    if imm == Imm.LABEL:
        return -1, r.u32()
    if imm == Imm.BLOCK or imm == Imm.I32:
        r.leb(33, True)
    elif imm == Imm.I64:
        r.leb(64, True)
    elif imm in _RAW:
        r.skip(_RAW[imm])
    elif imm == Imm.U32X2:
        r.u32()
        r.u32()
    elif imm == Imm.LABEL_TABLE:
        for _ in range(r.count() + 1):
            r.u32()
    elif imm == Imm.MEMARG:
        r.memarg()
    elif imm == Imm.SELECT:
        for _ in range(r.count()):
            r.byte()
    return -1, -1


_RAW = {Imm.F32: 4, Imm.F64: 8, Imm.ZERO: 1}  # immediates of fixed size, in bytes


def walk(data: bytes, pos: int, end: int) -> Iterator[Instruction]:
    """The instructions of the body data[pos:end] (after its locals), in order, up to the final end
    or the first opcode not in the table (the walk stops there; ReaderError on truncation)."""
    r = Reader(data, pos, end)
    depth = 0
    while r.pos < end:
        at = r.pos
        op = r.byte()
        row = PREFIXED.get(r.u32(), _UNKNOWN) if op == PREFIX_FC else OPCODES.get(op, _UNKNOWN)
        if not row.name:  # not in the table: named by its byte, and the walk ends
            yield Instruction(at, op, f"0x{op:02x}", depth)
            return
        if op == OP_END:
            depth -= 1
            if depth < 0:
                yield Instruction(at, op, row.name, 0)
                return
        index, label = _immediate(r, row.imm)
        yield Instruction(at, op, row.name, depth, index, label)
        if row.imm == Imm.BLOCK:
            depth += 1


def skip_locals(data: bytes, pos: int, end: int) -> int:
    """Where a body's instructions start (after its local declarations)."""
    r = Reader(data, pos, end)
    for _ in range(r.count()):
        r.u32()
        r.byte()
    return r.pos
