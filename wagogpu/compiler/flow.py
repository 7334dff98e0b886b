"""Lowering of kernels outside the reference subset: structured control flow, integer and more
float arithmetic, conversions, select/drop/nop, traps, loop budgets and gather reads.

lower.py lowers a body with the reference's deferred value nodes and hands it here (by raising
NeedsFlow) at the first instruction the reference does not accept, so kernels of the reference
subset keep their exact WGSL. This lowering starts the body again from scratch.

Values. Records are the same immutable (kind, type, value) triples as in lower.py, but every value
node is emitted as a `let` where it is created (nothing is deferred: a let made inside a branch
could not be used outside it). A node is carried as a u32 (an i32, or an f32's bits: loads,
constants, exact bit operations) or as an f32 value (rounding arithmetic); `carrier[n]` says which.
Constants, the index and handles stay symbolic as before. An operation whose operands are all
constants first copies one into a let, so no WGSL expression is ever a const-expression (WGSL
rejects e.g. an overflowing constant shift at shader creation).

Locals. A local keeps its record while it is only assigned in straight-line code at the top
level. Before the first instruction of a top-level block, loop or if, a pre-scan of that construct
finds the locals it assigns; each of them moves into a WGSL `var l<i>: u32` (its bits), and inside
the construct `local.set` writes the var and `local.get` copies it into a fresh let (so stack
values stay snapshots). Locals the construct never assigns keep their records: the index and the
buffer handles survive loops. A handle can never live in a var (Unsupported), because its runtime
value is the guest's handle number, which the GPU does not know.

Control flow. WGSL has no labelled break, so a Wasm block, if or loop that some branch targets
becomes a WGSL `loop { ... }` (a "wrapper"); others become a plain `{ ... }` / `if`. The pre-scan
tells which constructs are targeted. A branch to the innermost enclosing wrapper is a plain
`break` (block, if) or `continue` (loop); a branch further out stores the target's frame depth in
`var brk` and breaks, and after each wrapper it crossed a check re-dispatches it. A branch to the
function (and `return`) is a WGSL `return`. Block results travel in a `var v<n>: u32` assigned on
every edge into the block's end. br_table becomes a `switch` that picks the target's position in
the list of distinct targets, followed by one `if` per target. Code after an unconditional branch
is unreachable: it is still checked, but nothing is emitted for it.

Errors on the GPU. Kernels that can trap, loop or gather declare the error word
(KernelPlan.error_word): `err`, an `array<atomic<u32>, 4>` bound after the slots. A trap condition
(see ops.py), `unreachable`, an exhausted loop budget or an out-of-range gather does
`atomicMax(&err[0], code)` and returns; the host then publishes nothing and dispatch returns 1, so
the guest's CPU runner produces Wasm's behaviour, trap included.

Loop budget. `var fuel: u32 = params.pad0` counts the passes through the heads of all wrapper
loops of an invocation together; the host sets it at most reader.LOOP_BUDGET (2^20), lower where
the adapter cuts loops (abi/kernel.py, gpu/probe.py). The pass that finds it at zero raises
KernelError.LOOP_BUDGET. So no kernel can keep the device busy for longer than about
LOOP_BUDGET x (body instructions) steps per invocation.

Gather reads. A read whose element is not the original index reads `slot[e]` after checking
`e < arrayLength(&slot)` (the bound buffer is exactly the guest buffer: out of range there is
out of range for the CPU runner too, which then traps). Reading a slot the kernel also writes at
another element would race with the invocation that writes it, so a gather from a written slot is
Unsupported. Writes still require the original index.

Write flags. Along the lowering, `mw` is the set of slots every path to the current point has
written (at the invocation's own element); a branch carries it to its target, and a join keeps
what all its incoming paths agree on. A read at the index of a slot not in `mw` is a read before
write; a written slot that some path to the kernel's exit (end or return) does not write is
read_before_write too, so the host seeds its scratch output with the old contents for the
elements the kernel skips. Paths ending in a trap or an exhausted budget commit nothing and count
for neither.
"""
from __future__ import annotations

from typing import Callable

