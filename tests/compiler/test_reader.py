"""Bounded LEB128 reader (docs/design/compiler.md §1.1)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wagogpu.compiler import CompileError, CompileErrorKind
from wagogpu.compiler import reader as lim
from wagogpu.compiler.reader import Reader, ReaderError
from wasmgen import sleb, uleb


def u32(data: bytes) -> int:
    return Reader(data).u32()


def test_u32_basic_and_non_minimal():
    assert u32(b"\x00") == 0
    assert u32(b"\x7f") == 127
    assert u32(b"\x80\x01") == 128
    assert u32(b"\x80\x00") == 0  # non-minimal encodings are accepted
    assert u32(b"\xff\xff\xff\xff\x0f") == 0xFFFFFFFF
    r = Reader(b"\x80\x80\x80\x80\x00\x05")
    assert r.u32() == 0 and r.pos == 5


@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff\x1f", b"\x80\x80\x80\x80\x80\x00", b"\xff\xff\xff\xff\x10"])
def test_u32_fifth_byte_over_0x0f_is_invalid(data):
    with pytest.raises(ReaderError) as e:
        u32(data)
    assert e.value.message == "invalid u32 LEB128"


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff\xff\xff"])
def test_u32_truncated(data):
    with pytest.raises(ReaderError) as e:
        u32(data)
    assert e.value.message == "truncated Wasm"


def test_count_limit_is_typed_limit():
    assert Reader(uleb(lim.MAX_ENTRIES)).count() == lim.MAX_ENTRIES
    with pytest.raises(CompileError) as e:
        Reader(uleb(lim.MAX_ENTRIES + 1)).count()
    assert e.value.kind == CompileErrorKind.LIMIT and e.value.message == "section entry limit exceeded"


def test_signed_leb32():
    def s32(data: bytes) -> int:
        return Reader(data).leb(32, True)

    assert s32(b"\x7f") == -1
    assert s32(b"\x3f") == 63
    assert s32(b"\xc0\x00") == 64
    assert s32(b"\xff\xff\xff\xff\x07") == 0x7FFFFFFF
    assert s32(b"\x80\x80\x80\x80\x78") == -(1 << 31)
    assert s32(b"\xff\xff\xff\xff\x7f") == -1  # non-minimal but sign-consistent
    for bad in (b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x70", b"\xff\xff\xff\xff\x4f"):
        with pytest.raises(ReaderError) as e:
            s32(bad)
        assert e.value.message == "signed LEB128 overflow"
    with pytest.raises(ReaderError) as e:
        s32(b"\x80\x80\x80\x80\x80\x00")
    assert e.value.message == "unterminated LEB128"


def test_unsigned_leb64_and_heap_type():
    assert Reader(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").leb(64, False) == (1 << 64) - 1
    with pytest.raises(ReaderError) as e:
        Reader(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02").leb(64, False)
    assert e.value.message == "LEB128 overflow"
    with pytest.raises(ReaderError) as e:
        Reader(b"\xff\xff\xff\xff\x1f").leb(32, False)
    assert e.value.message == "LEB128 overflow"
    assert Reader(b"\x70").leb(33, True) == -16  # abbreviated heap type func
    assert Reader(b"\xff\xff\xff\xff\x0f").leb(33, True) == 0xFFFFFFFF
    with pytest.raises(ReaderError):
        Reader(b"\xff\xff\xff\xff\x2f").leb(33, True)


@given(st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1))
def test_signed_roundtrip(v):
    assert Reader(sleb(v)).leb(32, True) == v


@given(st.integers(min_value=0, max_value=(1 << 32) - 1))
def test_unsigned_roundtrip(v):
    assert Reader(uleb(v)).u32() == v
    assert Reader(uleb(v)).leb(32, False) == v


@given(st.binary(max_size=12), st.sampled_from([(32, True), (32, False), (33, True), (64, False)]))
def test_leb_only_reader_errors(data, form):
    bits, signed = form
    try:
        v = Reader(data).leb(bits, signed)
    except ReaderError:
        return
    if signed:
        assert -(1 << (bits - 1)) <= v < 1 << (bits - 1)
    else:
        assert 0 <= v < 1 << bits


@given(st.binary(max_size=8))
def test_i32_is_the_signed_leb32_pattern(data):
    """Reader.i32 (one-byte case inline) reads exactly what leb(32, True) reads, as a u32 pattern."""
    fast, generic = Reader(data), Reader(data)
    try:
        expected = generic.leb(32, True) & 0xFFFFFFFF
    except ReaderError as e:
        with pytest.raises(ReaderError) as got:
            fast.i32()
        assert got.value.message == e.message
        return
    assert fast.i32() == expected and fast.pos == generic.pos


def test_memarg_with_and_without_a_memory_index():
    r = Reader(b"\x02\x10" + b"\x42\x03\x80\x01" + b"\x82\x00\x05")
    assert r.memarg() == (0, 2, 16)  # align 2, offset 16, memory 0 implied
    assert r.memarg() == (3, 2, 128)  # bit 6 of the flags: memory 3 follows
    assert r.memarg() == (0, 2, 5) and r.remaining() == 0  # a padded alignment field
    with pytest.raises(ReaderError):
        Reader(b"\x40").memarg()  # a memory index announced but missing


@pytest.mark.parametrize("value_type, bits, want", [
    (0x7F, 0xFFFFFFFF, b"\x41\x7f"), (0x7F, -1, b"\x41\x7f"), (0x7F, 64, b"\x41\xc0\x00"),
    (0x7E, 1 << 63, b"\x42" + sleb(-(1 << 63))), (0x7D, 0x7FC00001, b"\x43\x01\x00\xc0\x7f"),
    (0x7C, -1, b"\x44" + b"\xff" * 8),
])
def test_a_constant_is_encoded_from_its_bit_pattern(value_type, bits, want):
    from wagogpu.compiler.wasmencode import const
    assert const(value_type, bits) == want
