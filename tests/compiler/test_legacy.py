"""Legacy compile_wgsl, conformance cases L-1..L-27 (docs/design/compiler.md §6)."""
from __future__ import annotations

import struct

import pytest
import wasmtime

from fixtures import START_WAT, legacy_heavy, legacy_square, legacy_twice
from wagogpu.compiler import CompileError, CompileErrorKind, compile_wgsl
from wagogpu.compiler.legacy import ENTRY_TAIL, compile_legacy_body, go_quote
from wasmgen import F32, HEADER, I32, ModuleBuilder, func_body, section, uleb, vec


def rejected(source: bytes, export: str = "kernel") -> CompileError:
    with pytest.raises(CompileError) as e:
        compile_wgsl(source, export)
    return e.value


def test_l1_twice():
    w = compile_wgsl(legacy_twice(), "kernel")
    for s in ("bitcast<f32>(0x40000000u)", "t0 * t1", "return t2;"):
        assert s in w
    assert w == ("fn kernel(x: f32) -> f32 {\n  let t0: f32 = x;\n  let t1: f32 = bitcast<f32>(0x40000000u);\n"
                 "  let t2: f32 = t0 * t1;\n  return t2;\n}\n" + ENTRY_TAIL)


def test_l2_square():
    w = compile_wgsl(legacy_square(), "kernel")
    for s in ("t0 * t1", "bitcast<f32>(0x3f800000u)", "t2 + t3", "return t4;"):
        assert s in w


def test_l3_sub_mul_body():
    w = compile_legacy_body(bytes.fromhex("00 20 00 43 00 00 00 40 93 43 00 00 80 3f 94 0b"))
    assert "t0 - t1" in w and "t2 * t3" in w


@pytest.mark.parametrize("case, body, message", [
    ("L-4", "00 20 00 20 00 95 0b", "unsupported kernel opcode 0x95"),
    ("L-5", "00 20 01 0b", "only local.get 0 is supported"),
    ("L-6", "01 01 7d 20 00 0b", "kernel locals are unsupported; use only parameter 0"),
    ("L-7", "00 92 0b", "kernel stack underflow"),
    ("L-8", "00 20 00", "missing kernel end"),
    ("L-9", "00 0b", "invalid final kernel stack or trailing code"),
    ("L-10", "00 20 00 20 00 0b", "invalid final kernel stack or trailing code"),
    ("L-11", "00 20 00 0b 00", "invalid final kernel stack or trailing code"),
    ("L-12", "00 43 01", "truncated Wasm"),
    ("L-13", "00 20 80", "truncated Wasm"),
    ("L-14", "00 10 00 0b", "unsupported kernel opcode 0x10"),
])
def test_l4_to_l14_rejected_bodies(case, body, message):
    with pytest.raises(CompileError) as e:
        compile_legacy_body(bytes.fromhex(body))
    assert e.value.message == message, case


def test_l15_to_l18_whole_module_rejections():
    assert rejected(b"").message == "invalid module header, size, or kernel name"  # L-15 (nil source)
    e = rejected(HEADER + bytes.fromhex("01 ff ff ff ff 1f"))  # L-16
    assert e.message == "invalid u32 LEB128"
    assert rejected(legacy_twice()[:-1]).message == "truncated Wasm"  # L-17
    e = rejected(bytes(4 * 1024 * 1024 + 1))  # L-18
    assert e.message == "invalid module header, size, or kernel name" and e.kind == CompileErrorKind.LIMIT
    assert rejected(legacy_twice(), "").message == "invalid module header, size, or kernel name"


def test_l19_l20_kernel_selection():
    assert rejected(legacy_twice(), "cpu").message == "kernel must have type (f32) -> f32"
    assert rejected(legacy_twice(), "missing").message == 'missing or invalid defined kernel "missing"'
    assert go_quote('a"b\n\x00é') == '"a\\"b\\n\\x00é"'


