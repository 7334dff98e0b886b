"""The one opcode table (compiler/optable.py): its mnemonics agree with wasmtime's text parser, the
GPU lowering column only names opcodes the table has, and the pre-scan reads its Imm column."""
from __future__ import annotations

import wasmtime

from wagogpu.compiler import opcodes, optable
from wagogpu.compiler.optable import Imm


def _body(wat_instructions: str) -> bytes:
    """The code of the only function of a module holding the given instructions (not validated)."""
    wasm = wasmtime.wat2wasm(f"(module (func {wat_instructions}))")
    code = wasm.rindex(b"\x0a")  # the code section is the last one here
    size = wasm[code + 3]  # section size, count 1, body size (all below 128 in these modules)
    return wasm[code + 4: code + 4 + size]


def test_every_plain_mnemonic_parses_to_its_opcode() -> None:
    plain = {op: row.name for op, row in optable.OPCODES.items()
             if row.imm in (Imm.NONE, Imm.RETURN) and op != optable.OP_END and row.name != "select"}
    for op, name in plain.items():
        body = _body(name)
        assert body[1] == op, name  # after the zero locals count


def test_prefixed_mnemonics_parse_to_their_sub_opcode() -> None:
    for sub, row in optable.PREFIXED.items():
        if row.imm == Imm.NONE:
            body = _body(row.name)
            assert body[1:3] == bytes((optable.PREFIX_FC, sub)), row.name


def test_walk_names_instructions_and_depth() -> None:
    body = _body("(block (br 0)) i32.const 7 local.get 0 drop drop")
    names = [(i.name, i.depth, i.index, i.label) for i in optable.walk(body, optable.skip_locals(body, 0, len(body)),
                                                                         len(body))]
    assert names == [("block", 0, -1, -1), ("br", 1, -1, 0), ("end", 0, -1, -1), ("i32.const", 0, -1, -1),
                     ("local.get", 0, 0, -1), ("drop", 0, -1, -1), ("drop", 0, -1, -1), ("end", 0, -1, -1)]


def test_lowering_rows_are_table_opcodes_and_the_scan_reads_the_table() -> None:
    assert set(opcodes.LOWERING) <= set(optable.OPCODES)
    for op in range(256):
        expected = optable.OPCODES[op].imm if op in opcodes.LOWERING else Imm.OUTSIDE
        assert opcodes.SCAN_KINDS[op] == expected
    assert max(Imm) < 256  # the scan's table is bytes
