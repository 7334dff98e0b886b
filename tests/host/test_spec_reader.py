"""The spec runner's own parts, without a GPU: the .wast reader, its constants (checked against
wasmtime's WAT parser on every literal of the copied testsuite), the splice and the float classes."""
from __future__ import annotations

import struct

import pytest
import wasmtime

from spec.gpu_testsuite.binary import Reader, decode_module
from spec.gpu_testsuite.floats import FloatClass, classify
from spec.gpu_testsuite.guest import build_guest
from spec.gpu_testsuite.literals import NanPattern, ValueType, f32_bits, f32_text, parse_expected, parse_value
from spec.gpu_testsuite.splice import Impurity, NotPure, splice_body
from spec.gpu_testsuite.suite import wast_files
from spec.gpu_testsuite.wast import CaseKind, WastError, read_script

SCRIPT = r"""
(module $M (; a (; nested ;) comment ;)
  (func (export "id\u{41}") (param i32) (result i32) (local.get 0)))
(assert_return (invoke "idA" (i32.const -1)) (i32.const 0xffff_ffff))
(module (func (export "f") (param f32) (result f32) (local.get 0)))
(assert_trap (invoke $M "idA" (i32.const 0)) "unreachable") ;; line comment
(assert_invalid (module (func (result i32))) "type mismatch")
(assert_return (invoke "f" (f32.const nan:0x200000)) (f32.const nan:arithmetic))
"""


def test_the_reader_keeps_modules_cases_and_what_it_skips(tmp_path):
    path = tmp_path / "s.wast"
    path.write_text(SCRIPT)
    script = read_script(path)
    assert [m.name for m in script.modules] == ["$M", ""]
    first, trap, nan = script.cases
    assert (first.kind, first.module, first.export, first.args[0].bits) == (CaseKind.RETURN, 0, "idA", 0xFFFFFFFF)
    assert first.expected[0].bits == 0xFFFFFFFF
    assert (trap.kind, trap.module, trap.message, trap.line) == (CaseKind.TRAP, 0, "unreachable", 6)
    assert nan.module == 1 and nan.args[0].bits == 0x7FA00000 and nan.expected[0].nan is NanPattern.ARITHMETIC
    assert script.skipped == {"assert_invalid": 1}
    assert decode_module(bytes(wasmtime.wat2wasm(script.modules[0].text))).exports == {"idA": 0}


@pytest.mark.parametrize("text", ["(module", "(module) (assert_return (invoke \"f\") (i32.const zz))",
                                  "(assert_return (invoke \"f\"))", "(module) (assert_trap (invoke \"f\"))"])
def test_a_malformed_script_names_its_line(tmp_path, text):
    path = tmp_path / "bad.wast"
    path.write_text(text)
    with pytest.raises(WastError, match="bad.wast"):
        read_script(path)


def _wasmtime_constants(op: str, literals: list[str]) -> list[int]:
    """The immediates wasmtime's WAT parser gives each `op` literal, read back from the binary."""
    body = "".join(f"(drop ({op} {t}))" for t in literals)
    module = decode_module(bytes(wasmtime.wat2wasm(f"(module (func {body}))")))
    r = Reader(module.bodies[0].code)
    out = []
    while not r.done and r.byte() != 0x0B:
        out.append(struct.unpack("<I", r.take(4))[0] if op == "f32.const" else r.sleb() & 0xFFFFFFFF)
        assert r.byte() == 0x1A  # drop
    return out


def test_every_constant_of_the_testsuite_reads_as_wasmtime_reads_it():
    values = {ValueType.F32: set(), ValueType.I32: set()}
    for path in wast_files():
        for case in read_script(path).cases:
            for v in [*case.args, *case.expected]:
                if v.type in values and getattr(v, "nan", None) is None:
                    values[v.type].add(v.text)
    f32s, i32s = sorted(values[ValueType.F32]), sorted(values[ValueType.I32])
    assert len(f32s) > 1000 and len(i32s) > 200
    assert [f32_bits(t) for t in f32s] == _wasmtime_constants("f32.const", f32s)
    assert [parse_value(("i32.const", t)).bits for t in i32s] == _wasmtime_constants("i32.const", i32s)


