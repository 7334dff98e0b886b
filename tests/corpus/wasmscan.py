"""What a kernel's code uses, by blocker kind: a small Wasm reader for the eligibility report.

wagogpu's compiler names only a kernel's *first* blocker. To rank what would unlock the most
kernels, the report also lists every kind of construct a kernel uses outside the original GPU
subset, in its own body and in every defined function it calls (transitively): guest-memory loads
and stores, globals, calls, i64 and f64. This reader walks instruction immediates just far enough
to find them; it is a measuring tool for this corpus, not a validator.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class Kind(Enum):
    """The blocker kinds the report ranks (issue 17's list)."""

    MEMORY_LOAD = "guest-memory loads (static data and tables; stack frames at -O0)"
    DEFINED_CALL = "calls to defined functions (libm, helpers, call_indirect)"
    I64 = "i64 values and arithmetic, I64/U64 buffers"
    F64 = "f64 values and arithmetic, F64 buffers"
    GLOBALS = "globals (the shadow-stack pointer)"
    MEMORY_STORE = "guest-memory stores and bulk memory (stack frames)"
    OTHER = "other"

    @property
    def tag(self) -> str:
        return _TAGS[self]


_TAGS = {Kind.MEMORY_LOAD: "load", Kind.DEFINED_CALL: "call", Kind.I64: "i64", Kind.F64: "f64",
         Kind.GLOBALS: "global", Kind.MEMORY_STORE: "store", Kind.OTHER: "other"}


def _opcode_kinds() -> dict[int, Kind]:
    spans = {
        Kind.GLOBALS: [(0x23, 0x24)],
        Kind.MEMORY_LOAD: [(0x28, 0x35)],
        Kind.MEMORY_STORE: [(0x36, 0x3E)],
        Kind.OTHER: [(0x3F, 0x40)],  # memory.size, memory.grow
        Kind.I64: [(0x42, 0x42), (0x50, 0x5A), (0x79, 0x8A), (0xA7, 0xA7), (0xAC, 0xB1), (0xB4, 0xB5),
                   (0xB9, 0xBA), (0xBD, 0xBD), (0xBF, 0xBF), (0xC2, 0xC4)],
        Kind.F64: [(0x44, 0x44), (0x61, 0x66), (0x99, 0xA6), (0xAA, 0xAB), (0xB6, 0xB8), (0xBB, 0xBB),
                   (0xBE, 0xBE)],
    }
    return {op: kind for kind, ranges in spans.items() for lo, hi in ranges for op in range(lo, hi + 1)}


OPCODE_KINDS = _opcode_kinds()
# 0xfc sub-opcodes: saturating truncations by their types, then bulk memory and table operations.
FC_KINDS = {0: None, 1: None, 2: Kind.F64, 3: Kind.F64, 4: Kind.I64, 5: Kind.I64, 6: Kind.I64, 7: Kind.I64,
            **{sub: Kind.MEMORY_STORE for sub in range(8, 12)}, **{sub: Kind.OTHER for sub in range(12, 18)}}
FC_IMMEDIATES = {8: 2, 9: 1, 10: 2, 11: 1, 12: 2, 13: 1, 14: 2, 15: 1, 16: 1, 17: 1}
LOCAL_KINDS = {0x7E: Kind.I64, 0x7C: Kind.F64}
WIDE_INTRINSICS = {"I64": Kind.I64, "U64": Kind.I64, "F64": Kind.F64}


class Cursor:
    """Reads bytes and LEB128 numbers from a span of the module."""

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("truncated")
        self.pos += 1
        return self.data[self.pos - 1]

    def leb(self) -> int:
        """An unsigned LEB128 (signed immediates are only skipped, so their sign never matters)."""
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    def name(self) -> str:
        n = self.leb()
        self.pos += n
        return self.data[self.pos - n:self.pos].decode("utf-8", "replace")

    def skip_limits(self) -> None:
        flags = self.leb()
        self.leb()
        if flags & 1:
            self.leb()


@dataclass
class Function:
    """What one defined function uses directly: kinds, the kinds of its locals, its callees."""

    kinds: set[Kind] = field(default_factory=set)
    local_kinds: set[Kind] = field(default_factory=set)
    callees: set[int] = field(default_factory=set)  # function indices (imports included)


@dataclass
class Module:
    imports: list[tuple[str, str]] = field(default_factory=list)  # function imports: (module, name)
    types_of: list[int] = field(default_factory=list)  # defined functions' type indices
    exports: dict[str, int] = field(default_factory=dict)  # function exports: name -> function index
    bodies: list[tuple[int, int]] = field(default_factory=list)
    data: bytes = b""
    scanned: dict[int, Function] = field(default_factory=dict)  # by defined-function index


# What follows an import's kind byte: a table (element type, limits), a memory (limits), a global
# (value type, mutability) or a tag (attribute, type index).
IMPORT_DESCRIPTIONS: dict[int, tuple[Callable[[Cursor], object], ...]] = {
    1: (Cursor.byte, Cursor.skip_limits), 2: (Cursor.skip_limits,), 3: (Cursor.byte, Cursor.byte),
    4: (Cursor.byte, Cursor.leb)}


def _read_imports(c: Cursor, module: Module) -> None:
    for _ in range(c.leb()):
        names = (c.name(), c.name())
        kind = c.byte()
        if kind == 0:
            c.leb()
            module.imports.append(names)
        for step in IMPORT_DESCRIPTIONS.get(kind, ()):
            step(c)


def _read_code(c: Cursor, module: Module) -> None:
    for _ in range(c.leb()):
        size = c.leb()
        module.bodies.append((c.pos, c.pos + size))
        c.pos += size


def parse_module(data: bytes) -> Module:
    """The function imports, function exports and code bodies (other sections are skipped)."""
    module = Module(data=data)
    c = Cursor(data, 8, len(data))
    while c.pos < c.end:
        section, size = c.byte(), c.leb()
        body, c.pos = Cursor(data, c.pos, c.pos + size), c.pos + size
        if section == 2:
            _read_imports(body, module)
        elif section == 3:
            module.types_of = [body.leb() for _ in range(body.leb())]
        elif section == 7:
            for _ in range(body.leb()):
                name, kind, index = body.name(), body.byte(), body.leb()
                if kind == 0:
                    module.exports[name] = index
        elif section == 10:
            _read_code(body, module)
    return module


def _skip_immediates(c: Cursor, op: int) -> None:
    """Step over the immediates of the instruction `op` (its opcode byte already read)."""
    if op in (0x02, 0x03, 0x04):  # block type: 0x40, a value type, or a type index (s33)
        if c.data[c.pos] in (0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F):
            c.pos += 1
        else:
            c.leb()
    elif op == 0x0E:
        for _ in range(c.leb() + 1):
            c.leb()
    elif op in (0x0C, 0x0D, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x3F, 0x40, 0x41, 0x42, 0xD2):
        c.leb()
    elif op in (0x11, 0x13):
        c.leb(), c.leb()
    elif 0x28 <= op <= 0x3E:  # memarg: alignment (bit 6: a memory index follows), offset
        if c.leb() & 0x40:
            c.leb()
        c.leb()
    elif op == 0x43:
        c.pos += 4
    elif op == 0x44:
        c.pos += 8
    elif op == 0x1C:
        c.pos += c.leb()
    elif op == 0xD0:
        c.leb()


SIMPLE = frozenset({0x00, 0x01, 0x05, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1, *range(0x45, 0xC5)})
WITH_IMMEDIATES = frozenset({0x02, 0x03, 0x04, 0x0C, 0x0D, 0x0E, 0x11, 0x13, 0x1C, 0x20, 0x21, 0x22, 0x23, 0x24,
                             0x25, 0x26, *range(0x28, 0x45), 0xD0, 0xD2})


def scan_function(module: Module, defined: int) -> Function:
    """The kinds one defined function's locals and instructions use, and whom it calls (once per
    function: the Go kernels reach most of the Go runtime)."""
    if defined not in module.scanned:
        module.scanned[defined] = _scan(module, defined)
    return module.scanned[defined]


def _scan(module: Module, defined: int) -> Function:
    start, end = module.bodies[defined]
    c, fn = Cursor(module.data, start, end), Function()
    for _ in range(c.leb()):
        c.leb()
        kind = LOCAL_KINDS.get(c.byte())
        if kind is not None:
            fn.local_kinds.add(kind)
    fn.kinds |= fn.local_kinds
    while c.pos < c.end:
        op = c.byte()
        if op in (0x10, 0x12):
            fn.callees.add(c.leb())
            continue
        if op == 0xFC:
            sub = c.leb()
            for _ in range(FC_IMMEDIATES.get(sub, 0)):
                c.leb()
            found = FC_KINDS.get(sub, Kind.OTHER)
        elif op in SIMPLE or op in WITH_IMMEDIATES:
            _skip_immediates(c, op)
            found = OPCODE_KINDS.get(op)
            if op in (0x11, 0x13):
                found = Kind.DEFINED_CALL
        else:  # SIMD, GC, exceptions, threads: not decoded further
            fn.kinds.add(Kind.OTHER)
            break
        if found is not None:
            fn.kinds.add(found)
    return fn


def uses(module: Module, export: str) -> set[Kind]:
    """Every kind the export's function and the defined functions it reaches use; calls to
    defined functions count as DEFINED_CALL, 64-bit buffer intrinsics as I64/F64, management
    imports as OTHER."""
    imported = len(module.imports)
    seen: set[int] = set()
    todo, found = [module.exports[export]], set()
    while todo:
        index = todo.pop()
        if index in seen:
            continue
        seen.add(index)
        fn = scan_function(module, index - imported)
        found |= fn.kinds
        for callee in fn.callees:
            if callee >= imported:
                found.add(Kind.DEFINED_CALL)
                todo.append(callee)
            else:
                found |= _import_kinds(module.imports[callee])
    return found


def _import_kinds(names: tuple[str, str]) -> set[Kind]:
    namespace, name = names
    if namespace != "wago_gpu_v1":
        return {Kind.OTHER}
    if name.startswith(("readBuffer", "writeBuffer")):
        wide = WIDE_INTRINSICS.get(name.removeprefix("readBuffer").removeprefix("writeBuffer"))
        return {wide} if wide else set()
    return set() if name == "getBuffer" else {Kind.OTHER}


def local_kinds(module: Module, export: str) -> set[Kind]:
    """The kinds of the export's own declared locals (i64 -> I64, f64 -> F64)."""
    return scan_function(module, module.exports[export] - len(module.imports)).local_kinds
