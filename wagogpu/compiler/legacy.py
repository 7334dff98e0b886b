"""Legacy scalar compiler: an exported (f32) -> f32 function to WGSL (docs/design/compiler.md §1.2, §2.2).

The reference returns untyped errors here; in Python every failure is a CompileError whose
message is the reference's text and whose kind is our best reading of it (LIMIT for bounds,
UNSUPPORTED for features outside the subset, INVALID_CONTRACT for malformed input). Callers only
record the message and fall back to the CPU.
"""
from __future__ import annotations

from . import reader as lim
from .contract import CompileError, CompileErrorKind
from .reader import Reader, ReaderError

INVALID = CompileErrorKind.INVALID_CONTRACT
UNSUPPORTED = CompileErrorKind.UNSUPPORTED
LIMIT = CompileErrorKind.LIMIT

BAD_INPUT = "invalid module header, size, or kernel name"
F32 = 0x7D
OP_LOCAL_GET, OP_F32_CONST, OP_END = 0x20, 0x43, 0x0B
ARITHMETIC = {0x92: "+", 0x93: "-", 0x94: "*"}

MAX_BINDING = 65535  # WebGPU's largest binding number is below this (maxBindingsPerBindGroup is at most 1000)
_ENTRY_TAIL = (
    "@group(0) @binding({binding}) var<storage, read_write> values: array<f32>;\n"
    "@compute @workgroup_size(256)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n"
    "  if (id.x < arrayLength(&values)) {{ values[id.x] = kernel(values[id.x]); }}\n"
    "}}\n"
)


def entry_tail(storage_binding: int = 0) -> str:
    """The fixed entry point (docs/design/compiler.md §2.2) with the value array at `storage_binding`."""
    return _ENTRY_TAIL.format(binding=storage_binding)


ENTRY_TAIL = entry_tail()  # the reference's text: the array at binding 0

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}


def go_quote(s: str) -> str:
    """A double-quoted string as Go's %q writes it, so messages match the reference's."""
    out = ['"']
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _err(kind: CompileErrorKind, message: str) -> CompileError:
    return CompileError(kind, message)


def compile_legacy_body(body: bytes, storage_binding: int = 0) -> str:
    """WGSL (kernel function plus entry point) for one code-section body (compileBody)."""
    if len(body) > lim.MAX_BODY_BYTES:
        raise _err(LIMIT, "kernel is too large")
    r = Reader(body)
    try:
        if r.count() != 0:
            raise _err(UNSUPPORTED, "kernel locals are unsupported; use only parameter 0")
        lines = ["fn kernel(x: f32) -> f32 {\n"]
        stack: list[int] = []
        pc = 0
        max_pc = lim.MAX_INSTRUCTIONS
        while r.pos < r.end:
            if pc >= max_pc:
                raise _err(LIMIT, "too many kernel instructions")
            op = r.byte()
            if op == OP_LOCAL_GET:
                if r.u32() != 0:
                    raise _err(UNSUPPORTED, "only local.get 0 is supported")
                lines.append(f"  let t{pc}: f32 = x;\n")
            elif op == OP_F32_CONST:
                lines.append(f"  let t{pc}: f32 = bitcast<f32>(0x{r.u32_le():08x}u);\n")
            elif op in ARITHMETIC:
                if len(stack) < 2:
                    raise _err(INVALID, "kernel stack underflow")
                right = stack.pop()
                left = stack.pop()
                lines.append(f"  let t{pc}: f32 = t{left} {ARITHMETIC[op]} t{right};\n")
            elif op == OP_END:
                if len(stack) != 1 or r.pos != r.end:
                    raise _err(INVALID, "invalid final kernel stack or trailing code")
                lines.append(f"  return t{stack[0]};\n}}\n")
                lines.append(ENTRY_TAIL if storage_binding == 0 else entry_tail(storage_binding))
                return "".join(lines)
            else:
                raise _err(UNSUPPORTED, f"unsupported kernel opcode 0x{op:02x}")
            stack.append(pc)
            pc += 1
    except ReaderError as e:
        raise _err(INVALID, e.message) from None
    raise _err(INVALID, "missing kernel end")


class _LegacyModule:
    __slots__ = ("types_f32", "n_types", "n_imports", "functions", "kernel_index", "bodies")

    def __init__(self) -> None:
        self.types_f32: list[bool] = []  # per type: exactly [f32] -> [f32]
        self.n_imports = 0
        self.functions: list[int] = []
        self.kernel_index: int | None = None
        self.bodies: list[tuple[int, int]] = []