from ..abi.kernel import LOOP_BUDGET_FIELD
from ..abi.table import SLOT_COUNT
from . import reader as lim
from .contract import CompileError, KernelError
from .decoder import DecodedModule
from .intrinsics import F32, I32, Intrinsic, IntrinsicKind
from .lower import (CONSTANT, HANDLE, INDEX, INVALID, LIMIT, NUMBER, UNSUPPORTED, V_NAMES, Lowering, Record,
                    _call, _check_slot, _err, _f32_const, _get_buffer, _i32_const, _local_index, _management)
from .ops import NUMERIC, SATURATING, NumericOp
from .reader import Reader, ReaderError
from .wgsl import LOAD_EXPR, STORE_WRAP

VAR = 4  # record kind held only in `locals`: the local lives in the WGSL var l<i>
FUNC, BLOCK, LOOP, IF = range(4)
WGSL_TYPE = {"u": "u32", "f": "f32"}
BLOCK_TYPES = {-64: 0, -1: I32, -3: F32}  # 0x40 (empty), 0x7f, 0x7d as signed LEB128


def _raise_error(code: KernelError) -> str:
    return f"  atomicMax(&err[0], {int(code)}u);\n  return;\n"


TRAP = _raise_error(KernelError.TRAP)
OUT_OF_FUEL = "  if (fuel == 0u) {\n" + _raise_error(KernelError.LOOP_BUDGET) + "  }\n  fuel = fuel - 1u;\n"
HANDLE_IN_VAR = "buffer handle in a local that control flow assigns"
ALL_SLOTS = (1 << SLOT_COUNT) - 1


class Frame:
    """One open construct (the function body is frame 0)."""

    __slots__ = ("kind", "result", "height", "wrapper", "dead", "entry_live", "reached", "crossers",
                 "result_var", "else_seen", "then_live", "mw_entry", "mw_in", "mw_then")

    def __init__(self, kind: int, result: int, height: int, wrapper: bool, dead: bool):
        self.kind = kind
        self.result = result  # Wasm type byte of the construct's result, 0 for none
        self.height = height  # operand stack height at entry
        self.wrapper = wrapper  # emitted as a WGSL loop (some branch targets it)
        self.dead = dead  # the code now being lowered in this frame is unreachable
        self.entry_live = not dead
        self.reached = False  # a reachable branch targets it
        self.crossers: set[int] = set()  # frame depths whose brk branches break out through it
        self.result_var = -1
        self.else_seen = False
        self.then_live = False  # an if's then-part could fall through to its end
        self.mw_entry = 0  # slots written on every path at entry
        self.mw_in = ALL_SLOTS  # ... on every branch to its end (block, if)
        self.mw_then = 0  # ... at the end of an if's then-part

    def label_type(self) -> int:
        """Type a branch to this frame carries (a loop's label takes its parameters: none)."""
        return 0 if self.kind == LOOP else self.result


def prescan(data: bytes, pos: int, end: int) -> tuple[set[int] | None, set[int] | None]:
    """Locals assigned in, and openings of the constructs targeted by branches in, the construct
    opening at data[pos]. (None, None) when the scan cannot finish (malformed or unsupported
    code): then every local and every construct is treated as affected, which is always safe."""
    r = Reader(data, pos, end)
    labels: list[int] = []
    written: set[int] = set()
    targeted: set[int] = set()
    try:
        while r.pos < end:
            at = r.pos
            op = r.byte()
            kind = SCAN_KIND[op]
            if kind == S_PLAIN:
                continue
            if kind == S_OPEN:
                r.leb(33, True)
                labels.append(at)
            elif kind == S_END:
                labels.pop()
                if not labels:
                    return written, targeted
            elif kind == S_BRANCH:
                depth = r.u32()
                if depth < len(labels):
                    targeted.add(labels[-1 - depth])
            elif kind == S_TABLE:
                for _ in range(r.count() + 1):
                    depth = r.u32()
                    if depth < len(labels):
                        targeted.add(labels[-1 - depth])
            elif kind == S_SET:
                written.add(r.u32())
            elif kind == S_U32:
                r.u32()
            elif kind == S_I32:
                r.leb(32, True)
            elif kind == S_F32:
                r.skip(4)
            elif kind == S_SELECT:
                if r.u32() != 1:
                    break
                r.byte()
            else:
                break
    except (ReaderError, CompileError):
        pass
    return None, None


