"""A tiny Wasm binary builder for compiler tests.

It writes exactly the bytes it is told (no validation), so tests can also build malformed
modules. Kernel bodies are composed from small helpers that return instruction bytes in stack
order, e.g. `abi.write("F32", abi.get(1), lget(0), f32mul(abi.read("F32", abi.get(0), lget(0)), f32c(2.0)))`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from wagogpu.abi.table import ABI_MODULE, IMPORTS, IMPORTS_BY_NAME
from wagogpu.host.memexports import uleb128

HEADER = b"\x00asm\x01\x00\x00\x00"
I32, I64, F32, F64, ANYREF = 0x7F, 0x7E, 0x7D, 0x7C, 0x6E
VT = {"i32": I32, "i64": I64, "f32": F32, "f64": F64, "anyref": ANYREF}
END = b"\x0b"
RETURN = b"\x0f"
F32_ADD, F32_SUB, F32_MUL, F32_DIV = b"\x92", b"\x93", b"\x94", b"\x95"


uleb = uleb128  # one unsigned LEB128 writer for the package and its tests


def sleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if (n == 0 and not b & 0x40) or (n == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def name(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return uleb(len(b)) + b


def vec(items: list[bytes]) -> bytes:
    return uleb(len(items)) + b"".join(items)


def section(section_id: int, payload: bytes) -> bytes:
    return bytes([section_id]) + uleb(len(payload)) + payload


def functype(params: bytes | list[int], results: bytes | list[int]) -> bytes:
    return b"\x60" + vec([bytes([p]) for p in params]) + vec([bytes([r]) for r in results])


# ---- instructions ----------------------------------------------------------------------------
def i32c(v: int) -> bytes:
    if v >= 1 << 31:
        v -= 1 << 32
    return b"\x41" + sleb(v)


def f32c(x: float) -> bytes:
    return b"\x43" + struct.pack("<f", x)


def f32bits(bits: int) -> bytes:
    return b"\x43" + struct.pack("<I", bits)


def lget(i: int) -> bytes:
    return b"\x20" + uleb(i)


def lset(i: int, value: bytes = b"") -> bytes:
    return value + b"\x21" + uleb(i)


def ltee(i: int, value: bytes = b"") -> bytes:
    return value + b"\x22" + uleb(i)


def call(f: int) -> bytes:
    return b"\x10" + uleb(f)


def f32add(a: bytes, b: bytes) -> bytes:
    return a + b + F32_ADD


def f32sub(a: bytes, b: bytes) -> bytes:
    return a + b + F32_SUB


def f32mul(a: bytes, b: bytes) -> bytes:
    return a + b + F32_MUL


def locals_decl(groups: list[tuple[int, int]]) -> bytes:
    return vec([uleb(n) + bytes([t]) for n, t in groups])


def func_body(code: bytes, groups: list[tuple[int, int]] = ()) -> bytes:  # type: ignore[assignment]
    """A code-section entry: size, local groups, code (the caller includes the final end)."""
    payload = locals_decl(list(groups)) + code
    return uleb(len(payload)) + payload


@dataclass
class ModuleBuilder:
    types: list[bytes] = field(default_factory=list)
    imports: list[bytes] = field(default_factory=list)
    n_func_imports: int = 0
    functions: list[int] = field(default_factory=list)
    memories: list[bytes] = field(default_factory=list)
    globals: list[bytes] = field(default_factory=list)
    exports: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    start: int | None = None

    def type(self, params: list[int] | bytes, results: list[int] | bytes) -> int:
        t = functype(params, results)
        if t not in self.types:
            self.types.append(t)
        return self.types.index(t)

    def import_func(self, module: str | bytes, field_name: str | bytes, params, results) -> int:
        assert not self.functions, "imports come first in the function index space"
        self.imports.append(name(module) + name(field_name) + b"\x00" + uleb(self.type(params, results)))
        self.n_func_imports += 1
        return self.n_func_imports - 1

    def import_raw(self, entry: bytes) -> None:
        self.imports.append(entry)

    def func(self, params, results, code: bytes, groups=(), export: str | list[str] | None = None) -> int:
        self.functions.append(self.type(params, results))
        self.bodies.append(func_body(code, list(groups)))
        index = self.n_func_imports + len(self.functions) - 1
        for e in [export] if isinstance(export, str) else (export or []):
            self.export(e, 0, index)
        return index

    def export(self, export_name: str | bytes, kind: int, index: int) -> None:
        self.exports.append(name(export_name) + bytes([kind]) + uleb(index))

    def memory(self, minimum: int = 1, maximum: int | None = None, flags: int | None = None) -> None:
        if flags is None:
            flags = 0 if maximum is None else 1
        self.memories.append(uleb(flags) + uleb(minimum) + (uleb(maximum if maximum is not None else minimum) if flags & 1 else b""))

    def build(self, extra: dict[int, bytes] | None = None) -> bytes:
        """Sections in standard order; `extra` adds raw sections by id (e.g. 12 data-count)."""
        parts: dict[int, bytes] = {}
        if self.types:
            parts[1] = vec(self.types)
        if self.imports:
            parts[2] = vec(self.imports)
        if self.functions:
            parts[3] = vec([uleb(t) for t in self.functions])
        if self.memories:
            parts[5] = vec(self.memories)
        if self.globals:
            parts[6] = vec(self.globals)
        if self.exports:
            parts[7] = vec(self.exports)
        if self.start is not None:
            parts[8] = uleb(self.start)
        if self.bodies:
            parts[10] = vec(self.bodies)
        parts.update(extra or {})
        order = [1, 2, 3, 4, 5, 13, 6, 7, 8, 9, 12, 10, 11]
        return HEADER + b"".join(section(i, parts[i]) for i in order if i in parts)


# ---- the ABI-aware kernel module builder ---------------------------------------------------------
TM_IMPORTS = ("createBufferPacked", "bindBuffer", "getBuffer", "readBufferF32", "writeBufferF32", "dispatch",
              "setBuffer32", "copyBuffer32")
ALL_IMPORTS = tuple(i.name for i in IMPORTS)


def _sig(import_name: str) -> tuple[list[int], list[int]]:
    spec = IMPORTS_BY_NAME[import_name]
    return [VT[p] for p in spec.params], [VT[r] for r in spec.results]


@dataclass
class Abi:
    """Composes kernel bodies against a fixed list of wago_gpu_v1 imports (function indices 0..n-1)."""

    names: tuple[str, ...] = TM_IMPORTS
    get_name: str = "getBuffer"

    def index(self, import_name: str) -> int:
        return self.names.index(import_name)

    def get(self, slot: int | bytes) -> bytes:
        arg = i32c(slot) if isinstance(slot, int) else slot
        return arg + call(self.index(self.get_name))

    def read(self, t: str, handle: bytes, element: bytes) -> bytes:
        return handle + element + call(self.index("readBuffer" + t))

    def write(self, t: str, handle: bytes, element: bytes, value: bytes) -> bytes:
        return handle + element + value + call(self.index("writeBuffer" + t))

    def builder(self, memory: bool = True) -> ModuleBuilder:
        m = ModuleBuilder()
        for n in self.names:
            m.import_func(ABI_MODULE, n, *_sig(n))
        if memory:
            m.memory(1)
        return m

    def module(self, body: bytes, groups=(), kernel: str = "double", extra_kernels=(), cpu_body: bytes = END) -> bytes:
        """TM(body): the kernel `wago_gpu.kernel.<kernel>` = body (+ final end), an empty CPU runner."""
        m = self.builder()
        m.func([I32], [], body + END, groups, export=f"wago_gpu.kernel.{kernel}")
        m.func([I32], [], cpu_body, export=f"wago_gpu.cpu.{kernel}")
        for k_name, k_body, k_groups in extra_kernels:
            m.func([I32], [], k_body + END, k_groups, export=f"wago_gpu.kernel.{k_name}")
            m.func([I32], [], END, export=f"wago_gpu.cpu.{k_name}")
        m.func([], [I32], lget(0) + END if False else i32c(0) + END, export="firstWord")
        return m.build()


TM = Abi()
FULL = Abi(ALL_IMPORTS)