@pytest.mark.parametrize("bits", [0, 0x80000000, 1, 0x807FFFFF, 0x3F800000, 0x7F7FFFFF, 0xFF800000, 0x7FA00001])
def test_f32_text_reads_back_as_the_same_bits(bits):
    assert f32_bits(f32_text(bits)) == bits


def test_nan_patterns_accept_what_the_spec_allows():
    canonical = parse_expected(("f32.const", "nan:canonical"))
    arithmetic = parse_expected(("f32.const", "nan:arithmetic"))
    assert canonical.accepts(0x7FC00000) and canonical.accepts(0xFFC00000)
    assert not canonical.accepts(0x7FC00001) and not canonical.accepts(0x7FA00000)
    assert arithmetic.accepts(0x7FC00001) and arithmetic.accepts(0xFFE00000)
    assert not arithmetic.accepts(0x7FA00000) and not arithmetic.accepts(0x7F800000)
    assert parse_expected(("f32.const", "-0")).accepts(0x80000000)
    assert not parse_expected(("f32.const", "-0")).accepts(0)


def _func(wat_body: str, sig: str = "(param i32) (result i32)") -> bytes:
    module = decode_module(bytes(wasmtime.wat2wasm(f"(module (func {sig} {wat_body}))")))
    return module.bodies[0].code


def test_the_splice_shifts_locals_and_turns_return_into_a_branch():
    code = _func("(local i32) (block (br_if 0 (local.get 0)) (return (i32.const 7))) (local.tee 1 (i32.const 9))")
    spliced = splice_body(code)
    # block; local.get 1; br_if 0; i32.const 7; br 1 (the return, one block deep); end; i32.const 9;
    # local.tee 2; end
    assert spliced.code == bytes([0x02, 0x40, 0x20, 1, 0x0D, 0, 0x41, 7, 0x0C, 1, 0x0B, 0x41, 9, 0x22, 2, 0x0B])


@pytest.mark.parametrize(("body", "reason"), [
    ("(call 0 (local.get 0))", Impurity.CALL), ("(i32.load (local.get 0))", Impurity.MEMORY),
    ("(global.get 0)", Impurity.GLOBAL)])
def test_impure_functions_are_refused_with_the_reason(body, reason):
    extra = "(memory 1) (global i32 (i32.const 0))"
    wasm = bytes(wasmtime.wat2wasm(f"(module {extra} (func (param i32) (result i32) {body}))"))
    with pytest.raises(NotPure) as info:
        splice_body(decode_module(wasm).bodies[0].code)
    assert info.value.reason is reason


def test_a_guest_is_valid_wasm_and_computes_the_function_on_the_cpu_path():
    wasm = bytes(wasmtime.wat2wasm(
        "(module (type (func (result i32 i32))) (func (export \"f\") (param i32 i32) (result i32 i32)"
        " (local.get 1) (local.get 0)))"))
    module = decode_module(wasm)
    guest = build_guest(module, 0, splice_body(module.bodies[0].code), elements=3)
    assert guest.signature == "sii_ii" and guest.slots == 4
    wasmtime.Module(wasmtime.Engine(), guest.wasm)  # validates: multi-value block, imports, runner


def _v(text: str) -> tuple:
    return (parse_value(("f32.const", text)),)


@pytest.mark.parametrize(("args", "expected", "got", "div", "cls"), [
    (_v("nan:0x200000"), "nan:arithmetic", 0x7FA00000, False, FloatClass.NAN_QUIETING),
    (_v("0x1p-149"), "0", 0x7FC00000, True, FloatClass.FLUSH_TO_ZERO),
    (_v("1"), "inf", 0x00000000, True, FloatClass.CONSTANT_FOLDING),
    (_v("-1"), "-0", 0x00000000, False, FloatClass.CONSTANT_FOLDING),
    (_v("0x1.2p+3"), "0x1.3p+3", f32_bits("0x1.2p+3"), False, FloatClass.REASSOCIATION),
    (_v("3"), "0x1.000002p+0", f32_bits("0x1.000004p+0"), True, FloatClass.DIV_SQRT_ULPS),
    (_v("3"), "0x1.000002p+0", f32_bits("0x1p+0"), False, FloatClass.ROUNDING_ULPS),
    (_v("3"), "0x1p+0", f32_bits("0x1p+1"), False, FloatClass.OTHER),
])
def test_float_differences_are_classified(args, expected, got, div, cls):
    assert classify(args, parse_expected(("f32.const", expected)), got, div) is cls