class FlowLowering(Lowering):
    """The extended lowering; see the module docstring. Reuses Lowering's reader, locals and checks."""

    __slots__ = ("carrier", "code_bytes", "decls", "var_locals", "uses_brk", "uses_fuel", "uses_err", "helpers",
                 "targeted", "mw", "exit_mw", "gathers", "budget", "known")

    def __init__(self, module: DecodedModule, start: int, end: int):
        super().__init__(module, start, end)
        self.frames: list[Frame] = [Frame(FUNC, 0, 0, False, False)]  # type: ignore[assignment]
        self.carrier: list[str] = []  # per node: "u" or "f"
        self.code_bytes = 0
        self.decls: list[str] = []  # function-scope vars, emitted before the body
        self.var_locals: set[int] = set()
        self.uses_brk = self.uses_fuel = self.uses_err = False
        self.helpers: set[str] = set()
        self.targeted: set[int] | None = set()
        self.mw = 0  # slots written on every path to here (see the module docstring)
        self.exit_mw = ALL_SLOTS  # ... on every path that leaves the kernel normally
        self.gathers = 0
        self.budget = lim.LOOP_BUDGET
        # var locals whose current value is a record already in scope (set since the last
        # construct boundary): local.get reuses it instead of copying the var
        self.known: dict[int, Record] = {}

    intrinsic_handlers: dict[IntrinsicKind, Callable[[Lowering, Intrinsic], None]] = {}  # set below

    # ---- stack -----------------------------------------------------------------------------------
    @property
    def dead(self) -> bool:
        return self.frames[-1].dead  # type: ignore[attr-defined]

    def pop(self, want: int) -> Record:
        stack = self.stack
        frame: Frame = self.frames[-1]  # type: ignore[assignment]
        if len(stack) <= frame.height:
            if frame.dead:  # Wasm's polymorphic stack after an unconditional branch
                return (CONSTANT, want, 0)
            if self.pending is None:
                self.pending = _err(INVALID, "operand stack underflow")
            return (NUMBER, want, 0)
        rec = stack.pop()
        if rec[1] != want and self.pending is None:
            self.pending = _err(INVALID, "operand type mismatch")
        return rec

    def pop_any(self) -> Record:
        frame: Frame = self.frames[-1]  # type: ignore[assignment]
        if len(self.stack) <= frame.height:
            if not frame.dead and self.pending is None:
                self.pending = _err(INVALID, "operand stack underflow")
            return (CONSTANT, I32, 0)
        return self.stack.pop()

    def set_dead(self) -> None:
        frame: Frame = self.frames[-1]  # type: ignore[assignment]
        frame.dead = True
        del self.stack[frame.height:]

    # ---- emission --------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        if not self.frames[-1].dead:  # type: ignore[attr-defined]
            self.code.append(line)
            self.code_bytes += len(line)

    def new_value(self, carrier: str) -> int:
        n = len(self.carrier)
        self.carrier.append(carrier)
        return n

    def name(self, n: int) -> str:
        names = self.names
        if n >= len(names):
            self.names = names = V_NAMES.upto(n)
        return names[n]

    def let(self, carrier: str, expr: str) -> int:
        n = self.new_value(carrier)
        self.emit(f"  let {self.name(n)}: {WGSL_TYPE[carrier]} = {expr};\n")
        return n

    def new_var(self) -> int:
        n = self.new_value("u")
        self.decls.append(f"  var {self.name(n)}: u32;\n")
        return n

    def operand(self, rec: Record, form: str) -> str:
        """A value's WGSL text in form "u" (u32 bits) or "f" (f32 value)."""
        kind, wtype, value = rec
        if kind == CONSTANT:
            text = f"0x{value:08x}u"
        elif kind == INDEX:
            text = "index"
        elif kind == NUMBER:
            text = self.name(value)
            have = self.carrier[value]
            if have == form:
                return text
            return f"bitcast<f32>({text})" if form == "f" else f"bitcast<u32>({text})"
        else:
            raise _err(UNSUPPORTED, "buffer handle used as a value")
        return f"bitcast<f32>({text})" if form == "f" else text

    def bits(self, rec: Record) -> str:
        return self.operand(rec, "u")

    def launder(self, rec: Record) -> Record:
        """A constant copied into a let, so that expressions using it are not const-expressions."""
        return (NUMBER, rec[1], self.let("u", f"0x{rec[2]:08x}u"))

    def raise_error_if(self, condition: str, code: KernelError) -> None:
        if not self.dead:
            self.uses_err = True
            self.emit(f"  if ({condition}) {{\n" + _raise_error(code) + "  }\n")

    # ---- frames ----------------------------------------------------------------------------------
    def block_type(self) -> int:
        value = self.r.leb(33, True)
        if value in BLOCK_TYPES:
            return BLOCK_TYPES[value]
        if value < 0:
            raise _err(UNSUPPORTED, "block type is unsupported")
        types = self.module.types
        sig = types[value] if value < len(types) else None
        if sig is None:
            raise _err(INVALID, "block type index out of range")
        params, results = sig
        if params or len(results) > 1 or (results and results[0] not in (I32, F32)):
            raise _err(UNSUPPORTED, "block type is unsupported")
        return results[0] if results else 0

    def enter_top_construct(self, at: int) -> None:
        """Before a top-level construct: pre-scan it and move the locals it assigns into vars."""
        written, self.targeted = prescan(self.r.data, at, self.r.end)
        locals_ = self.locals
        for i in (range(len(locals_)) if written is None else sorted(written)):
            if i >= len(locals_):
                continue  # the main pass reports the bad index
            rec = locals_[i]
            if rec[0] == VAR or rec[0] == HANDLE:
                continue  # already there / a handle: refused if the construct really assigns it
            if i not in self.var_locals:
                self.var_locals.add(i)
                self.decls.append(f"  var l{i}: u32;\n")
            self.emit(f"  l{i} = {self.bits(rec)};\n")
            locals_[i] = (VAR, rec[1], i)

    def open_frame(self, kind: int, at: int, result: int, head: str) -> None:
        frames: list[Frame] = self.frames  # type: ignore[assignment]
        if len(frames) > lim.MAX_BLOCK_DEPTH:
            raise _err(LIMIT, "control nesting limit")
        if len(frames) == 1:
            self.enter_top_construct(at)
        targeted = self.targeted
        wrapper = targeted is None or at in targeted
        parent = frames[-1]
        frame = Frame(kind, result, len(self.stack), wrapper, parent.dead)
        frame.mw_entry = self.mw
        if result:
            frame.result_var = self.new_var()
        if kind == LOOP:
            text = "  {\n"
            if wrapper:
                text = "  loop {\n" + OUT_OF_FUEL
                if not parent.dead:
                    self.uses_fuel = self.uses_err = True
        elif kind == BLOCK:
            text = "  loop {\n" if wrapper else "  {\n"
        else:
            text = ("  loop {\n" if wrapper else "") + head
        self.emit(text)
        frames.append(frame)
        self.known.clear()

    def close_frame(self, frame: Frame) -> None:
        """The `end` of a block, loop or if (not the function's)."""
        if frame.result:
            value = self.pop(frame.result)
            if self.pending is None and not frame.dead:
                self.emit(f"  {self.name(frame.result_var)} = {self.bits(value)};\n")
        if len(self.stack) != frame.height and self.pending is None:
            self.pending = _err(INVALID, "operand stack mismatch at block end")
        if frame.kind == IF and not frame.else_seen and frame.result and self.pending is None:
            self.pending = _err(INVALID, "if without else cannot produce a value")
        if self.pending is not None:
            raise self.pending
        live_end = not frame.dead
        frames: list[Frame] = self.frames  # type: ignore[assignment]
        frames.pop()
        self.known.clear()
        parent = frames[-1]
        mw = self.mw if live_end else ALL_SLOTS
        if frame.kind == IF:
            self.emit("  }\n  break;\n  }\n" if frame.wrapper else "  }\n")
            other = frame.then_live if frame.else_seen else frame.entry_live
            live_after = frame.reached or live_end or other
            if other:
                mw &= frame.mw_then if frame.else_seen else frame.mw_entry
        else:
            self.emit(("  break;\n  }\n" if live_end else "  }\n") if frame.wrapper else "  }\n")
            live_after = live_end or (frame.reached and frame.kind == BLOCK)
        if frame.reached and frame.kind != LOOP:
            mw &= frame.mw_in
        if live_after:
            self.mw = mw
        if frame.crossers:
            self.emit(self.redispatch(frame))
        if frame.result:
            self.stack.append((NUMBER, frame.result, frame.result_var) if live_after else (CONSTANT, frame.result, 0))
        if not live_after and not parent.dead:
            parent.dead = True

    def redispatch(self, frame: Frame) -> str:
        """After a wrapper that brk branches crossed: finish the branch here or break further out."""
        frames: list[Frame] = self.frames  # type: ignore[assignment]
        n = len(frames) - 1
        while n > 0 and not frames[n].wrapper:
            n -= 1
        if n == 0:
            raise AssertionError("a brk branch crossed a wrapper with no wrapper outside it")
        if n not in frame.crossers:
            return "  if (brk != 0u) {\n  break;\n  }\n"
        action = "continue" if frames[n].kind == LOOP else "break"
        if frame.crossers == {n}:
            return f"  if (brk != 0u) {{\n  brk = 0u;\n  {action};\n  }}\n"
        return f"  if (brk == {n}u) {{\n  brk = 0u;\n  {action};\n  }}\n  if (brk != 0u) {{\n  break;\n  }}\n"

    def label(self) -> int:
        depth = self.r.u32()
        if depth >= len(self.frames):
            raise _err(INVALID, "branch depth out of range")
        return len(self.frames) - 1 - depth

    def branch(self, target: int, value: Record | None) -> str:
        """Statements that take a branch to frame `target` (live code only), carrying `value`."""
        frames: list[Frame] = self.frames  # type: ignore[assignment]
        frame = frames[target]
        parts = []
        if value is not None:
            parts.append(f"  {self.name(frame.result_var)} = {self.bits(value)};\n")
        if target == 0:
            self.exit_mw &= self.mw
            parts.append("  return;\n")
            return "".join(parts)
        if not frame.wrapper:
            raise AssertionError("branch to a construct the pre-scan did not see targeted")
        frame.reached = True
        if frame.kind != LOOP:
            frame.mw_in &= self.mw
        crossed = [f for f in frames[target + 1:] if f.wrapper]
        if not crossed:
            parts.append("  continue;\n" if frame.kind == LOOP else "  break;\n")
        else:
            self.uses_brk = True
            for f in crossed:
                f.crossers.add(target)
            parts.append(f"  brk = {target}u;\n  break;\n")
        return "".join(parts)

    # ---- driver ----------------------------------------------------------------------------------
    def run(self) -> None:
        """The table-driven loop with every workspace limit tested at each head."""
        r = self.r
        data = r.data
        table = FLOW_TABLE
        max_pc, max_nodes, max_stack, max_code = lim.MAX_INSTRUCTIONS, lim.MAX_NODES, lim.MAX_STACK, lim.MAX_BODY_CODE
        self.code.append("")  # the declarations, filled in by finish()
        pc = 0
        while r.pos < r.end:
            if (pc >= max_pc or len(self.carrier) >= max_nodes or len(self.stack) > max_stack
                    or self.code_bytes > max_code):
                raise _err(LIMIT, "kernel workspace limit")
            opcode = data[r.pos]
            row = table[opcode]
            if row is None:
                raise _err(UNSUPPORTED, f"unsupported opcode 0x{opcode:02x}")
            r.pos += 1
            pc += 1
            if row[0](self, row[1]):
                self.finish()
                return
            if self.pending is not None:
                raise self.pending
        raise _err(INVALID, "missing function end")

    def finish(self) -> None:
        if self.gathers & self.writes:
            raise _err(UNSUPPORTED, "gather read of a written slot")
        self.rbw |= self.writes & ~self.exit_mw
        if self.uses_brk:
            self.decls.append("  var brk: u32 = 0u;\n")
        if self.uses_fuel:
            self.decls.append(f"  var fuel: u32 = params.{LOOP_BUDGET_FIELD};\n")  # set per device
        else:
            self.budget = 0
        self.code[0] = "".join(self.decls)


