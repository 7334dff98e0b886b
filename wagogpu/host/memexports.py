"""Adds an export for every memory of a guest module, so the host can reach memories by index.

The ABI addresses guest memory by index (imported memories first, then defined ones), but
wasmtime-py only reaches a memory through an export. The host inspects the exact bytes the guest
gave it (the contract), then compiles this rewritten copy, which differs only in extra exports
named with a prefix no guest uses.
"""
from __future__ import annotations

from typing import Iterator

from ..compiler.reader import WASM_HEADER, Reader, ReaderError
from ..compiler.wasmencode import section
from ..compiler.wasmencode import uleb as uleb128

MEMORY_EXPORT_PREFIX = "wagogpu:memory:"
GLOBAL_EXPORT_PREFIX = "wagogpu:global:"
_EXPORT_SECTION = 7
_MEMORY_SECTION = 5
# Section ids that come before the export section in the standard order (tag 13 sits after memory).
_BEFORE_EXPORT = {1, 2, 3, 4, 5, 13, 6}


def memory_export_name(index: int) -> str:
    return f"{MEMORY_EXPORT_PREFIX}{index}"


def _sections(wasm: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(id, section start, payload start, end) of each section, read with the compiler's bounded
    reader; ValueError when the framing is malformed."""
    if wasm[:8] != WASM_HEADER:
        raise ValueError("not a core Wasm module")
    r = Reader(wasm, 8)
    try:
        while r.remaining():
            start = r.pos
            sid = r.byte()
            size = r.u32()
            body = r.skip(size)
            yield sid, start, body, r.pos
    except ReaderError as exc:
        raise ValueError(exc.message) from exc


def _export_section(existing: int, entries: bytes, extra: bytes, added: int) -> bytes:
    return section(_EXPORT_SECTION, uleb128(existing + added) + entries + extra)


def global_export_name(index: int) -> str:
    return f"{GLOBAL_EXPORT_PREFIX}{index}"


def add_memory_exports(wasm: bytes, memory_count: int, globals_: tuple[int, ...] = ()) -> bytes:
    """The module with exports memory_export_name(i) for i < memory_count, and global_export_name(g)
    for each g in globals_ (CPU kernels reach a shadow-stack pointer so); ValueError if unparsable."""
    if memory_count == 0 and not globals_:
        return wasm
    extra = b"".join(
        uleb128(len(name := memory_export_name(i).encode())) + name + b"\x02" + uleb128(i)
        for i in range(memory_count)) + b"".join(
        uleb128(len(name := global_export_name(g).encode())) + name + b"\x03" + uleb128(g) for g in globals_)
    memory_count += len(globals_)  # the count of exports added
    out = bytearray(WASM_HEADER)
    inserted = False
    for sid, start, body, end in _sections(wasm):
        if not inserted and sid == _EXPORT_SECTION:
            r = Reader(wasm, body, end)
            count = r.u32()
            out += _export_section(count, wasm[r.pos:end], extra, memory_count)
            inserted = True
            continue
        if not inserted and sid != 0 and sid not in _BEFORE_EXPORT:
            out += _export_section(0, b"", extra, memory_count)
            inserted = True
        out += wasm[start:end]
    if not inserted:
        out += _export_section(0, b"", extra, memory_count)
    return bytes(out)


def count_defined_memories(wasm: bytes) -> int:
    """Memories the module defines (its memory section's count); ValueError if unparsable."""
    for sid, _start, body, end in _sections(wasm):
        if sid == _MEMORY_SECTION:
            try:
                return Reader(wasm, body, end).u32()
            except ReaderError as exc:
                raise ValueError(exc.message) from exc
    return 0
