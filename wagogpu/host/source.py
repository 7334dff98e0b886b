"""Module sources: what Host.compile accepts and how it tells Wasm from WAT from neither.

A source is Wasm bytes, WAT text (a str), or a path (os.PathLike) to a file holding either. Bytes
are Wasm when they start with the magic ``\\0asm``; bytes that are UTF-8 text whose first token
opens a WAT form are WAT; anything else is "not a Wasm module" (not "invalid WAT": a text file
named ``.wasm`` was reported as bad WAT, which sent users to look for a syntax error). A file named
``.wasm`` must be binary and one named ``.wat`` text. WAT syntax errors keep wasmtime's line,
column and caret (ModuleError.line/.column/.excerpt) while the message stays one line.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Union

import wasmtime

from ..errors import ModuleError

WASM_MAGIC = b"\0asm"
#: The largest module file read (Wasm or WAT).
MAX_SOURCE_BYTES = 256 << 20
BINARY_SUFFIXES = frozenset({".wasm"})
TEXT_SUFFIXES = frozenset({".wat", ".wast"})
#: What Host.compile accepts.
Source = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]

_LOCATION = re.compile(r"-->\s*.*?:(\d+):(\d+)\s*$")
_EXCERPT = re.compile(r"^\s*\d*\s*\|")
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|;;[^\n]*(?:\n|\Z)|\(;.*?;\))*", re.DOTALL)


def to_wasm(source: Source) -> bytes:
    """Binary Wasm from bytes, WAT text or a path; ModuleError (one line) when it is neither."""
    if isinstance(source, os.PathLike):
        return _from_file(Path(source))
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    if isinstance(source, bytes):
        return _from_bytes(source)
    if isinstance(source, str):
        return wat_to_wasm(source)
    raise ModuleError(f"not a Wasm module: expected bytes, WAT text or a path, got {type(source).__name__}")


def read_source(path: Path) -> bytes:
    """A module file's bytes, read at most MAX_SOURCE_BYTES far (/dev/zero or a huge file is
    refused, not read until memory runs out); OSError names the file."""
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise ModuleError(f"{path}: not a module file: larger than the {MAX_SOURCE_BYTES >> 20} MiB limit "
                          "on a module (MAX_SOURCE_BYTES)")
    return data


def _from_file(path: Path) -> bytes:
    return file_to_wasm(path, read_source(path))


def file_to_wasm(path: Path, data: bytes) -> bytes:
    """Binary Wasm from the bytes of the file at path (its suffix says Wasm or WAT)."""
    suffix = path.suffix.lower()
    try:
        if suffix in BINARY_SUFFIXES and not data.startswith(WASM_MAGIC):
            raise ModuleError(f"not a Wasm module: a {suffix} file must start with \\0asm, "
                              f"this one starts with {data[:8]!r}")
        if suffix in TEXT_SUFFIXES:
            if data.startswith(WASM_MAGIC):
                raise ModuleError(f"a {suffix} file must hold WAT text, this one holds Wasm bytes")
            return wat_to_wasm(_decode(data))
        return _from_bytes(data)
    except ModuleError as exc:
        raise ModuleError(f"{path}: {exc}", line=exc.line, column=exc.column, excerpt=exc.excerpt) from None


def _from_bytes(data: bytes) -> bytes:
    if data.startswith(WASM_MAGIC):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not looks_like_wat(text):
        raise ModuleError(f"not a Wasm module: the bytes start with {data[:8]!r}, "
                          "neither the Wasm magic \\0asm nor WAT text")
    return wat_to_wasm(text)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleError(f"invalid WAT: not UTF-8 text (byte {exc.start})") from None


def looks_like_wat(text: str) -> bool:
    """Whether text's first token, after blanks and comments, opens a WAT form."""
    skipped = _LEADING_COMMENTS.match(text)
    return text[skipped.end() if skipped else 0:].startswith("(")


def wat_to_wasm(text: str) -> bytes:
    try:
        return bytes(wasmtime.wat2wasm(text))
    except wasmtime.WasmtimeError as exc:
        raise wat_error(str(exc), text) from None


def wat_error(message: str, text: str) -> ModuleError:
    """A ModuleError from wasmtime's WAT error: its first line, where, and its caret excerpt."""
    lines = message.splitlines()
    what = lines[0].strip() if lines else "syntax error"
    line = column = None
    excerpt: list[str] = []
    for raw in lines[1:]:
        found = _LOCATION.search(raw)
        if found:
            line, column = int(found.group(1)), int(found.group(2))
        elif _EXCERPT.match(raw) and raw.strip() != "|":
            excerpt.append(raw.rstrip())
    where = f" at line {line}, column {column}" if line is not None else ""
    hint = ""
    if "\n" not in text and not looks_like_wat(text) and text.strip().endswith((".wasm", ".wat")):
        hint = f" (to compile a file, pass pathlib.Path({text.strip()!r}))"
    return ModuleError(f"invalid WAT{where}: {what}{hint}", line=line, column=column, excerpt="\n".join(excerpt))