FlowHandler = Callable[[FlowLowering, object], "bool | None"]


# ---- control -----------------------------------------------------------------------------------
def _unreachable(st: FlowLowering, _: object) -> None:
    if not st.dead:
        st.uses_err = True
        st.emit(TRAP)
    st.set_dead()


def _nop(st: FlowLowering, _: object) -> None:
    return None


def _block(st: FlowLowering, kind: object) -> None:
    at = st.r.pos - 1
    st.open_frame(kind, at, st.block_type(), "")  # type: ignore[arg-type]


def _if(st: FlowLowering, _: object) -> None:
    at = st.r.pos - 1
    result = st.block_type()
    cond = st.pop(I32)
    if st.pending is not None:
        return
    head = "" if st.dead else f"  if ({st.bits(cond)} != 0u) {{\n"
    st.open_frame(IF, at, result, head)


def _else(st: FlowLowering, _: object) -> None:
    frame: Frame = st.frames[-1]  # type: ignore[assignment]
    if frame.kind != IF or frame.else_seen:
        raise _err(INVALID, "else without if")
    if frame.result:
        value = st.pop(frame.result)
        if st.pending is None and not frame.dead:
            st.emit(f"  {st.name(frame.result_var)} = {st.bits(value)};\n")
    if len(st.stack) != frame.height and st.pending is None:
        st.pending = _err(INVALID, "operand stack mismatch at block end")
    if st.pending is not None:
        return
    frame.then_live = not frame.dead
    frame.mw_then = st.mw
    frame.else_seen = True
    st.mw = frame.mw_entry
    st.known.clear()
    frame.dead = not frame.entry_live
    st.emit("  } else {\n")


