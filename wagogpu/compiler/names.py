"""Names from a module's `name` custom section, for error messages only.

A blocker that says `recursive call to function 131` or `global 0` leaves the reader to count
functions in a disassembly; the name section (which wat2wasm, clang, Zig and AssemblyScript write
unless stripped) has the names the source used. It is read only when a message is built, never to
decide anything: a missing, truncated or malformed section just gives no name.
"""
from __future__ import annotations

import enum

from .decoder import DecodedModule
from .reader import Reader, ReaderError

SECTION_NAME = b"name"


class NameKind(enum.IntEnum):
    """Subsections of the name section (the extended-name proposal's ids, which tools write)."""

    FUNCTION = 1
    GLOBAL = 7


def name_of(module: DecodedModule, kind: NameKind, index: int) -> str | None:
    """The name of function or global `index` (imports first), or None when the module has none."""
    for start, end in module.custom:
        try:
            found = _lookup(Reader(module.source, start, end), kind, index)
        except (ReaderError, UnicodeDecodeError):
            continue
        if found is not None:
            return found
    return None


def _lookup(r: Reader, kind: NameKind, index: int) -> str | None:
    if r.take(r.u32()) != SECTION_NAME:
        return None
    while r.remaining():
        sub, size = r.byte(), r.u32()
        if sub != kind:
            r.skip(size)
            continue
        for _ in range(r.u32()):
            item, name = r.u32(), r.take(r.u32())
            if item == index:
                return name.decode("utf-8")
        return None
    return None


def described(module: DecodedModule, kind: NameKind, index: int) -> str:
    """`function 131 ($gamma_pow)`, or `function 131` without a name."""
    name = name_of(module, kind, index)
    word = "function" if kind is NameKind.FUNCTION else "global"
    return f"{word} {index} (${name})" if name else f"{word} {index}"
