"""The workspace of one kernel-body lowering: operand stack, locals, value table, emitted code.

Values. Every numbered value n (WGSL name `v<n>`) has a form (records.Form): a u32 holding an i32
or an f32's bits (loads, constants copied into lets, exact bit operations, vars), a vec2<u32>
holding an i64 or an f64's bits, or an f32 (or f64) value (rounding arithmetic). Stored data
always travels as bits, so exact float copies never pass through a WGSL float (docs/design/compiler.md §2.1.4).
Outside the reference subset, float constants and results are opaque to the driver (valuetext.py).

Deferred nodes. The reference's f32 add, sub and mul create a node that is emitted only when a
store, a branch or another instruction first uses it, operands first, each node once; an operand
chain MAX_DEPTH deep is emitted early (the depth rule), and dead arithmetic is never emitted.
Everything else is emitted as a `let` where it happens: loads (so a later store cannot change a
saved value), instructions that can trap (so a dead value still traps), and the rest. A let made
inside a WGSL block cannot be used outside it, so before a construct opens, every node still
pending is emitted (flush_pending), and nodes made inside a construct that nothing used by its
else or end are dropped (nothing outside can refer to them: values leave a construct only through
vars). In unreachable code nothing is emitted at all.

Everything checked here raises CompileError or records the first problem as `pending`, which the
driver raises after the instruction (the reference's "stop at the next iteration").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..abi.kernel import LOOP_BUDGET_FIELD, KernelError
from ..abi.table import SLOT_COUNT, Access, ElementType
from . import reader as lim
from .bindings import BindingFacts
from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule
from .extensions import Extensions
from .frames import ALL_SLOTS, Frame, FrameKind
from .intrinsics import F32, F64, I32, I64, Intrinsic, IntrinsicKind
from .names import NameKind, described
from .numeric import NumericOp
from .reader import Reader
from .records import (BITS_FORM, CONSTANT, FRAME, HANDLE, INDEX, NUMBER, V_NAMES, VALUE_LET, VALUE_OF_BITS, WGSL_TYPE,
                      Form, Record)
from .valuetext import constant_text, converted, opaque_result, second_copy

INVALID = CompileErrorKind.INVALID_CONTRACT
UNSUPPORTED = CompileErrorKind.UNSUPPORTED
LIMIT = CompileErrorKind.LIMIT
BITS, VALUE, PAIR, DOUBLE = Form.BITS, Form.VALUE, Form.PAIR, Form.DOUBLE  # (enum lookups are slow in 3.11)
LOCAL_TYPES = frozenset((I32, F32, I64, F64))
FUNC = FrameKind.FUNC
Node = tuple[NumericOp, Record, Record]


def raise_error(code: KernelError) -> str:
    """Statements that record `code` in the error word and end the invocation."""
    return f"  atomicMax(&err[0], {int(code)}u);\n  return;\n"


class Restart(Exception):
    """The body left the reference subset after f32 arithmetic was emitted without opaque operands."""


@dataclass(frozen=True, slots=True)
class LoweredBody:
    code: str  # statements, two-space indented, one per line
    reads: int  # bit mask of slots actually read
    writes: int  # bit mask of slots actually written
    read_before_write: int  # slots read before their first write (or written only conditionally)
    is_float: bool
    error_word: bool = False  # the code uses the error word `err` (traps, loop budget, gathers)
    helpers: tuple[str, ...] = ()  # ops.HELPERS the code calls
    loop_budget: int = 0  # the fuel the code starts with; 0 when it has no loop
    memory: int = -1  # the memory its loads read (memload.py; -1: none), bound after the error word
    memory_low: int = 0  # the first byte of that memory its snapshot holds
    extra_helpers: tuple[str, ...] = ()  # memload.HELPERS the code calls
    rounding: bool = False  # the code uses the GPU's float units (numeric.NumericOp.rounding)
    f64: bool = False  # the code uses WGSL f64 (needs the adapter's shader-f64 feature)


class Lowering:
    """One body's workspace. Value n lives at index n of the parallel lists `depth` (the deferred
    chain depth, 0 once emitted, so "pending" is depth > 0), `form` and `ftext` (how it is written
    as an f32 operand); `nodes` maps a deferred node to (op, left, right)."""

    __slots__ = ("module", "r", "scan_kinds", "stack", "locals", "local_types", "nodes", "depth", "form", "ftext",
                 "pending_from", "names", "value_let", "value_of_bits", "code", "counted", "decls", "pending",
                 "reads", "writes", "rbw", "mw", "exit_mw", "gathers", "is_float", "slot_type", "can_read",
                 "can_write", "frames", "top", "const_text", "var_locals", "known", "targeted", "uses_brk", "uses_fuel",
                 "uses_err", "helpers", "budget", "emit_node", "frame_base", "local_base", "ext", "strict", "opaque",
                 "rounding", "uses_f64", "beyond_reference")

    def __init__(self, module: DecodedModule, start: int, end: int, facts: BindingFacts, scan_kinds: bytes,
                 strict: bool = False, opaque: bool = False):
        self.module = module
        self.r = Reader(module.source, start, end)
        self.scan_kinds = scan_kinds  # optable.Imm per opcode (Imm.OUTSIDE: outside the GPU subset)
        self.stack: list[Record] = []
        self.locals: list[Record] = [(INDEX, I32, 0)]
        self.local_types: list[int] = [I32]
        self.nodes: dict[int, Node] = {}
        self.depth: list[int] = []
        self.form: list[Form] = []
        self.ftext: list[str] = []
        self.pending_from = 0  # values below this number are emitted or dropped
        self.names: list[str] = []
        self.value_let: list[str] = []
        self.value_of_bits: list[str] = []
        self._grow(min(end - start, lim.MAX_INSTRUCTIONS))  # the reference subset makes <= 1 value per byte
        self.code: list[str] = [""]  # code[0]: the function-scope declarations, set by finish()
        self.counted = (1, 0)  # (pieces, bytes) of code already counted by code_bytes
        self.decls: list[str] = []
        self.pending: CompileError | None = None
        self.reads = self.writes = self.rbw = self.gathers = 0
        self.mw = 0  # slots written on every path to here (control.py)
        self.exit_mw = ALL_SLOTS  # ... on every path that leaves the kernel normally
        self.is_float = facts.is_float
        self.slot_type: dict[int, ElementType] = facts.slot_type
        self.can_read, self.can_write = facts.can_read, facts.can_write
        self.top = Frame(FUNC, (), (), 0, False, False)  # the innermost open frame
        self.frames: list[Frame] = [self.top]
        self.const_text: dict[Record, str] = {}  # f32 constant record -> operand text
        self.var_locals: set[str] = set()  # the WGSL vars declared for locals (records.local_var)
        self.known: dict[int, Record] = {}  # var locals whose value is a record in scope (control.py)
        self.targeted: set[int] | None = set()  # openings some branch targets (None: unknown, all)
        self.uses_brk = self.uses_fuel = self.uses_err = False
        self.helpers: set[str] = set()
        self.budget = lim.LOOP_BUDGET
        self.strict = strict  # strict_float: rows with an exact form use it (numeric.NumericOp.strict)
        self.opaque = opaque  # f32 constants and results pass through an OR with a run-time zero
        self.rounding = False
        self.uses_f64 = False
        # The body has gone past what the reference accepts (its first refusal): from here on a
        # contract error falls back as that refusal would (contract_error).
        self.beyond_reference = bool(facts.wide)
        self.emit_node = self._node_emitter()
        # Inlined calls (inline.py): the frame and the first local of the function now lowered.
        self.frame_base = 0
        self.local_base = 0
        self.ext = Extensions()

    def _grow(self, n: int) -> None:
        self.names = V_NAMES.upto(n)
        self.value_let = VALUE_LET.upto(n)
        self.value_of_bits = VALUE_OF_BITS.upto(n)

    # ---- operand stack -----------------------------------------------------------------------
    def push_frame(self, frame: Frame) -> None:
        self.frames.append(frame)
        self.top = frame

    def pop_frame(self) -> Frame:
        frame = self.frames.pop()
        self.top = self.frames[-1]
        return frame

    def pop(self, want: int) -> Record:
        """Pop a value of type `want`; problems become a pending error so explicit checks still run.
        Below the frame's height the stack is empty, except in unreachable code, where Wasm's stack
        is polymorphic."""
        stack = self.stack
        frame = self.top
        if len(stack) <= frame.height:
            if frame.dead:
                return (CONSTANT, want, 0)
            if self.pending is None:
                self.pending = CompileError(INVALID, "operand stack underflow")
            return (NUMBER, want, 0)
        rec = stack.pop()
        if rec[1] != want and self.pending is None:
            self.pending = CompileError(INVALID, "operand type mismatch")
        return rec

    def pop_types(self, types: tuple[int, ...]) -> list[Record]:
        """Pop values of `types` (deepest first); returned in stack order."""
        values = [self.pop(t) for t in reversed(types)]
        values.reverse()
        return values

    def pop_any(self) -> Record:
        frame = self.top
        if len(self.stack) <= frame.height:
            if not frame.dead and self.pending is None:
                self.pending = CompileError(INVALID, "operand stack underflow")
            return (CONSTANT, I32, 0)
        return self.stack.pop()

    def set_dead(self) -> None:
        frame = self.top
        frame.dead = True
        del self.stack[frame.height:]
        ext = self.ext
        if ext.sp_resume is not None:  # a path that released its frame ended (shadow.py)
            ext.sp_offset, ext.sp_resume = ext.sp_resume, None

    # ---- values ------------------------------------------------------------------------------
    def new_value(self, form: Form) -> int:
        n = len(self.depth)
        if n >= len(self.names):
            self._grow(n)
        self.depth.append(0)
        self.form.append(form)
        self.ftext.append(self.names[n] if form == VALUE else self.value_of_bits[n])
        return n

    def let(self, form: Form, expr: str) -> int:
        n = self.new_value(form)
        self.emit(f"  let {self.names[n]}: {WGSL_TYPE[form]} = {expr};\n")
        return n

    def new_var(self, wtype: int = I32) -> int:
        """A function-scope var holding a value of Wasm type `wtype` as bits."""
        form = BITS_FORM[wtype]
        n = self.new_value(form)
        self.decls.append(f"  var {self.names[n]}: {WGSL_TYPE[form]};\n")
        return n

    def new_node(self, op: NumericOp, left: Record, right: Record) -> int:
        """A deferred node (lower.run_fast inlines this for the common case; both must stay identical)."""
        depth = self.depth
        ld = depth[left[2]] if left[0] == NUMBER else 0
        rd = depth[right[2]] if right[0] == NUMBER else 0
        if ld >= lim.MAX_DEPTH or rd >= lim.MAX_DEPTH:
            ld, rd = self.depth_rule(left, right)
        n = self.new_value(op.carrier)
        self.nodes[n] = (op, left, right)
        depth[n] = (ld if ld > rd else rd) + 1
        return n

    def depth_rule(self, left: Record, right: Record) -> tuple[int, int]:
        """An operand chain already MAX_DEPTH deep is emitted first, left before right (emitting the
        left one may emit the right one too); the operands' depths afterwards."""
        depth = self.depth
        ld = depth[left[2]] if left[0] == NUMBER else 0
        if ld >= lim.MAX_DEPTH:
            self.emit_node(left[2])
            ld = 0
        rd = depth[right[2]] if right[0] == NUMBER else 0
        if rd >= lim.MAX_DEPTH:
            self.emit_node(right[2])
            rd = 0
        return ld, rd

    def _node_emitter(self) -> Callable[[int], None]:
        """The recursive emitter of deferred nodes, a closure over the workspace (a hot path).
        Recursion depth is at most MAX_DEPTH: the depth rule emits deeper chains early."""
        if self.opaque:
            return self._opaque_node_emitter()
        depth, nodes, ftext, const_text, code = self.depth, self.nodes, self.ftext, self.const_text, self.code
        const_operand = self.const_operand

        def text(v: Record) -> str:
            """An operand's text: a node's let (emitted first if still pending), else a constant."""
            if v[0] == NUMBER:
                if depth[v[2]]:
                    emit_node(v[2])
                return ftext[v[2]]
            return const_text.get(v) or const_operand(v)

        def emit_node(n: int) -> None:
            op, left, right = nodes[n]
            ltext = text(left)
            rtext = text(right)
            depth[n] = 0
            code.extend((self.value_let[n], ltext, op.infix, rtext, ";\n"))

        return emit_node

    def _opaque_node_emitter(self) -> Callable[[int], None]:
        """emit_node for opaque float operands (valuetext.py): the same statements, each result
        through the run-time zero and the second operand a distinct copy."""
        depth, nodes = self.depth, self.nodes

        def emit_node(n: int) -> None:
            op, left, right = nodes[n]
            ltext = self.operand(left, VALUE)
            rtext = second_copy(self.operand(right, VALUE), VALUE)
            depth[n] = 0
            self.code.extend((self.value_let[n], opaque_result(ltext + op.infix + rtext, VALUE), ";\n"))

        return emit_node

    def go_beyond_reference(self) -> None:
        """The body goes past what the reference accepts: float operands are opaque from here on
        (valuetext.py); f32 arithmetic already emitted without them is lowered again (Restart)."""
        self.beyond_reference = True
        if not self.opaque:
            if self.nodes:
                raise Restart()
            self.set_opaque()

    def set_opaque(self) -> None:
        """Opaque float operands from here on (nothing float has been emitted yet)."""
        self.opaque = True
        self.const_text.clear()
        self.emit_node = self._node_emitter()

    def const_operand(self, rec: Record) -> str:
        """An f32 constant feeding arithmetic (cached: kernels repeat their constants)."""
        text = self.const_text[rec] = constant_text(rec, VALUE, self.opaque)
        return text

    def materialise(self, n: int) -> None:
        if not self.top.dead:
            self.emit_node(n)

    def flush_pending(self) -> None:
        """Emit every pending node before a construct opens (see the module docstring)."""
        if not self.top.dead:
            depth = self.depth
            for n in range(self.pending_from, len(depth)):
                if depth[n]:
                    self.emit_node(n)
        self.pending_from = len(self.depth)

    def drop_pending(self) -> None:
        self.pending_from = len(self.depth)

    def operand(self, rec: Record, form: Form) -> str:
        """A value's WGSL text in `form`, emitting it first if it is a pending node."""
        kind, _, value = rec
        if kind == NUMBER:
            if self.depth[value]:
                self.materialise(value)
            have = self.form[value]
            if have == form:
                return self.names[value]
            if form == VALUE:
                return self.ftext[value]
            return converted(self.names[value], have, form)
        if kind == FRAME:
            raise self.stack_pointer_misuse("its value is used as a number, which a stack address cannot be")
        if kind == HANDLE:
            raise CompileError(UNSUPPORTED, "buffer handle used as a value")
        if kind == CONSTANT and form == VALUE:
            return self.const_text.get(rec) or self.const_operand(rec)
        return constant_text(rec, form, self.opaque)

    def bits(self, rec: Record) -> str:
        """A value's WGSL text as its bit pattern (a u32, or a vec2<u32> for 64-bit types)."""
        return self.operand(rec, BITS_FORM[rec[1]])

    def launder(self, rec: Record) -> Record:
        """A constant copied into a let, so that expressions using it are not const-expressions.
        With opaque operands a float constant's let is opaque too (constant_text): a let of a known
        value is as foldable to the driver as the constant (`0 / -4` came out +0 on lavapipe)."""
        form = BITS_FORM[rec[1]]
        return (NUMBER, rec[1], self.let(form, constant_text(rec, form, self.opaque)))

    def result(self, op: NumericOp, expr: str) -> int:
        """A numeric row's result as a new let; opaque float results pass through the run-time zero."""
        if op.rounding:
            self.rounding = True
            if self.opaque:
                expr = opaque_result(expr, op.carrier)
        if op.f64:
            self.uses_f64 = True
        return self.let(op.carrier, expr)

    # ---- emission ----------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        if not self.top.dead:
            self.code.append(line)

    def code_bytes(self) -> int:
        """Bytes of statements emitted so far (counted once each)."""
        pieces, total = self.counted
        code = self.code
        if len(code) > pieces:
            total += sum(map(len, code[pieces:]))
            self.counted = (len(code), total)
        return total

    def raise_error_if(self, condition: str, code: KernelError) -> None:
        if not self.top.dead:
            self.uses_err = True
            self.emit(f"  if ({condition}) {{\n" + raise_error(code) + "  }\n")

    # ---- locals and buffer access ------------------------------------------------------------
    def declare_locals(self) -> None:
        r = self.r
        max_locals = lim.MAX_LOCALS
        for _ in range(r.count()):
            n = r.u32()
            wtype = r.byte()
            if n > max_locals - len(self.locals):
                raise CompileError(LIMIT, "expanded local limit")
            if wtype not in LOCAL_TYPES:
                raise CompileError(UNSUPPORTED, "local type is unsupported")
            if wtype == I64 or wtype == F64:
                self.beyond_reference = True
            if wtype == F32 or wtype == F64:
                self.is_float = True
            self.locals.extend([(CONSTANT, wtype, 0)] * n)
            self.local_types.extend([wtype] * n)

    def local_index(self) -> int:
        """The index of a local of the function now lowered, among all the workspace's locals."""
        i = self.r.u32() + self.local_base
        if i >= len(self.locals):
            raise CompileError(INVALID, "local index out of range")
        return i

    def access_operands(self) -> int:
        """Pop (handle, element) of a write and return the slot (docs/design/compiler.md §1.3.5 steps 2-5)."""
        element = self.pop(I32)
        handle = self.pop(I32)
        if handle[0] != HANDLE:
            raise CompileError(UNSUPPORTED, "handle is not a selected buffer slot")
        if element[0] != INDEX:
            raise CompileError(UNSUPPORTED, "element must be the original invocation index")
        if self.pending is not None:
            raise self.pending
        return handle[2]

    def contract_error(self, message: str) -> CompileError:
        """A contract violation of a valid module (slots, intrinsic types, access). The reference
        refuses a body at its first instruction or declaration outside its subset, as UNSUPPORTED,
        before it could find a violation further on; so that a guest sees the reference's status
        (CPU fallback, not INVALID_KERNEL), a violation found beyond that point is UNSUPPORTED."""
        return CompileError(UNSUPPORTED if self.beyond_reference else INVALID, message)

    def check_slot(self, slot: int, intrinsic: Intrinsic, allowed: int) -> None:
        declared = self.slot_type[slot]
        if declared != intrinsic.elem:
            if not intrinsic.gpu:  # a 64-bit intrinsic: the reference's refusal comes first
                raise CompileError(UNSUPPORTED, "intrinsic type unsupported on GPU")
            raise self.contract_error(f"intrinsic type does not match declared slot: {intrinsic.spec.name} uses "
                                      f"slot {slot} as {getattr(intrinsic.elem, 'name', '?')}, declared {declared.name}")
        if not allowed >> slot & 1:
            bit = 1 << slot
            access = Access((bool(self.can_read & bit)) | (bool(self.can_write & bit) << 1))
            uses = "reads" if intrinsic.kind == IntrinsicKind.READ else "writes"
            raise self.contract_error(f"intrinsic violates slot access: {intrinsic.spec.name} {uses} slot {slot}, "
                                      f"declared {access.name}")

    def stack_pointer_misuse(self, problem: str) -> CompileError:
        """A misuse of the shadow-stack pointer, naming the global first: the first mutable i32
        global a kernel reads is taken for it (globalvars.py), so a plain mutable variable lands here."""
        sp = described(self.module, NameKind.GLOBAL, self.ext.sp_global)
        return CompileError(UNSUPPORTED, f"{sp}: {problem} (the first mutable i32 global a kernel reads is taken for "
                                         "its shadow-stack pointer; a plain mutable global keeps the kernel on the "
                                         "CPU, whose value only the guest knows)")

    # ---- result ------------------------------------------------------------------------------
    def finish(self) -> LoweredBody:
        if self.gathers & self.writes:
            raise CompileError(UNSUPPORTED, "gather read of a written slot")
        decls = self.decls
        if self.uses_brk:
            decls.append("  var brk: u32 = 0u;\n")
        if self.uses_fuel:
            decls.append(f"  var fuel: u32 = params.{LOOP_BUDGET_FIELD};\n")  # the host sets it per device
        if decls:
            self.code[0] = "".join(decls)
        rbw = self.rbw | (self.writes & ~self.exit_mw)
        ext = self.ext
        return LoweredBody("".join(self.code), self.reads, self.writes, rbw, self.is_float, self.uses_err,
                           tuple(sorted(self.helpers)) if self.helpers else (), self.budget if self.uses_fuel else 0,
                           ext.memory, max(ext.static_low, 0) & ~3, tuple(sorted(ext.helpers)),
                           self.rounding or bool(self.nodes), self.uses_f64)


assert SLOT_COUNT <= 32