def _end(st: FlowLowering, _: object) -> bool:
    frames: list[Frame] = st.frames  # type: ignore[assignment]
    if len(frames) > 1:
        st.close_frame(frames[-1])
        return False
    r = st.r
    if len(st.stack) != 0 or r.pos != r.end:
        raise _err(INVALID, "nonempty final stack or trailing code")
    if not st.dead:
        st.exit_mw &= st.mw
    return True


def _br(st: FlowLowering, _: object) -> None:
    target = st.label()
    frame: Frame = st.frames[target]  # type: ignore[assignment]
    rtype = frame.label_type()
    value = st.pop(rtype) if rtype else None
    if st.pending is not None:
        return
    if not st.dead:
        st.emit(st.branch(target, value))
    st.set_dead()


def _br_if(st: FlowLowering, _: object) -> None:
    target = st.label()
    frame: Frame = st.frames[target]  # type: ignore[assignment]
    cond = st.pop(I32)
    rtype = frame.label_type()
    value = None
    if rtype:
        value = st.pop(rtype)
        st.stack.append(value)
    if st.pending is not None or st.dead:
        return
    test = st.bits(cond)
    st.emit(f"  if ({test} != 0u) {{\n" + st.branch(target, value) + "  }\n")


def _br_table(st: FlowLowering, _: object) -> None:
    n = st.r.count()
    targets = [st.label() for _ in range(n)]
    default = st.label()
    frames: list[Frame] = st.frames  # type: ignore[assignment]
    rtype = frames[default].label_type()
    if any(frames[t].label_type() != rtype for t in targets):
        raise _err(INVALID, "br_table targets differ in type")
    selector = st.pop(I32)
    value = st.pop(rtype) if rtype else None
    if st.pending is not None:
        return
    if not st.dead:
        groups: dict[int, list[int]] = {}
        for i, t in enumerate(targets):
            if t != default:
                groups.setdefault(t, []).append(i)
        if sum(map(len, groups.values())) > lim.MAX_BR_TABLE_CASES:
            raise _err(LIMIT, "br_table case limit")
        if groups:
            pick = st.name(st.new_var())
            parts = [f"  switch ({st.bits(selector)}) {{\n"]
            for k, indices in enumerate(groups.values()):
                cases = ", ".join(f"{i}u" for i in indices)
                parts.append(f"  case {cases}: {{\n  {pick} = {k}u;\n  }}\n")
            parts.append(f"  default: {{\n  {pick} = {len(groups)}u;\n  }}\n  }}\n")
            for k, t in enumerate(groups):
                parts.append(f"  if ({pick} == {k}u) {{\n" + st.branch(t, value) + "  }\n")
            st.emit("".join(parts))
        st.emit(st.branch(default, value))
    st.set_dead()