def test_l21_too_many_instructions():
    with pytest.raises(CompileError) as e:
        compile_legacy_body(b"\x00" + b"\x20\x00" * 4097 + b"\x0b")
    assert e.value.message == "too many kernel instructions" and e.value.kind == CompileErrorKind.LIMIT
    # exactly 4,096 instructions including end is fine as far as the counter goes
    w = compile_legacy_body(b"\x00\x20\x00" + b"\x20\x00\x92" * 2047 + b"\x0b")
    assert "return t4094;" in w


def test_l22_heavy():
    w = compile_wgsl(legacy_heavy(), "kernel")
    assert w.count(" * ") == 32 and w.count(" + ") == 32


def test_l23_seeds_never_crash():
    for seed in (legacy_twice(), legacy_square(), legacy_heavy()):
        compile_wgsl(seed, "kernel")
    assert rejected(HEADER).message == 'missing or invalid defined kernel "kernel"'


def test_l24_start_example():
    w = compile_wgsl(wasmtime.wat2wasm(START_WAT), "kernel")
    assert "t0 * t1" in w and "bitcast<f32>(0x40000000u)" in w


def _legacy_module(extra: dict[int, bytes] | None = None, memory_flags: int | None = None, memories: int = 1,
                   non_func_import: bool = False, gc_type: bool = False) -> bytes:
    m = ModuleBuilder()
    if non_func_import:
        m.import_raw(b"\x03env\x01g\x03\x7f\x00")  # global import
    for _ in range(memories):
        m.memory(1, flags=memory_flags) if memory_flags is not None else m.memory(1)
    m.func([F32], [F32], b"\x20\x00\x0b", export="kernel")
    if gc_type:
        m.types.append(b"\x5e\x7d\x01")
    return m.build(extra)


def test_l26_rejected_module_shapes():
    assert "kernel" in compile_wgsl(_legacy_module(), "kernel")
    assert rejected(_legacy_module({12: uleb(1)})).message == "unsupported or repeated section 12"
    assert rejected(_legacy_module(memory_flags=4)).message == "shared memory and Memory64 are unsupported"
    assert rejected(_legacy_module(memory_flags=3)).message == "shared memory and Memory64 are unsupported"
    assert rejected(_legacy_module(memories=2)).message == "expected one unshared Memory32"
    assert rejected(_legacy_module(non_func_import=True)).message == "only function imports are supported"
    assert rejected(_legacy_module(gc_type=True)).message == "only function types are supported"
    # sections out of order, repeated, or unknown
    t = section(1, vec([b"\x60\x01\x7d\x01\x7d"]))
    f = section(3, vec([uleb(0)]))
    c = section(10, vec([func_body(b"\x20\x00\x0b")]))
    e = section(7, vec([b"\x06kernel\x00\x00"]))
    assert compile_wgsl(HEADER + t + f + e + c, "kernel")
    assert rejected(HEADER + t + e + f + c).message == "unsupported or repeated section 3"
    assert rejected(HEADER + t + t + f + e + c).message == "unsupported or repeated section 1"
    assert rejected(HEADER + t + f + e + c + section(13, b"")).message == "unsupported or repeated section 13"
    # custom sections are allowed anywhere
    custom = section(0, b"\x04name\x01\x02")
    assert compile_wgsl(HEADER + custom + t + custom + f + e + c + custom, "kernel")
    # trailing bytes inside a parsed section
    assert rejected(HEADER + section(1, vec([b"\x60\x01\x7d\x01\x7d"]) + b"\x00") + f + e + c).message == \
        "trailing bytes in section 1"
    # function and import type indices are range-checked
    assert rejected(HEADER + t + section(3, vec([uleb(1)])) + e + c).message == "invalid function type"
    imp = section(2, vec([b"\x01m\x01f\x00\x05"]))
    assert rejected(HEADER + t + imp + f + e + c).message == "invalid imported function type"
    # a function/code count mismatch makes the kernel "missing or invalid"
    assert rejected(HEADER + t + f + e).message == 'missing or invalid defined kernel "kernel"'


