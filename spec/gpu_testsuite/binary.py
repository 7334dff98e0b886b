"""Just enough of the Wasm binary format to take functions out of a spec module and build guests.

Decoding covers the sections the runner needs (type, import, function, export, code); the others
are skipped by their sizes. Encoding helpers write LEB128 numbers, vectors and sections. Function
types are kept as their raw bytes so a guest can copy them unchanged: a multi-value block type in a
spliced body then still names the right type (guest.py appends its own types after them).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

# The LEB128, name, vector and section encoders are the CPU-kernel backend's (one encoder for the repo).
from wagogpu.compiler.wasmencode import name, section, uleb, vector

MAGIC = b"\x00asm\x01\x00\x00\x00"
FUNC_TYPE = 0x60
EXTERNAL_FUNC = 0


class Section(enum.IntEnum):
    TYPE = 1
    IMPORT = 2
    FUNCTION = 3
    MEMORY = 5
    EXPORT = 7
    CODE = 10


class ValType(enum.IntEnum):
    I32 = 0x7F
    I64 = 0x7E
    F32 = 0x7D
    F64 = 0x7C


class BinaryError(ValueError):
    """Bytes the runner's decoder does not accept (it reads only what wasmtime already validated)."""


class Reader:
    """A cursor over bytes with the LEB128 reads the format needs."""

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise BinaryError("truncated Wasm")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise BinaryError("truncated Wasm")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def leb(self, signed: bool = False) -> int:
        """One LEB128 number (wasmtime validated the module, so no length checks are needed)."""
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value - (1 << shift) if signed and b & 0x40 else value

    def uleb(self) -> int:
        return self.leb()

    def sleb(self) -> int:
        return self.leb(signed=True)

    def name(self) -> str:
        return self.take(self.uleb()).decode("utf-8")

    @property
    def done(self) -> bool:
        return self.pos >= self.end


def func_type(params: tuple[int, ...], results: tuple[int, ...]) -> bytes:
    return bytes([FUNC_TYPE]) + vector([bytes([p]) for p in params]) + vector([bytes([r]) for r in results])


@dataclass(frozen=True, slots=True)
class FuncType:
    params: tuple[int, ...]
    results: tuple[int, ...]
    raw: bytes


@dataclass(frozen=True, slots=True)
class Body:
    locals: tuple[tuple[int, int], ...]  # (count, value type) groups as declared
    code: bytes  # the instructions, final `end` included


@dataclass(slots=True)
class DecodedModule:
    types: list[FuncType] = field(default_factory=list)
    imported_funcs: int = 0
    func_types: list[int] = field(default_factory=list)  # type index per defined function
    exports: dict[str, int] = field(default_factory=dict)  # function exports -> function index
    bodies: list[Body] = field(default_factory=list)


def _types(r: Reader, m: DecodedModule) -> None:
    for _ in range(r.uleb()):
        start = r.pos
        if r.byte() != FUNC_TYPE:
            raise BinaryError("only plain function types are supported")
        params = tuple(r.byte() for _ in range(r.uleb()))
        results = tuple(r.byte() for _ in range(r.uleb()))
        m.types.append(FuncType(params, results, r.data[start:r.pos]))


def _imports(r: Reader, m: DecodedModule) -> None:
    for _ in range(r.uleb()):
        r.name()
        r.name()
        kind = r.byte()
        if kind != EXTERNAL_FUNC:
            raise BinaryError("only function imports are supported")
        r.uleb()
        m.imported_funcs += 1


def _functions(r: Reader, m: DecodedModule) -> None:
    m.func_types = [r.uleb() for _ in range(r.uleb())]


def _exports(r: Reader, m: DecodedModule) -> None:
    for _ in range(r.uleb()):
        export, kind, index = r.name(), r.byte(), r.uleb()
        if kind == EXTERNAL_FUNC:
            m.exports[export] = index


def _code(r: Reader, m: DecodedModule) -> None:
    for _ in range(r.uleb()):
        size = r.uleb()
        end = r.pos + size
        body = Reader(r.data, r.pos, end)
        groups = tuple((body.uleb(), body.byte()) for _ in range(body.uleb()))
        m.bodies.append(Body(groups, r.data[body.pos:end]))
        r.pos = end


_SECTION_READERS = {Section.TYPE: _types, Section.IMPORT: _imports, Section.FUNCTION: _functions,
                    Section.EXPORT: _exports, Section.CODE: _code}


def decode_module(wasm: bytes) -> DecodedModule:
    """Types, function imports, defined functions, function exports and bodies of a valid module."""
    if not wasm.startswith(MAGIC):
        raise BinaryError("not a Wasm binary")
    r = Reader(wasm, len(MAGIC))
    m = DecodedModule()
    while not r.done:
        sid = r.byte()
        size = r.uleb()
        end = r.pos + size
        reader = _SECTION_READERS.get(sid)  # type: ignore[call-overload]
        if reader is not None:
            reader(Reader(wasm, r.pos, end), m)
        r.pos = end
    return m