def _return(st: FlowLowering, _: object) -> None:
    if not st.dead:
        st.emit(st.branch(0, None))
    st.set_dead()


# ---- values ------------------------------------------------------------------------------------
def _drop(st: FlowLowering, _: object) -> None:
    st.pop_any()


def _select(st: FlowLowering, typed: object) -> None:
    if typed:
        if st.r.u32() != 1:
            raise _err(UNSUPPORTED, "select type is unsupported")
        want = st.r.byte()
        if want != I32 and want != F32:
            raise _err(UNSUPPORTED, "select type is unsupported")
    cond = st.pop(I32)
    second = st.pop(want) if typed else st.pop_any()
    first = st.pop(second[1])
    if st.pending is not None:
        return
    if st.dead:
        st.stack.append((CONSTANT, second[1], 0))
        return
    if first == second:
        st.stack.append(first)
        return
    if first[0] == HANDLE or second[0] == HANDLE:
        raise _err(UNSUPPORTED, "select of a buffer handle")
    n = st.let("u", f"select({st.bits(second)}, {st.bits(first)}, {st.bits(cond)} != 0u)")
    st.stack.append((NUMBER, second[1], n))


def _numeric(st: FlowLowering, op: NumericOp) -> None:  # type: ignore[misc]
    args = [st.pop(t) for t in reversed(op.params)]
    args.reverse()
    if op.is_float:
        st.is_float = True
    if st.pending is not None:
        return
    if st.dead:
        st.stack.append((CONSTANT, op.result, 0))
        return
    if all(a[0] == CONSTANT for a in args):
        args[0] = st.launder(args[0])
    texts = [st.operand(a, form) for a, form in zip(args, op.forms)]
    if op.trap:
        st.raise_error_if(op.trap.format(*texts), KernelError.TRAP)
    st.helpers.update(op.helpers)
    st.stack.append((NUMBER, op.result, st.let(op.carrier, op.expr.format(*texts))))