def _name(r: Reader) -> bytes:
    return r.take(r.u32())


def _types(r: Reader, m: _LegacyModule, _: bytes) -> None:
    for _i in range(r.count()):
        if r.byte() != 0x60:
            raise _err(UNSUPPORTED, "only function types are supported")
        params = r.take(r.count())
        results = r.take(r.count())
        m.types_f32.append(params == b"\x7d" and results == b"\x7d")


def _imports(r: Reader, m: _LegacyModule, _: bytes) -> None:
    for _i in range(r.count()):
        _name(r)
        _name(r)
        if r.byte() != 0:
            raise _err(UNSUPPORTED, "only function imports are supported")
        if r.u32() >= len(m.types_f32):
            raise _err(INVALID, "invalid imported function type")
        m.n_imports += 1


def _functions(r: Reader, m: _LegacyModule, _: bytes) -> None:
    for _i in range(r.count()):
        type_index = r.u32()
        if type_index >= len(m.types_f32):
            raise _err(INVALID, "invalid function type")
        m.functions.append(type_index)


def _memory(r: Reader, m: _LegacyModule, _: bytes) -> None:
    if r.count() != 1:
        raise _err(UNSUPPORTED, "expected one unshared Memory32")
    flags = r.u32()
    if flags > 1:
        raise _err(UNSUPPORTED, "shared memory and Memory64 are unsupported")
    r.u32()
    if flags == 1:
        r.u32()


def _exports(r: Reader, m: _LegacyModule, export: bytes) -> None:
    for _i in range(r.count()):
        name = _name(r)
        kind = r.byte()
        index = r.u32()
        if name == export:
            if m.kernel_index is not None or kind != 0:
                raise _err(INVALID, "kernel export is not a unique function")
            m.kernel_index = index


def _code(r: Reader, m: _LegacyModule, _: bytes) -> None:
    for _i in range(r.count()):
        start = r.skip(r.u32())
        m.bodies.append((start, r.pos))


_PARSERS = {1: _types, 2: _imports, 3: _functions, 5: _memory, 7: _exports, 10: _code}
_LAST_MVP_SECTION = 11


def compile_wgsl(source: bytes, export: str, storage_binding: int = 0) -> str:
    """WGSL for the legacy (f32) -> f32 kernel `export`; raises CompileError for any module, nothing else.

    `storage_binding` is the binding number of the shader's one storage array (the reference's is
    0; a host that binds something before it asks for another). A bad number is the caller's bug:
    ValueError.
    """
    if isinstance(storage_binding, bool) or not isinstance(storage_binding, int) or not (
            0 <= storage_binding <= MAX_BINDING):
        raise ValueError(f"storage_binding must be an integer in 0..{MAX_BINDING}, got {storage_binding!r}")
    try:
        export_bytes = export.encode() if isinstance(export, str) else b""
    except UnicodeError:
        export_bytes = b""
    source = source if isinstance(source, bytes) else memoryview(source).tobytes()
    if not export_bytes or len(source) > lim.MAX_MODULE_BYTES or len(source) < 8 or source[:8] != lim.WASM_HEADER:
        kind = LIMIT if len(source) > lim.MAX_MODULE_BYTES else INVALID
        raise _err(kind, BAD_INPUT)
    m = _LegacyModule()
    r = Reader(source, 8)
    last = 0
    try:
        while r.pos < r.end:
            section_id = r.byte()
            size = r.u32()
            start = r.skip(size)
            if section_id == 0:
                continue
            if section_id > _LAST_MVP_SECTION or section_id <= last:
                raise _err(UNSUPPORTED, f"unsupported or repeated section {section_id}")
            last = section_id
            parse = _PARSERS.get(section_id)
            if parse is None:
                continue
            sr = Reader(source, start, start + size)
            parse(sr, m, export_bytes)
            if sr.pos != sr.end:
                raise _err(INVALID, f"trailing bytes in section {section_id}")
    except ReaderError as e:
        raise _err(INVALID, e.message) from None
    index = m.kernel_index
    if (index is None or index < m.n_imports or index - m.n_imports >= len(m.functions)
            or len(m.functions) != len(m.bodies)):
        raise _err(INVALID, f"missing or invalid defined kernel {go_quote(export)}")
    defined = index - m.n_imports
    if not m.types_f32[m.functions[defined]]:
        raise _err(INVALID, "kernel must have type (f32) -> f32")
    start, end = m.bodies[defined]
    return compile_legacy_body(source[start:end], storage_binding)
