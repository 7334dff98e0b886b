"""One function of a CPU kernel, rewritten instruction by instruction (cpukernel.py says why and
what changes). Every other instruction's bytes are the guest's own.

A rewritten function keeps its locals and appends six temporaries: the handle and the index of
the buffer access being made, and one value of each numeric type for a write's value.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..abi.accessor import OPS
from ..abi.table import ElementType
from . import wasmencode as enc
from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule
from .intrinsics import F32, F64, I32, I64, VALUE_TYPE_BYTE, IntrinsicKind
from .optable import Instruction, skip_locals, walk
from .reader import Reader, ReaderError

UNSUPPORTED = CompileErrorKind.UNSUPPORTED
OP_CALL, OP_LOOP, OP_GLOBAL_GET, OP_GLOBAL_SET, OP_RETURN = 0x10, 0x03, 0x23, 0x24, 0x0F
STACK_POINTER_GLOBAL = 0  # in the CPU module: the guest's stack pointer, imported first
HALF_TO_F32, F32_TO_HALF = 0, 1  # in the CPU module: the accessor's F16 conversions, imported first
F16_IMPORTS = ("half_to_f32", "f32_to_half")
LOCAL_OPS = frozenset((0x20, 0x21, 0x22))
MAX_INLINE_LOCALS = 64  # locals run's loop re-zeroes per element before an inlined kernel body
LOADS = range(0x28, 0x36)
STORES = range(0x36, 0x3F)
# Instructions the GPU compiler refuses on any path it lowers: in an eligible kernel's functions
# they stand only in code no path reaches (after a br or an unreachable, or in a callee's dead arm),
# so the CPU module has `unreachable` there: were one reached, the run would trap and the guest's
# runner would do what Wasm does.
DEAD = frozenset(("call_indirect", "return_call", "return_call_indirect", "table.get",
                     "table.set", "memory.size", "memory.grow", "ref.func", "memory.init", "data.drop",
                     "memory.copy", "memory.fill", "table.init", "elem.drop", "table.copy", "table.grow",
                     "table.size", "table.fill"))
TEMP_TYPES = (I32, I32, I32, I64, F32, F64)  # handle, index, then a write's value by type
VALUE_TEMP = {I32: 2, I64: 3, F32: 4, F64: 5}
def _refuse(what: str) -> CompileError:
    return CompileError(UNSUPPORTED, f"{what} is not carried by CPU kernels")


@dataclass
class FunctionRewrite:
    """One function's facts and its rewriting, done by encode() once the memory layout is known."""

    rewriter: Rewriter
    index: int  # in the guest module
    type_index: int
    first_temp: int  # index of the first appended temporary
    code: tuple[int, int]  # [start, end) of the instructions
    declared: list[tuple[int, int]] = field(default_factory=list)  # (count, type) of each local group
    memory_access: bool = False
    memories: set[int] = field(default_factory=set)
    loops: bool = False
    stubbed: bool = False  # some instruction became `unreachable` (DEAD)

    def code_bytes(self, buffer_memory: int, fuel_global: int, shift: int = 0) -> bytes:
        """The rewritten instructions; `shift` > 0: inlined in run's loop (Rewriter.inlined), where
        local j is local j + shift and a `return` leaves the wrapping block."""
        rw = self.rewriter
        start, end = self.code
        data = rw.module.source
        out = bytearray()
        for ins, nxt in _spans(data, start, end):
            if shift and ins.opcode in LOCAL_OPS:
                out += enc.local(ins.name, ins.index + shift)
            elif shift and ins.opcode == OP_RETURN:
                out += enc.op("br", enc.uleb(ins.depth))
            else:
                out += rw.instruction(ins, data[ins.at:nxt], self.first_temp + shift, buffer_memory, fuel_global)
        return bytes(out)

    def encode(self, buffer_memory: int, fuel_global: int) -> bytes:
        """The function's code-section entry: the guest's local groups (encoded again, so a guest's
        padded LEB128 counts carry over as their values), the temporaries, the rewritten code."""
        return enc.body([*self.declared, *((1, t) for t in TEMP_TYPES)], self.code_bytes(buffer_memory, fuel_global))

    @property
    def inlinable(self) -> bool:
        """Whether run's loop can hold this (i32) -> () body: few plain numeric locals to re-zero."""
        return sum(n for n, _ in self.declared) <= MAX_INLINE_LOCALS and all(t in enc.CONST_OPS for _, t in self.declared)


