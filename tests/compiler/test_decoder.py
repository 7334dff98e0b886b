"""The bounded module decoder (docs/design/compiler.md §1.3.2, docs/design/abi.md §6.2)."""
from __future__ import annotations

import pytest

from fixtures import TWICE_BODY, K
from wagogpu.compiler import CompileError, CompileErrorKind, compile_buffer_wgsl, inspect_module
from wagogpu.compiler import reader as lim
from wagogpu.compiler.contract import MemoryDecl
from wagogpu.compiler.decoder import decode_module
from wasmgen import END, HEADER, I32, TM, ModuleBuilder, section, uleb, vec

INVALID, UNSUPPORTED, LIMIT = CompileErrorKind.INVALID_CONTRACT, CompileErrorKind.UNSUPPORTED, CompileErrorKind.LIMIT


def decode_err(source: bytes) -> CompileError:
    with pytest.raises(CompileError) as e:
        decode_module(source)
    return e.value


def with_types(*entries: bytes) -> bytes:
    """A module whose type section is exactly `entries` followed by a valid kernel."""
    m = TM.builder()
    m.func([I32], [], TWICE_BODY + END, export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    m.types.extend(entries)
    return m.build()


def test_header_and_size():
    for bad in (b"", b"\x00asm", b"\x00asm\x02\x00\x00\x00", b"\x00ASM\x01\x00\x00\x00"):
        e = decode_err(bad)
        assert (e.kind, e.message) == (INVALID, "invalid Wasm header")
    e = decode_err(b"\x00" * (lim.MAX_MODULE_BYTES + 1))
    assert (e.kind, e.message) == (LIMIT, "module exceeds decoder byte limit")
    assert decode_module(HEADER).bodies == []
    big_custom = HEADER + section(0, b"\x01x" + bytes(lim.MAX_MODULE_BYTES - 16))
    assert len(big_custom) <= lim.MAX_MODULE_BYTES and decode_module(big_custom).functions == []


def test_gc_types_rec_groups_and_ref_types():
    func_ref_param = b"\x60\x01\x63\x70\x00"  # (func (param (ref null func)))
    struct = b"\x5f\x03\x78\x01\x77\x00\x64\x00\x01"  # (struct i8 mut, i16, (ref 0) mut)
    array = b"\x5e\x7d\x01"
    sub = b"\x50\x00" + array
    sub_final = b"\x4f\x01\x00" + struct
    rec = b"\x4e\x03" + sub + sub_final + b"\x60\x00\x00"
    src = with_types(func_ref_param, rec, b"\x60\x02\x7b\x6f\x01\x6e")
    m = decode_module(src)
    assert m.types[-5:] == [(b"\x63", b""), None, None, (b"", b""), (b"\x7b\x6f", b"\x6e")]
    assert compile_buffer_wgsl(src, K)
    heap_s33 = b"\x60\x01\x64\xff\xff\xff\xff\x0f\x00"  # (ref 0xffffffff) in signed 33 bits
    assert decode_module(with_types(heap_s33)).types[-1] == (b"\x64", b"")


@pytest.mark.parametrize("entry, message", [
    (b"\x60\x01\x71\x00", "unsupported value type 0x71"),
    (b"\x60\x01\x74\x00", "unsupported value type 0x74"),
    (b"\x60\x00\x01\x40", "unsupported value type 0x40"),
    (b"\x5e\x00\x01", "unsupported value type 0x0"),
    (b"\x5d\x00", "unsupported composite type"),
    (b"\x4e\x01\x4e\x00", "unsupported composite type"),  # rec inside rec
    (b"\x50\x00\x50\x00\x60\x00\x00", "unsupported composite type"),  # sub inside sub
    (b"\x60\x01\x63\xff\xff\xff\xff\x2f\x00", "signed LEB128 overflow"),
    (b"\x60\x01\x63\x80\x80\x80\x80\x80\x00\x00", "unterminated LEB128"),
    (b"\x60\x02\x7f", "truncated Wasm"),
])
def test_type_section_rejections(entry, message):
    m = ModuleBuilder()
    m.types.append(entry)
    e = decode_err(m.build())
    assert (e.kind, e.message) == (INVALID, "bounded module decoder: " + message)


def test_expanded_type_limit():
    array = b"\x5e\x7d\x01"
    ok = HEADER + section(1, uleb(1) + b"\x4e" + uleb(lim.MAX_TYPES) + array * lim.MAX_TYPES)
    assert len(decode_module(ok).types) == lim.MAX_TYPES
    bad = HEADER + section(1, uleb(2) + b"\x4e" + uleb(lim.MAX_TYPES) + array * lim.MAX_TYPES + array)
    e = decode_err(bad)
    assert (e.kind, e.message) == (LIMIT, "expanded type limit")
    e = decode_err(HEADER + section(1, uleb(1) + b"\x4e" + uleb(lim.MAX_TYPES + 1)))
    assert (e.kind, e.message) == (LIMIT, "section entry limit exceeded")


@pytest.mark.parametrize("section_id, payload", [
    (1, uleb(16385)), (2, uleb(16385)), (3, uleb(16385)), (5, uleb(16385)), (7, uleb(16385)), (10, uleb(16385)),
    (1, b"\x01\x60" + uleb(16385)),
])
def test_entry_limit_in_every_vector(section_id, payload):
    e = decode_err(HEADER + section(section_id, payload))
    assert (e.kind, e.message) == (LIMIT, "section entry limit exceeded")


def test_imports_of_every_kind_and_memories():
    m = ModuleBuilder()
    m.type([I32], [I32])
    m.import_raw(b"\x03env\x01t\x01\x70\x00\x01")  # table funcref min 1
    m.import_raw(b"\x03env\x02m0\x02\x03\x01\x02")  # shared memory 1..2
    m.import_raw(b"\x03env\x01g\x03\x7f\x01")  # mutable global i32
    m.import_raw(b"\x03env\x03tag\x04\x00\x00")  # tag
    m.import_raw(b"\x03env\x02m1\x02\x05\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x00")  # 64-bit memory, huge min
    m.memory(1)
    m.memories.append(b"\x04\x01")  # defined 64-bit memory
    m.memories.append(b"\x07\x01\x02")  # all three flags
    src = m.build()
    mod = decode_module(src)
    assert mod.memories == [MemoryDecl(False, True, True), MemoryDecl(True, False, True),
                            MemoryDecl(False, False, False), MemoryDecl(True, False, False),
                            MemoryDecl(True, True, False)]
    assert mod.func_imports == []
    assert inspect_module(src, []).memories == tuple(mod.memories)


@pytest.mark.parametrize("entry, message", [
    (b"\x03env\x01x\x05\x00", "unsupported import kind"),
    (b"\x03env\x01m\x02\x08\x01", "unsupported memory limits"),
    (b"\x03env\x01m\x02\x00\xff\xff\xff\xff\x1f", "LEB128 overflow"),
    (b"\x03env\x01m\x02\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x03", "LEB128 overflow"),
    (b"\x03env\x01t\x01\x71\x00\x01", "unsupported value type 0x71"),
    (b"\x03env\x01g\x03\x72\x00", "unsupported value type 0x72"),
    (b"\x03env\x01m\x02\x80\x80\x80\x80\x10\x01", "invalid u32 LEB128"),
    (b"\x03env\x09x", "truncated Wasm"),
])
def test_import_rejections(entry, message):
    m = ModuleBuilder()
    m.import_raw(entry)
    e = decode_err(m.build())
    assert (e.kind, e.message) == (INVALID, "bounded module decoder: " + message)


def test_framing_and_trailing_bytes():
    e = decode_err(HEADER + b"\x01\x05\x00")
    assert (e.kind, e.message) == (INVALID, "truncated Wasm")
    e = decode_err(HEADER + b"\x01")
    assert (e.kind, e.message) == (INVALID, "truncated Wasm")
    e = decode_err(HEADER + b"\x01\xff\xff\xff\xff\x7f")
    assert (e.kind, e.message) == (INVALID, "invalid u32 LEB128")
    e = decode_err(HEADER + section(1, b"\x00\x00"))
    assert (e.kind, e.message) == (INVALID, "trailing section bytes")
    e = decode_err(HEADER + section(3, b"\x01\x00"))
    assert (e.kind, e.message) == (INVALID, "function/code count mismatch")
    e = decode_err(HEADER + section(10, vec([uleb(1) + b"\x0b"])))
    assert (e.kind, e.message) == (INVALID, "function/code count mismatch")
    e = decode_err(HEADER + section(10, b"\x01\x05\x00"))
    assert (e.kind, e.message) == (INVALID, "bounded module decoder: truncated Wasm")


def test_function_type_indices_not_range_checked():
    src = HEADER + section(3, vec([uleb(99)])) + section(10, vec([b"\x02\x00\x0b"]))
    assert decode_module(src).functions == [99]


def test_multibyte_lebs_in_fast_paths():
    m = ModuleBuilder()
    m.type([I32], [])
    # names, indices and sizes written with non-minimal LEBs take the slow path and agree
    m.exports.append(b"\x96\x00wago_gpu.kernel.double\x00\x80\x00")
    m.exports.append(b"\x93\x00wago_gpu.cpu.double\x00\x81\x80\x00")
    m.functions = [0, 0]
    m.bodies = [b"\x82\x00\x00\x0b", b"\x02\x00\x0b"]
    src = m.build()
    mod = decode_module(src)
    assert mod.exports == {b"wago_gpu.kernel.double": 0, b"wago_gpu.cpu.double": 1}
    assert [src[s:e] for s, e in mod.bodies] == [b"\x00\x0b", b"\x00\x0b"]
    fn = HEADER + section(1, b"\x01\x60\x81\x00\x7f\x80\x00") + section(3, b"\x01\x80\x00") + \
        section(10, b"\x01\x02\x00\x0b")
    assert decode_module(fn).types == [(b"\x7f", b"")] and decode_module(fn).functions == [0]