def test_l27_export_not_unique():
    m = ModuleBuilder()
    k = m.func([F32], [F32], b"\x20\x00\x0b", export="kernel")
    m.export("kernel", 0, k)
    assert rejected(m.build()).message == "kernel export is not a unique function"
    m = ModuleBuilder()
    m.memory(1)
    m.export("kernel", 2, 0)
    m.func([F32], [F32], b"\x20\x00\x0b")
    assert rejected(m.build()).message == "kernel export is not a unique function"


def test_legacy_imported_kernel_and_bounds():
    m = ModuleBuilder()
    m.import_func("env", "f", [F32], [F32])
    m.func([F32], [F32], b"\x20\x00\x0b")
    m.export("kernel", 0, 0)  # the import
    assert rejected(m.build()).message == 'missing or invalid defined kernel "kernel"'
    m = ModuleBuilder()
    m.func([F32], [F32], b"\x00" * 16385)
    m.exports.append(b"\x06kernel\x00\x00")
    assert rejected(m.build()).message == "kernel is too large"
    assert rejected(HEADER + section(1, uleb(16385))).kind == CompileErrorKind.LIMIT


def test_legacy_constants_are_bit_exact():
    for bits in (0x7FC12345, 0x80000000, 0x00000001, 0xFF800000):
        body = b"\x00\x20\x00\x43" + struct.pack("<I", bits) + b"\x94\x0b"
        assert f"bitcast<f32>(0x{bits:08x}u)" in compile_legacy_body(body)


def test_legacy_value_types_not_validated():
    # The legacy decoder records only whether a type is exactly [f32] -> [f32].
    m = ModuleBuilder()
    m.types.append(b"\x60\x01\x11\x00")  # an invalid value type byte, never looked at
    m.func([F32], [F32], b"\x20\x00\x0b", export="kernel")
    assert compile_wgsl(m.build(), "kernel")
    assert I32  # imported for symmetry with other tests


def test_storage_binding_moves_only_the_binding_number(gpu):
    """compile_wgsl(..., storage_binding=n) differs from the default text only in the array's binding
    number, and the shader runs with the array bound there."""
    import numpy as np

    default = compile_wgsl(legacy_square(), "kernel")
    assert compile_wgsl(legacy_square(), "kernel", storage_binding=0) == default
    moved = compile_wgsl(legacy_square(), "kernel", storage_binding=1)
    assert moved == default.replace("@binding(0) var<storage", "@binding(1) var<storage")
    assert moved != default and moved.count("@binding(") == 1
    wgpu = gpu.wgpu
    values = np.array([0.0, 1.5, -2.0, 3.0], np.float32)
    buf = gpu.device.create_buffer_with_data(data=values.tobytes(), usage=wgpu.BufferUsage.STORAGE
                                             | wgpu.BufferUsage.COPY_SRC)
    pipeline = gpu.pipeline(moved)
    group = gpu.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": 1, "resource": {"buffer": buf, "offset": 0, "size": values.nbytes}}])
    enc = gpu.device.create_command_encoder()
    cpass = enc.begin_compute_pass()
    cpass.set_pipeline(pipeline)
    cpass.set_bind_group(0, group)
    cpass.dispatch_workgroups(1, 1, 1)
    cpass.end()
    gpu.device.queue.submit([enc.finish()])
    got = np.frombuffer(gpu.device.queue.read_buffer(buf), np.float32)
    assert (got == values * values + 1).all()


@pytest.mark.parametrize("bad", [-1, 65536, True, 1.0, "1"])
def test_storage_binding_must_be_a_binding_number(bad):
    with pytest.raises(ValueError, match="storage_binding"):
        compile_wgsl(legacy_twice(), "kernel", storage_binding=bad)