def _prefixed(st: FlowLowering, _: object) -> None:
    sub = st.r.u32()
    op = SATURATING.get(sub)
    if op is None:
        raise _err(UNSUPPORTED, f"unsupported opcode 0xfc 0x{sub:02x}")
    _numeric(st, op)


def _reinterpret(st: FlowLowering, result: object) -> None:
    value = st.pop(I32 if result == F32 else F32)
    st.is_float = True
    if st.pending is not None:
        return
    kind = value[0]
    if kind == HANDLE:
        raise _err(UNSUPPORTED, "buffer handle used as a value")
    if kind == INDEX and not st.dead:
        st.stack.append((NUMBER, result, st.let("u", "index")))  # type: ignore[arg-type]
    else:
        st.stack.append((kind if kind != INDEX else CONSTANT, result, value[2]))  # type: ignore[arg-type]


# ---- locals ------------------------------------------------------------------------------------
def _local_get(st: FlowLowering, _: object) -> None:
    i = _local_index(st)
    rec = st.locals[i]
    if rec[0] == VAR:
        if st.dead:
            rec = (CONSTANT, rec[1], 0)
        else:
            known = st.known.get(i)
            if known is None:
                known = st.known[i] = (NUMBER, rec[1], st.let("u", f"l{i}"))
            rec = known
    st.stack.append(rec)


def _local_set(st: FlowLowering, tee: object) -> None:
    i = _local_index(st)
    value = st.pop(st.local_types[i])
    if st.pending is not None:
        return
    if len(st.frames) == 1:
        st.locals[i] = value
    else:
        if value[0] == HANDLE or st.locals[i][0] == HANDLE:
            raise _err(UNSUPPORTED, HANDLE_IN_VAR)
        if st.locals[i][0] != VAR:
            raise AssertionError("a local assigned inside control flow was not moved into a var")
        st.emit(f"  l{i} = {st.bits(value)};\n")
        st.known[i] = value
    if tee:
        st.stack.append(value)


# ---- intrinsics --------------------------------------------------------------------------------
def _flow_get(st: FlowLowering, intrinsic: Intrinsic) -> None:  # type: ignore[misc]
    if st.dead:
        st.pop(I32)
        st.stack.append((CONSTANT, I32, 0))
        return
    _get_buffer(st, intrinsic)


