"""Check that a guest's kernel export stays inside today's GPU subset.

A small, self-contained checker (no wagogpu, no wabt) for the example guests:
it decodes a wasm module just far enough to find the function behind an
export, disassembles its body and checks it against spec/abi.md §6.4:

* the export is a defined function of type (i32) -> ();
* locals are i32 or f32 only;
* instructions: local.get/set/tee, i32.const, f32.const, f32.add/sub/mul,
  call to getBuffer / readBuffer{I8..F32} / writeBuffer{I8..F32} of
  ``wago_gpu_v1``, the final ``end`` (``return`` only right before it);
* by a small abstract interpretation of the operand stack: every getBuffer
  slot is an i32.const (and a declared slot when bindings are given), every
  handle operand is a getBuffer result, every element index is the original
  invocation index (param 0 or an unchanged copy), and, with bindings, typed
  reads/writes match the slot's type and access.

The real compiler in wagogpu is the authority; this only keeps the examples
honest.  Usage::

    python subset_check.py double.wasm wago_gpu.kernel.double [...]

prints each body as WAT-like text and exits 1 if any is outside the subset.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field

ABI_MODULE = "wago_gpu_v1"
GPU_TYPES = ("I8", "U8", "I16", "U16", "I32", "U32", "F16", "F32")
TYPE_IDS = {name: i for i, name in enumerate(
    ("I8", "U8", "I16", "U16", "I32", "U32", "F16", "F32", "I64", "U64", "F64"), start=1)}
READ, WRITE = 1, 2
VALTYPES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128",
            0x70: "funcref", 0x6F: "externref"}

# Opcode names for the listing (only what is needed to report the first
# instruction outside the subset by name; decoding stops there).
NAMES = {
    0x00: "unreachable", 0x01: "nop", 0x02: "block", 0x03: "loop", 0x04: "if",
    0x05: "else", 0x0B: "end", 0x0C: "br", 0x0D: "br_if", 0x0E: "br_table",
    0x0F: "return", 0x10: "call", 0x11: "call_indirect", 0x1A: "drop",
    0x1B: "select", 0x20: "local.get", 0x21: "local.set", 0x22: "local.tee",
    0x23: "global.get", 0x24: "global.set", 0x28: "i32.load", 0x2A: "f32.load",
    0x36: "i32.store", 0x38: "f32.store", 0x41: "i32.const", 0x42: "i64.const",
    0x43: "f32.const", 0x44: "f64.const", 0x45: "i32.eqz", 0x46: "i32.eq",
    0x47: "i32.ne", 0x48: "i32.lt_s", 0x49: "i32.lt_u", 0x5B: "f32.eq",
    0x5D: "f32.lt", 0x5E: "f32.gt", 0x5F: "f32.le", 0x60: "f32.ge",
    0x6A: "i32.add", 0x6B: "i32.sub", 0x6C: "i32.mul", 0x92: "f32.add",
    0x93: "f32.sub", 0x94: "f32.mul", 0x95: "f32.div", 0xFC: "0xfc-prefix",
}


class Reader:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def s32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b & 0x40:
                    result -= 1 << shift
                return result

    def bytes(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise ValueError("unexpected end of data")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def name(self) -> str:
        return self.bytes(self.u32()).decode("utf-8")

    def limits(self) -> None:
        flags = self.byte()
        self.u32()
        if flags & 1:
            self.u32()


@dataclass
class WasmModule:
    types: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    func_imports: list[tuple[str, str, int]] = field(default_factory=list)  # module, name, type
    func_types: list[int] = field(default_factory=list)  # defined functions
    exports: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (kind, index)
    bodies: list[tuple[int, int]] = field(default_factory=list)  # (start, end) into data
    data: bytes = b""


def parse_module(data: bytes) -> WasmModule:
    if data[:8] != b"\0asm\1\0\0\0":
        raise ValueError("not a wasm v1 module")
    m = WasmModule(data=data)
    r = Reader(data, 8)
    while r.pos < r.end:
        sid = r.byte()
        size = r.u32()
        s = Reader(data, r.pos, r.pos + size)
        r.pos += size
        if sid == 1:
            for _ in range(s.u32()):
                if s.byte() != 0x60:
                    raise ValueError("only plain function types are supported")
                params = tuple(VALTYPES.get(s.byte(), "?") for _ in range(s.u32()))
                results = tuple(VALTYPES.get(s.byte(), "?") for _ in range(s.u32()))
                m.types.append((params, results))
        elif sid == 2:
            for _ in range(s.u32()):
                mod, name, kind = s.name(), s.name(), s.byte()
                if kind == 0:
                    m.func_imports.append((mod, name, s.u32()))
                elif kind == 1:
                    s.byte()
                    s.limits()
                elif kind == 2:
                    s.limits()
                elif kind == 3:
                    s.byte()
                    s.byte()
                elif kind == 4:
                    s.byte()
                    s.u32()
                else:
                    raise ValueError(f"unknown import kind {kind}")
        elif sid == 3:
            m.func_types = [s.u32() for _ in range(s.u32())]
        elif sid == 7:
            for _ in range(s.u32()):
                name, kind, index = s.name(), s.byte(), s.u32()
                m.exports[name] = (kind, index)
        elif sid == 10:
            for _ in range(s.u32()):
                size = s.u32()
                m.bodies.append((s.pos, s.pos + size))
                s.pos += size
    return m


@dataclass
class Report:
    export: str
    lines: list[str]
    violations: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations

    def wat(self) -> str:
        return "\n".join(self.lines)


# Abstract values on the operand stack.
INDEX = ("index",)
I32 = ("i32",)
F32 = ("f32",)


def _handle(slot: int) -> tuple:
    return ("handle", slot)


def check_kernel(data: bytes, export: str,
                 bindings: dict[int, tuple[str, int]] | None = None) -> Report:
    """Disassemble and check one kernel export.

    ``bindings`` optionally maps slot -> (type name such as "F32", access bits
    1=READ 2=WRITE 3=READ_WRITE) so slot, type and access are checked too.
    """
    m = parse_module(data)
    lines: list[str] = []
    bad: list[str] = []
    rep = Report(export, lines, bad)
    kind_index = m.exports.get(export)
    if kind_index is None or kind_index[0] != 0:
        bad.append(f"no function export {export!r}")
        return rep
    fidx = kind_index[1]
    nimp = len(m.func_imports)
    if fidx < nimp:
        bad.append("export is an imported function")
        return rep
    params, results = m.types[m.func_types[fidx - nimp]]
    lines.append(f"(func (;{fidx};) (export {export!r}) (param {' '.join(params)})"
                 + (f" (result {' '.join(results)})" if results else ""))
    if params != ("i32",) or results != ():
        bad.append(f"type is {params} -> {results}, not (i32) -> ()")
    start, end = m.bodies[fidx - nimp]
    r = Reader(data, start, end)
    local_types = list(params)
    for _ in range(r.u32()):
        n, t = r.u32(), VALTYPES.get(r.byte(), "?")
        local_types += [t] * n
        lines.append(f"  (local {' '.join([t] * n)})")
        if t not in ("i32", "f32"):
            bad.append(f"local of type {t}")
    # Abstract state: locals start as zero constants; param 0 is the index.
    locals_: list[tuple] = [INDEX] + [I32 if t == "i32" else F32 for t in local_types[1:]]
    stack: list[tuple] = []

    def pop(what: str) -> tuple:
        if not stack:
            bad.append(f"operand stack underflow at {what}")
            return ("?",)
        return stack.pop()

    depth_ok = True
    while r.pos < r.end and depth_ok:
        at = r.pos - start
        op = r.byte()
        name = NAMES.get(op, f"0x{op:02x}")
        if op in (0x20, 0x21, 0x22):
            idx = r.u32()
            lines.append(f"  {name} {idx}")
            if idx >= len(locals_):
                bad.append(f"local index {idx} out of range")
                break
            if op == 0x20:
                stack.append(locals_[idx])
            else:
                v = pop(name)
                locals_[idx] = v
                if op == 0x22:
                    stack.append(v)
        elif op == 0x41:
            value = r.s32()
            lines.append(f"  i32.const {value}")
            stack.append(("const", value))
        elif op == 0x43:
            (value,) = struct.unpack("<f", r.bytes(4))
            lines.append(f"  f32.const {value!r}")
            stack.append(F32)
        elif op in (0x92, 0x93, 0x94):
            lines.append(f"  {name}")
            b, a = pop(name), pop(name)
            if a != F32 or b != F32:
                bad.append(f"{name} on non-f32 operands at +{at}")
            stack.append(F32)
        elif op == 0x10:
            callee = r.u32()
            if callee >= nimp:
                lines.append(f"  call {callee}")
                bad.append(f"call to non-import function {callee} at +{at}")
                break
            mod, iname, _ = m.func_imports[callee]
            lines.append(f"  call {callee} ({mod}.{iname})")
            if mod != ABI_MODULE:
                bad.append(f"call to {mod}.{iname}")
                break
            if iname == "getBuffer":
                arg = pop(iname)
                if arg[0] != "const":
                    bad.append(f"getBuffer slot is not an i32.const at +{at}")
                    stack.append(("handle", None))
                else:
                    slot = arg[1]
                    if not 0 <= slot < 8 or (bindings is not None and slot not in bindings):
                        bad.append(f"getBuffer({slot}): slot not declared")
                    stack.append(_handle(slot))
            elif iname.startswith("readBuffer") and iname[10:] in GPU_TYPES:
                index, handle = pop(iname), pop(iname)
                _check_access(bad, iname, iname[10:], handle, index, READ, bindings)
                stack.append(F32 if iname[10:] in ("F16", "F32") else ("loaded_i32",))
            elif iname.startswith("writeBuffer") and iname[11:] in GPU_TYPES:
                value, index, handle = pop(iname), pop(iname), pop(iname)
                _check_access(bad, iname, iname[11:], handle, index, WRITE, bindings)
                if value[0] == "handle":
                    bad.append("a buffer handle stored as data")
            else:
                bad.append(f"{iname} is not a GPU intrinsic")
                break
        elif op == 0x0F:
            lines.append("  return")
            if r.pos != r.end - 1 or data[r.end - 1] != 0x0B:
                bad.append("return not immediately before the final end")
                break
        elif op == 0x0B:
            lines.append("  end")
            if r.pos != r.end:
                bad.append(f"end before the end of the body at +{at} (structured control flow)")
                break
            if stack:
                bad.append(f"{len(stack)} value(s) left on the stack at the final end")
        else:
            lines.append(f"  {name}  ;; <- outside the GPU subset, listing stops")
            bad.append(f"instruction {name} at +{at} is outside the GPU subset")
            depth_ok = False
    return rep


def _check_access(bad, iname, tname, handle, index, want, bindings):
    if handle[0] != "handle":
        bad.append(f"{iname}: handle operand is not a getBuffer result")
        return
    if index != INDEX:
        bad.append(f"{iname}: element index is not the invocation index")
    slot = handle[1]
    if bindings is None or slot not in bindings:
        return
    declared_type, access = bindings[slot]
    if declared_type != tname:
        bad.append(f"{iname} on slot {slot} declared {declared_type}")
    if not access & want:
        bad.append(f"{iname} on slot {slot} whose access does not allow it")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    data = open(argv[0], "rb").read()
    status = 0
    for export in argv[1:]:
        rep = check_kernel(data, export)
        print(rep.wat())
        if rep.ok:
            print(f";; {export}: inside the GPU subset")
        else:
            status = 1
            for v in rep.violations:
                print(f";; {export}: {v}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
