"""Wasm instruction names and immediates: how a blocker is named in words, and how a function body
is walked instruction by instruction without lowering it (explain.py, inline.never_returns).

One row per opcode: its mnemonic and its immediate kind. The walker is bounded like the reader
(every read checked); an opcode it does not know ends the walk.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterator

from .reader import Reader, ReaderError


class Imm(enum.IntEnum):
    NONE = 0
    BLOCK = 1  # block type (signed 33-bit)
    LABEL = 2
    TABLE = 3  # br_table: count, labels, default
    U32 = 4  # one index
    U32X2 = 5  # two indices (call_indirect, memory/table copy)
    I32 = 6
    I64 = 7
    F32 = 8
    F64 = 9
    MEMARG = 10
    SELECT = 11  # select t*: count, types
    ZERO = 12  # a reserved byte (memory.size / memory.grow)


def _rows() -> dict[int, tuple[str, Imm]]:
    rows = {0x00: ("unreachable", Imm.NONE), 0x01: ("nop", Imm.NONE), 0x02: ("block", Imm.BLOCK),
            0x03: ("loop", Imm.BLOCK), 0x04: ("if", Imm.BLOCK), 0x05: ("else", Imm.NONE), 0x0B: ("end", Imm.NONE),
            0x0C: ("br", Imm.LABEL), 0x0D: ("br_if", Imm.LABEL), 0x0E: ("br_table", Imm.TABLE),
            0x0F: ("return", Imm.NONE), 0x10: ("call", Imm.U32), 0x11: ("call_indirect", Imm.U32X2),
            0x12: ("return_call", Imm.U32), 0x13: ("return_call_indirect", Imm.U32X2),
            0x1A: ("drop", Imm.NONE), 0x1B: ("select", Imm.NONE), 0x1C: ("select", Imm.SELECT),
            0x20: ("local.get", Imm.U32), 0x21: ("local.set", Imm.U32), 0x22: ("local.tee", Imm.U32),
            0x23: ("global.get", Imm.U32), 0x24: ("global.set", Imm.U32), 0x25: ("table.get", Imm.U32),
            0x26: ("table.set", Imm.U32), 0x3F: ("memory.size", Imm.ZERO), 0x40: ("memory.grow", Imm.ZERO),
            0x41: ("i32.const", Imm.I32), 0x42: ("i64.const", Imm.I64), 0x43: ("f32.const", Imm.F32),
            0x44: ("f64.const", Imm.F64), 0xD0: ("ref.null", Imm.I32), 0xD1: ("ref.is_null", Imm.NONE),
            0xD2: ("ref.func", Imm.U32)}
    memory = ("i32.load i64.load f32.load f64.load i32.load8_s i32.load8_u i32.load16_s i32.load16_u i64.load8_s "
              "i64.load8_u i64.load16_s i64.load16_u i64.load32_s i64.load32_u i32.store i64.store f32.store "
              "f64.store i32.store8 i32.store16 i64.store8 i64.store16 i64.store32").split()
    rows.update({0x28 + i: (name, Imm.MEMARG) for i, name in enumerate(memory)})
    numeric = ("i32.eqz i32.eq i32.ne i32.lt_s i32.lt_u i32.gt_s i32.gt_u i32.le_s i32.le_u i32.ge_s i32.ge_u "
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
               "i32.extend8_s i32.extend16_s i64.extend8_s i64.extend16_s i64.extend32_s").split()
    rows.update({0x45 + i: (name, Imm.NONE) for i, name in enumerate(numeric)})
    return rows


OPCODES: dict[int, tuple[str, Imm]] = _rows()
# 0xFC-prefixed: the saturating truncations, then bulk memory and table instructions.
PREFIXED: dict[int, tuple[str, Imm]] = {
    **{i: (name, Imm.NONE) for i, name in enumerate(
        "i32.trunc_sat_f32_s i32.trunc_sat_f32_u i32.trunc_sat_f64_s i32.trunc_sat_f64_u i64.trunc_sat_f32_s "
        "i64.trunc_sat_f32_u i64.trunc_sat_f64_s i64.trunc_sat_f64_u".split())},
    8: ("memory.init", Imm.U32X2), 9: ("data.drop", Imm.U32), 10: ("memory.copy", Imm.U32X2),
    11: ("memory.fill", Imm.U32), 12: ("table.init", Imm.U32X2), 13: ("elem.drop", Imm.U32),
    14: ("table.copy", Imm.U32X2), 15: ("table.grow", Imm.U32), 16: ("table.size", Imm.U32),
    17: ("table.fill", Imm.U32),
}
PREFIX_FC = 0xFC


def opcode_name(data: bytes, pos: int) -> str:
    """The mnemonic of the instruction at data[pos] (with its hex code when unknown)."""
    op = data[pos] if pos < len(data) else -1
    if op == PREFIX_FC:
        r = Reader(data, pos + 1)
        try:
            sub = r.u32()
        except ReaderError:  # a truncated prefix is named by its byte
            return "0xfc"
        return PREFIXED.get(sub, (f"0xfc 0x{sub:02x}", Imm.NONE))[0]
    row = OPCODES.get(op)
    return row[0] if row else f"0x{op:02x}"


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
    if imm == Imm.U32:
        return r.u32(), -1
    if imm == Imm.LABEL:
        return -1, r.u32()
    if imm == Imm.BLOCK or imm == Imm.I32:
        r.leb(33, True)
    elif imm == Imm.I64:
        r.leb(64, True)
    elif imm == Imm.F32:
        r.skip(4)
    elif imm == Imm.F64:
        r.skip(8)
    elif imm == Imm.U32X2:
        r.u32()
        r.u32()
    elif imm == Imm.TABLE:
        for _ in range(r.count() + 1):
            r.u32()
    elif imm == Imm.MEMARG:
        if r.u32() & 0x40:
            r.u32()
        r.leb(64, False)
    elif imm == Imm.SELECT:
        for _ in range(r.count()):
            r.byte()
    elif imm == Imm.ZERO:
        r.byte()
    return -1, -1


def walk(data: bytes, pos: int, end: int) -> Iterator[Instruction]:
    """The instructions of the body data[pos:end] (after its locals), in order, up to the final end
    or the first opcode not in the table (the walk stops there; ReaderError on truncation)."""
    r = Reader(data, pos, end)
    depth = 0
    while r.pos < end:
        at = r.pos
        op = r.byte()
        if op == PREFIX_FC:
            name, imm = PREFIXED.get(r.u32(), ("", Imm.NONE))
        else:
            name, imm = OPCODES.get(op, ("", Imm.NONE))
        if not name:  # not in the table: named by its byte, and the walk ends
            yield Instruction(at, op, f"0x{op:02x}", depth)
            return
        if op == 0x0B:
            depth -= 1
            if depth < 0:
                yield Instruction(at, op, name, 0)
                return
        index, label = _immediate(r, imm)
        yield Instruction(at, op, name, depth, index, label)
        if imm == Imm.BLOCK:
            depth += 1


def skip_locals(data: bytes, pos: int, end: int) -> int:
    """Where a body's instructions start (after its local declarations)."""
    r = Reader(data, pos, end)
    for _ in range(r.count()):
        r.u32()
        r.byte()
    return r.pos
