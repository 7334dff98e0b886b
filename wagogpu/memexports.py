"""Adds an export for every memory of a guest module, so the host can reach memories by index.

The ABI addresses guest memory by index (imported memories first, then defined ones), but
wasmtime-py only reaches a memory through an export. The host inspects the exact bytes the guest
gave it (the contract), then compiles this rewritten copy, which differs only in extra exports
named with a prefix no guest uses.
"""
from __future__ import annotations

MEMORY_EXPORT_PREFIX = "wagogpu:memory:"
_EXPORT_SECTION = 7
# Section ids that come before the export section in the standard order (tag 13 sits after memory).
_BEFORE_EXPORT = {1, 2, 3, 4, 5, 13, 6}


def _read_u32(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(5):
        b = data[pos + i]
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos + i + 1
    raise ValueError("bad LEB128")


def _write_u32(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def memory_export_name(index: int) -> str:
    return f"{MEMORY_EXPORT_PREFIX}{index}"


def add_memory_exports(wasm: bytes, memory_count: int) -> bytes:
    """The module with exports memory_export_name(i) for i < memory_count; raises ValueError if unparsable."""
    if memory_count == 0:
        return wasm
    if wasm[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a core Wasm module")
    extra = b"".join(
        _write_u32(len(name := memory_export_name(i).encode())) + name + b"\x02" + _write_u32(i)
        for i in range(memory_count))
    pos = 8
    out = bytearray(wasm[:8])
    inserted = False
    while pos < len(wasm):
        sid = wasm[pos]
        size, body = _read_u32(wasm, pos + 1)
        end = body + size
        if end > len(wasm):
            raise ValueError("truncated section")
        if not inserted and sid == _EXPORT_SECTION:
            count, entries = _read_u32(wasm, body)
            payload = _write_u32(count + memory_count) + wasm[entries:end] + extra
            out += bytes([_EXPORT_SECTION]) + _write_u32(len(payload)) + payload
            inserted = True
        else:
            if not inserted and sid != 0 and sid not in _BEFORE_EXPORT:
                payload = _write_u32(memory_count) + extra
                out += bytes([_EXPORT_SECTION]) + _write_u32(len(payload)) + payload
                inserted = True
            out += wasm[pos:end]
        pos = end
    if not inserted:
        payload = _write_u32(memory_count) + extra
        out += bytes([_EXPORT_SECTION]) + _write_u32(len(payload)) + payload
    return bytes(out)


def count_memories(wasm: bytes) -> int:
    """Imported plus defined memories, from the import and memory sections; ValueError if unparsable."""
    if wasm[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a core Wasm module")
    pos = 8
    defined = 0
    while pos < len(wasm):
        sid = wasm[pos]
        size, body = _read_u32(wasm, pos + 1)
        if sid == 5:
            defined, _ = _read_u32(wasm, body)
        pos = body + size
    return defined