def _spans(data: bytes, start: int, end: int) -> Iterator[tuple[Instruction, int]]:
    """Each instruction with the position after it."""
    previous: Instruction | None = None
    try:
        for ins in walk(data, start, end):
            if previous is not None:
                yield previous, ins.at
            previous = ins
    except ReaderError as e:
        raise CompileError(UNSUPPORTED, e.message) from None
    if previous is not None:
        yield previous, end


class Rewriter:
    """The rewriting of a kernel's functions against one decoded module."""

    stack_pointer = -1  # the guest global the kernel moves (its shadow-stack pointer); -1: none
    f16 = False  # an F16 read or write: the accessor's conversions are imported (functions 0 and 1)
    function_base = 0  # index of the first rewritten function (after the imported ones)

    def __init__(self, module: DecodedModule, index_of: dict[int, int], table_offset: int) -> None:
        self.module = module
        self.index_of = index_of  # guest function index -> CPU module function index
        self.table = table_offset

    @staticmethod
    def callees(data: bytes, start: int, end: int) -> Iterator[int]:
        code = skip_locals(data, start, end)
        for ins, _ in _spans(data, code, end):
            if ins.opcode == OP_CALL:
                yield ins.index

    def function(self, index: int) -> FunctionRewrite:
        """Check every instruction of function `index` and note what the module must provide."""
        m = self.module
        n_imports = len(m.func_imports)
        start, end = m.bodies[index - n_imports]
        sig = m.function_type(index)
        if sig is None:
            raise _refuse("a function without a function type")
        r = Reader(m.source, start, end)
        groups = r.count()
        local_groups = [(r.u32(), r.byte()) for _ in range(groups)]
        declared = sum(n for n, _ in local_groups)
        code = r.pos
        fr = FunctionRewrite(self, index, m.functions[index - n_imports], len(sig[0]) + declared, (code, end),
                             local_groups)
        for ins, nxt in _spans(m.source, code, end):
            self._note(fr, ins)
        return fr

    def _note(self, fr: FunctionRewrite, ins: Instruction) -> None:
        if ins.name.startswith("0x"):
            raise _refuse(ins.name)
        if ins.name in DEAD:
            fr.stubbed = True
            return
        op = ins.opcode
        if op in LOADS or op in STORES:  # the GPU compiler let stores through only into the shadow stack
            fr.memory_access = True
            fr.memories.add(_memarg(self.module.source, ins.at)[0])
        elif op == OP_LOOP:
            fr.loops = True
        elif op == OP_GLOBAL_GET or op == OP_GLOBAL_SET:
            self._global(op, ins.index)
        elif op == OP_CALL and ins.index < len(self.module.func_imports):
            self._intrinsic(ins.index)

    def _global(self, op: int, index: int) -> None:
        """A mutable i32 global is the guest's stack pointer (one per kernel, as the GPU compiler
        decided), imported from the guest; any other global must be an immutable constant."""
        globals_ = self.module.statics.globals
        decl = globals_[index] if index < len(globals_) else None
        if decl is not None and decl.mutable and decl.type == I32 and self.stack_pointer in (-1, index):
            self.stack_pointer = index
        elif op == OP_GLOBAL_SET:
            raise _refuse("a write to a global other than the stack pointer")
        else:
            self._constant_global(index)

    def _constant_global(self, index: int) -> bytes:
        globals_ = self.module.statics.globals
        decl = globals_[index] if index < len(globals_) else None
        if decl is None or decl.mutable or decl.imported or decl.value is None or decl.type not in enc.CONST_OPS:
            raise _refuse("a global that is not an immutable constant")
        return enc.const(decl.type, decl.value)

    def _intrinsic(self, index: int) -> tuple[IntrinsicKind, ElementType | None]:
        imp = self.module.func_imports[index]
        intrinsic = imp.intrinsic
        if not imp.in_namespace or intrinsic is None or intrinsic.kind not in (
                IntrinsicKind.GET, IntrinsicKind.READ, IntrinsicKind.WRITE):
            raise _refuse("a call to an import other than getBuffer/readBuffer/writeBuffer")
        if intrinsic.elem is ElementType.F16:
            self.f16 = True
        return intrinsic.kind, intrinsic.elem

    def instruction(self, ins: Instruction, raw: bytes, temp: int, memory: int, fuel: int) -> bytes:
        """The rewritten bytes of one instruction (its own bytes where nothing changes)."""
        if ins.name in DEAD:
            return enc.op("unreachable")
        op = ins.opcode
        if op == OP_CALL:
            if ins.index >= len(self.module.func_imports):
                return enc.op("call", enc.uleb(self.index_of[ins.index] + self.function_base))
            kind, elem = self._intrinsic(ins.index)
            return self._access(kind, elem, temp, memory)
        if op in LOADS or op in STORES:
            _mem, align, offset = _memarg(self.module.source, ins.at)
            return bytes([op]) + enc.memarg(0, align, offset)
        if (op == OP_GLOBAL_GET or op == OP_GLOBAL_SET) and ins.index == self.stack_pointer:
            return bytes([op]) + enc.uleb(STACK_POINTER_GLOBAL)
        if op == OP_LOOP:
            s, g = enc.op, enc.uleb(fuel)
            return (raw + s("global.get", g) + s("i32.eqz") + enc.TRAP_IF
                    + s("global.get", g) + enc.i32_const(1) + s("i32.sub") + s("global.set", g))
        if op == OP_GLOBAL_GET:
            return self._constant_global(ins.index)
        return raw

    def _access(self, kind: IntrinsicKind, elem: ElementType | None, temp: int, memory: int) -> bytes:
        """getBuffer: (slot + 1) * 8; a read or write: the checked address, then the load or store."""
        s, loc = enc.op, enc.local
        if kind is IntrinsicKind.GET or elem is None:
            return enc.i32_const(1) + s("i32.add") + enc.i32_const(3) + s("i32.shl")
        ops = OPS[elem]
        k = ops.size_log2
        h, i = temp, temp + 1
        head = b""
        if kind is IntrinsicKind.WRITE:
            head = loc("local.set", temp + VALUE_TEMP[VALUE_TYPE_BYTE[ops.scalar]])
        checked = (head + loc("local.set", i) + loc("local.tee", h)
                   + s("i32.load", enc.memarg(memory, 2, self.table - 4)) + loc("local.get", i) + s("i32.le_u")
                   + enc.TRAP_IF + loc("local.get", h) + s("i32.load", enc.memarg(memory, 2, self.table - 8))
                   + loc("local.get", i) + (enc.i32_const(k) + s("i32.shl") if k else b"") + s("i32.add"))
        value = loc("local.get", temp + VALUE_TEMP[VALUE_TYPE_BYTE[ops.scalar]])
        if elem is ElementType.F16:  # binary16 bits through the accessor's own conversions (abi.md 5.3)
            if kind is IntrinsicKind.READ:
                return (checked + s("i32.load16_u", enc.memarg(memory, 1, 0)) + s("call", enc.uleb(HALF_TO_F32))
                        + s("f32.reinterpret_i32"))
            return (checked + value + s("i32.reinterpret_f32") + s("call", enc.uleb(F32_TO_HALF))
                    + s("i32.store16", enc.memarg(memory, 1, 0)))
        if kind is IntrinsicKind.READ:
            return checked + s(ops.load, enc.memarg(memory, k, 0))
        return checked + value + s(ops.store, enc.memarg(memory, k, 0))


def _memarg(data: bytes, at: int) -> tuple[int, int, int]:
    """(memory index, alignment, offset) of the load or store at data[at]."""
    return Reader(data, at + 1).memarg()