def _flow_read(st: FlowLowering, intrinsic: Intrinsic) -> None:  # type: ignore[misc]
    if not intrinsic.gpu:
        raise _err(UNSUPPORTED, "intrinsic type unsupported on GPU")
    element = st.pop(I32)
    handle = st.pop(I32)
    if st.dead:
        st.stack.append((CONSTANT, intrinsic.scalar, 0))
        return
    if handle[0] != HANDLE:
        raise _err(UNSUPPORTED, "handle is not a selected buffer slot")
    if st.pending is not None:
        raise st.pending
    slot = handle[2]
    _check_slot(st, slot, intrinsic, st.can_read)
    bit = 1 << slot
    expr = LOAD_EXPR[intrinsic.elem].format(slot)  # type: ignore[index]
    if element[0] == INDEX:
        if not st.mw & bit:
            st.rbw |= bit
    else:
        if element[0] == CONSTANT:  # naga rejects a constant index it can prove out of range
            element = st.launder(element)
        at = st.bits(element)
        st.raise_error_if(f"{at} >= arrayLength(&slot{slot})", KernelError.INDEX_RANGE)
        expr = expr.replace("[index]", f"[{at}]")
        st.gathers |= bit
    st.reads |= bit
    st.stack.append((NUMBER, intrinsic.scalar, st.let("u", expr)))


def _flow_write(st: FlowLowering, intrinsic: Intrinsic) -> None:  # type: ignore[misc]
    if not intrinsic.gpu:
        raise _err(UNSUPPORTED, "intrinsic type unsupported on GPU")
    data = st.pop(intrinsic.scalar)
    if st.dead:
        st.pop(I32)
        st.pop(I32)
        return
    if data[0] == HANDLE:
        raise _err(INVALID, "buffer handle cannot be stored as data")
    slot = st.access_operands()
    _check_slot(st, slot, intrinsic, st.can_write)
    st.emit(f"  slot{slot}[index] = {STORE_WRAP[intrinsic.elem].format(st.bits(data))};\n")  # type: ignore[index]
    bit = 1 << slot
    st.mw |= bit
    st.writes |= bit


FlowLowering.intrinsic_handlers = {
    IntrinsicKind.GET: _flow_get,  # type: ignore[dict-item]
    IntrinsicKind.READ: _flow_read,  # type: ignore[dict-item]
    IntrinsicKind.WRITE: _flow_write,  # type: ignore[dict-item]
    IntrinsicKind.MANAGEMENT: _management,
}

# The extended subset: opcode -> (handler, argument); NUMERIC rows come from ops.py.
FLOW_OPCODES: dict[int, tuple[FlowHandler, object]] = {
    0x00: (_unreachable, None),
    0x01: (_nop, None),
    0x02: (_block, BLOCK),
    0x03: (_block, LOOP),
    0x04: (_if, None),
    0x05: (_else, None),
    0x0B: (_end, None),
    0x0C: (_br, None),
    0x0D: (_br_if, None),
    0x0E: (_br_table, None),
    0x0F: (_return, None),
    0x10: (_call, None),  # type: ignore[dict-item]
    0x1A: (_drop, None),
    0x1B: (_select, False),
    0x1C: (_select, True),
    0x20: (_local_get, None),
    0x21: (_local_set, False),
    0x22: (_local_set, True),
    0x41: (_i32_const, None),  # type: ignore[dict-item]
    0x43: (_f32_const, None),  # type: ignore[dict-item]
    0xBC: (_reinterpret, I32),
    0xBE: (_reinterpret, F32),
    0xFC: (_prefixed, None),
    **{op: (_numeric, row) for op, row in NUMERIC.items()},  # type: ignore[dict-item]
}
FLOW_TABLE: list[tuple[FlowHandler, object] | None] = [FLOW_OPCODES.get(op) for op in range(256)]

# What the pre-scan must skip after each opcode (derived from the table's immediates).
S_STOP, S_PLAIN, S_OPEN, S_END, S_BRANCH, S_TABLE, S_SET, S_U32, S_I32, S_F32, S_SELECT = range(11)
_SCAN = {0x02: S_OPEN, 0x03: S_OPEN, 0x04: S_OPEN, 0x0B: S_END, 0x0C: S_BRANCH, 0x0D: S_BRANCH,
         0x0E: S_TABLE, 0x21: S_SET, 0x22: S_SET, 0x20: S_U32, 0x10: S_U32, 0xFC: S_U32, 0x41: S_I32,
         0x43: S_F32, 0x1C: S_SELECT}
SCAN_KIND = bytes(_SCAN.get(op, S_PLAIN if FLOW_TABLE[op] is not None else S_STOP) for op in range(256))

assert SLOT_COUNT <= 32
