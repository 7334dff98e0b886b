"""Bounded module decoder of the buffer compiler (docs/design/compiler.md §1.3.2, docs/design/abi.md §6.2).

It reads exactly what kernel selection and lowering need (types, function imports classified
against the ABI table, function type indices, function exports, memory declarations and code
body offsets) and skips everything else. It is not a validator: wasmtime validates the module.
Any rejection here leaves the whole module contract unverified, whatever its kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from . import reader as lim
from .contract import CompileError, CompileErrorKind, MemoryDecl
from .intrinsics import ABI_MODULE_BYTES, INTRINSICS_BY_NAME, Intrinsic
from .reader import MAX_ENTRIES, TRUNCATED, Reader, ReaderError, entry_limit_error
from .statics import GlobalDecl, Statics, read_data, read_globals

INVALID = CompileErrorKind.INVALID_CONTRACT

# Section id -> rank; ranks must strictly increase (tag 13 sits after memory, data-count 12 before code).
SECTION_RANK: dict[int, int] = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

# Value-type bytes: 1 = plain, 2 = followed by a signed-33 heap type (ref / ref null).
_VALTYPE = bytearray(256)
for _b in (0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F, 0x6E, 0x6D, 0x6C, 0x6B, 0x6A, 0x69, 0x68, 0x67, 0x66, 0x65,
           0x78, 0x77):
    _VALTYPE[_b] = 1
_VALTYPE[0x63] = _VALTYPE[0x64] = 2
VALTYPE_KIND = bytes(_VALTYPE)

TAG_REC, TAG_SUB, TAG_SUB_FINAL = 0x4E, 0x50, 0x4F
TAG_FUNC, TAG_ARRAY, TAG_STRUCT = 0x60, 0x5E, 0x5F
LIMIT_FLAG_MAX, LIMIT_FLAG_SHARED, LIMIT_FLAG_64 = 1, 2, 4

Signature = tuple[bytes, bytes]  # (param value-type bytes, result value-type bytes)


class FuncImport(NamedTuple):
    type_index: int
    in_namespace: bool  # module name is exactly wago_gpu_v1
    intrinsic: Intrinsic | None  # the ABI row whose name the field equals, else None
    bad_signature: bool  # known name, but its declared type is not the canonical one


_new_import = tuple.__new__  # builds a FuncImport from a 4-tuple without the Python-level __new__


@dataclass(slots=True)
class DecodedModule:
    source: bytes
    types: list[Signature | None] = field(default_factory=list)  # None: a GC struct/array type
    func_imports: list[FuncImport] = field(default_factory=list)
    functions: list[int] = field(default_factory=list)  # type index per defined function
    exports: dict[bytes, int] = field(default_factory=dict)  # function exports only
    memories: list[MemoryDecl] = field(default_factory=list)  # imported first, then defined
    bodies: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each body in source
    statics: Statics = field(default_factory=lambda: Statics([], []))  # globals and data segments
    custom: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each custom section (names.py)

    def function_type(self, index: int) -> Signature | None:
        """Signature of function `index` (imports first), or None when it has none."""
        n_imports = len(self.func_imports)
        if index < n_imports:
            type_index = self.func_imports[index].type_index
        elif index - n_imports < len(self.functions):
            type_index = self.functions[index - n_imports]
        else:
            return None
        return self.types[type_index] if type_index < len(self.types) else None


def _fail(message: str) -> ReaderError:
    return ReaderError(message)


# The section parsers below keep the cursor in a local `pos` and read one-byte LEB128 values (the
# overwhelmingly common case) inline; anything longer goes through Reader. Each parser returns the
# position where it stopped so the caller can reject trailing bytes. (The inline copies are on
# purpose: folding them into _u32_at and a length-prefixed-bytes helper made decoding 21-30% slower,
# 52.8 -> 64 us for the benchmark guest, 112 -> 145 us for the all-imports test module.)


def _u32_at(r: Reader, pos: int) -> tuple[int, int]:
    """(value, next position) of a u32 LEB128 at pos: a one-byte value inline, else via the
    bounded reader."""
    if pos < r.end:
        b = r.data[pos]
        if b < 0x80:
            return b, pos + 1
    r.pos = pos
    value = r.u32()
    return value, r.pos


def _span_at(r: Reader, pos: int) -> tuple[int, int]:
    """(start, end) of a size-prefixed span at pos (a name or a body), checked against the section."""
    size, pos = _u32_at(r, pos)
    if size > r.end - pos:
        raise _fail(TRUNCATED)
    return pos, pos + size


def _count_at(r: Reader, pos: int) -> tuple[int, int]:
    """(count, next position) at pos; counts above MAX_ENTRIES raise CompileError(LIMIT)."""
    value, pos = _u32_at(r, pos)
    if value > MAX_ENTRIES:
        raise entry_limit_error()
    return value, pos


def _valtype(r: Reader) -> int:
    b = r.byte()
    kind = VALTYPE_KIND[b]
    if kind == 1:
        return b
    if kind == 0:
        raise _fail(f"unsupported value type 0x{b:x}")
    r.leb(33, True)  # heap type of (ref null? ht)
    return b


_PLAIN_VALTYPES = bytes(b for b in range(256) if VALTYPE_KIND[b] == 1)


def _valtypes(r: Reader, pos: int) -> tuple[bytes, int]:
    """A value-type vector at pos, one byte per type (the leading byte for ref types)."""
    data, end = r.data, r.end
    n, pos = _count_at(r, pos)
    if n <= end - pos:  # fast path: n plain one-byte types
        chunk = data[pos:pos + n]
        if not chunk.translate(None, _PLAIN_VALTYPES):
            return chunk, pos + n
    r.pos = pos
    sig = bytes([_valtype(r) for _ in range(n)])
    return sig, r.pos


_MEMORY_DECLS = {(flags, imported): MemoryDecl(is64=bool(flags & LIMIT_FLAG_64), shared=bool(flags & LIMIT_FLAG_SHARED),
                                                imported=imported) for flags in range(8) for imported in (False, True)}


def _limits(r: Reader, imported: bool) -> MemoryDecl:
    flags = r.u32()
    if flags & ~(LIMIT_FLAG_MAX | LIMIT_FLAG_SHARED | LIMIT_FLAG_64):
        raise _fail("unsupported memory limits")
    data, pos = r.data, r.pos
    for _ in range(2 if flags & LIMIT_FLAG_MAX else 1):
        if pos < r.end and data[pos] < 0x80:  # one-byte minimum / maximum
            pos += 1
            r.pos = pos
        else:
            r.leb(64 if flags & LIMIT_FLAG_64 else 32, False)
            pos = r.pos
    return _MEMORY_DECLS[flags, imported]


def _name(r: Reader) -> bytes:
    return r.take(r.u32())


def _subtype(r: Reader, m: DecodedModule, tag: int) -> None:
    if len(m.types) >= lim.MAX_TYPES:
        raise CompileError(CompileErrorKind.LIMIT, "expanded type limit")
    if tag == TAG_SUB or tag == TAG_SUB_FINAL:
        for _ in range(r.count()):
            r.u32()  # supertype index
        tag = r.byte()
    if tag == TAG_FUNC:
        params, pos = _valtypes(r, r.pos)
        results, r.pos = _valtypes(r, pos)
        m.types.append((params, results))
    elif tag == TAG_ARRAY:
        _valtype(r)
        r.byte()  # mutability
        m.types.append(None)
    elif tag == TAG_STRUCT:
        for _ in range(r.count()):
            _valtype(r)
            r.byte()
        m.types.append(None)
    else:
        raise _fail("unsupported composite type")


def _type_section(r: Reader, m: DecodedModule) -> None:
    data, end = r.data, r.end
    types = m.types
    n, pos = _count_at(r, r.pos)
    max_types = lim.MAX_TYPES
    plain = _PLAIN_VALTYPES
    for _ in range(n):
        if pos >= end:
            raise _fail(TRUNCATED)
        tag = data[pos]
        if tag == TAG_FUNC and len(types) < max_types and end - pos > 2:
            # fast path: a function type whose vectors have one-byte counts and plain types
            n_params = data[pos + 1]
            q = pos + 2 + n_params
            if n_params < 0x80 and q < end:
                n_results = data[q]
                stop = q + 1 + n_results
                if n_results < 0x80 and stop <= end:
                    params = data[pos + 2:q]
                    results = data[q + 1:stop]
                    if not (params + results).translate(None, plain):
                        types.append((params, results))
                        pos = stop
                        continue
        r.pos = pos + 1
        if tag == TAG_REC:
            for _ in range(r.count()):
                _subtype(r, m, r.byte())
        else:
            _subtype(r, m, tag)
        pos = r.pos
    r.pos = pos


def _import_section(r: Reader, m: DecodedModule) -> None:
    data, end = r.data, r.end
    types = m.types
    func_imports = m.func_imports
    intrinsics = INTRINSICS_BY_NAME
    n, pos = _count_at(r, r.pos)
    for _ in range(n):
        start, pos = _span_at(r, pos)
        module = data[start:pos]
        start, pos = _span_at(r, pos)
        name = data[start:pos]
        if pos >= end:
            raise _fail(TRUNCATED)
        kind = data[pos]
        pos += 1
        if kind == 0:
            type_index, pos = _u32_at(r, pos)
            intrinsic = intrinsics.get(name)
            bad = False
            if intrinsic is not None:
                sig = types[type_index] if type_index < len(types) else None
                bad = sig is None or sig[0] != intrinsic.params or sig[1] != intrinsic.results
            func_imports.append(_new_import(FuncImport, (type_index, module == ABI_MODULE_BYTES, intrinsic, bad)))
            continue
        r.pos = pos
        if kind == 1:
            _valtype(r)
            _limits(r, True)
        elif kind == 2:
            m.memories.append(_limits(r, True))
        elif kind == 3:
            wtype = _valtype(r)
            m.statics.globals.append(GlobalDecl(wtype, r.byte() == 1, True))
        elif kind == 4:
            r.byte()  # tag attribute
            r.u32()
        else:
            raise _fail("unsupported import kind")
        pos = r.pos
    r.pos = pos


def _function_section(r: Reader, m: DecodedModule) -> None:
    data, end = r.data, r.end
    n, pos = _count_at(r, r.pos)
    if n <= end - pos:
        chunk = data[pos:pos + n]
        if max(chunk, default=0) < 0x80:  # every index is one byte
            m.functions = list(chunk)
            r.pos = pos + n
            return
    r.pos = pos
    m.functions = [r.u32() for _ in range(n)]


def _memory_section(r: Reader, m: DecodedModule) -> None:
    for _ in range(r.count()):
        m.memories.append(_limits(r, False))


def _export_section(r: Reader, m: DecodedModule) -> None:
    data, end = r.data, r.end
    exports = m.exports
    n, pos = _count_at(r, r.pos)
    for _ in range(n):
        start, pos = _span_at(r, pos)
        name = data[start:pos]
        if pos >= end:
            raise _fail(TRUNCATED)
        kind = data[pos]
        index, pos = _u32_at(r, pos + 1)
        if kind == 0:
            if name in exports:
                raise _fail("duplicate export")
            exports[name] = index
    r.pos = pos


def _code_section(r: Reader, m: DecodedModule) -> None:
    bodies = m.bodies
    n, pos = _count_at(r, r.pos)
    for _ in range(n):
        span = _span_at(r, pos)
        bodies.append(span)
        pos = span[1]
    r.pos = pos


def _global_section(r: Reader, m: DecodedModule) -> None:
    read_globals(r, m.statics)


def _data_section(r: Reader, m: DecodedModule) -> None:
    read_data(r, m.statics)


_PARSERS = {1: _type_section, 2: _import_section, 3: _function_section, 5: _memory_section,
            6: _global_section, 7: _export_section, 10: _code_section, 11: _data_section}


def decode_module(source: bytes) -> DecodedModule:
    """Decode `source` once; raises CompileError for any module the contract cannot rest on."""
    if not isinstance(source, bytes):  # names become dict keys: they must be immutable bytes
        source = memoryview(source).tobytes()
    if len(source) > lim.MAX_MODULE_BYTES:
        raise CompileError(CompileErrorKind.LIMIT, "module exceeds decoder byte limit")
    if len(source) < 8 or source[:8] != lim.WASM_HEADER:
        raise CompileError(INVALID, "invalid Wasm header")
    m = DecodedModule(source)
    r = Reader(source, 8)  # the outer framing
    sr = Reader(source)  # one section at a time
    last_rank = 0
    end = len(source)
    pos = 8
    while pos < end:
        section_id = source[pos]
        pos += 1
        if pos < end and source[pos] < 0x80:
            size = source[pos]
            pos += 1
        else:
            try:
                size, pos = _u32_at(r, pos)
            except ReaderError as e:
                raise CompileError(INVALID, e.message) from None
        if size > end - pos:
            raise CompileError(INVALID, TRUNCATED)
        start = pos
        pos += size
        if section_id == 0:
            m.custom.append((start, pos))  # may appear anywhere; read only for error messages (names.py)
            continue
        rank = SECTION_RANK.get(section_id, 0)
        if rank <= last_rank:
            raise CompileError(CompileErrorKind.UNSUPPORTED, "unsupported section order")
        last_rank = rank
        parse = _PARSERS.get(section_id)
        if parse is None:
            continue
        sr.pos = start
        sr.end = pos
        try:
            parse(sr, m)
        except ReaderError as e:
            raise CompileError(INVALID, "bounded module decoder: " + e.message) from None
        if sr.pos != pos:
            raise CompileError(INVALID, "trailing section bytes")
    if len(m.bodies) != len(m.functions):
        raise CompileError(INVALID, "function/code count mismatch")
    return m
