"""Structured control flow in WGSL: how constructs open and close and how branches reach them.

WGSL has no labelled break, so a Wasm construct that some branch targets becomes a WGSL
`loop { ... }` (a "wrapper"); the others become a plain `{ ... }` or `if`. The pre-scan
(prescan.py) tells which constructs are targeted. A branch to the innermost enclosing wrapper is a
plain `break` (block, if) or `continue` (loop); a branch further out stores the target's frame
depth in `var brk` and breaks, and after each wrapper it crossed a check re-dispatches it. A branch
to the function (and `return`) is a WGSL `return`; a return right before the final end changes
nothing and emits nothing. br_table becomes a `switch` that picks the target's position in the
list of distinct targets, then one `if` per target. Code after an unconditional branch is unreachable:
it is still checked, but nothing is emitted for it.

Values in and out (multi-value block types). A construct's parameters are its initial stack (an
if's else-part starts with them again; an if without else is an empty else). Its results travel in
one `var v<n>` each (a u32, or a vec2<u32> for a 64-bit type), assigned on every edge into its end: the fall-through and every branch
to a block or if. A branch to a loop carries the loop's parameters instead, so a loop some branch
targets keeps them in vars, assigned before it opens and by every branch back, and reads them
into fresh lets at the head of every pass (stack values stay snapshots, and a branch that passes
the parameters back in another order reads only lets).

Locals. Before the first instruction of a top-level construct, the pre-scan finds the locals it
assigns and each moves into a `var l<i>` (instructions.py says how they are then read and
written). Locals the construct never assigns keep their records: the index and the buffer
handles survive loops.

Loop budget. `var fuel: u32 = params.pad0` counts the passes through the heads of all wrapper
loops of an invocation together; the host sets it to at most reader.LOOP_BUDGET, lower where the
adapter cuts loops short (abi/kernel.py, gpu/probe.py); the pass that finds it at zero raises
KernelError.LOOP_BUDGET in the error word, so no kernel keeps the device busy for longer than
about LOOP_BUDGET x (body instructions) steps per invocation.

Write flags. `mw` is the set of slots every path to the current point has written (at the
invocation's own element); a branch carries it to its target, and a join keeps what all its
incoming paths agree on. A read at the index of a slot not in `mw` is a read before write; a
written slot that some path to the kernel's exit does not write is read_before_write too, so the
host seeds its scratch output for the elements the kernel skips. Paths ending in a trap or an
exhausted budget commit nothing and count for neither.
"""
from __future__ import annotations

from ..abi.kernel import KernelError
from . import addressvars
from . import reader as lim
from .contract import CompileError
from .frames import ALL_SLOTS, Frame, FrameKind
from .intrinsics import F32, F64, I32, I64
from .lowering import INVALID, LIMIT, LOCAL_TYPES, UNSUPPORTED, Lowering, raise_error
from .prescan import prescan
from .records import BITS_FORM, CONSTANT, FRAME, HANDLE, NUMBER, VAR, WGSL_TYPE, Record, local_var
from .shadow import check_joinable

BlockType = tuple[tuple[int, ...], tuple[int, ...]]  # (param types, result types)
# 0x40, 0x7f, 0x7e, 0x7d, 0x7c
BLOCK_TYPES: dict[int, BlockType] = {-64: ((), ()), -1: ((), (I32,)), -2: ((), (I64,)), -3: ((), (F32,)),
                                     -4: ((), (F64,))}
TRAP = raise_error(KernelError.TRAP)
OUT_OF_FUEL = "  if (fuel == 0u) {\n" + raise_error(KernelError.LOOP_BUDGET) + "  }\n  fuel = fuel - 1u;\n"
# The opening of a construct, by (kind, wrapper); an if's head follows its text.
OPENING = {(FrameKind.BLOCK, False): "  {\n", (FrameKind.BLOCK, True): "  loop {\n",
           (FrameKind.LOOP, False): "  {\n", (FrameKind.LOOP, True): "  loop {\n" + OUT_OF_FUEL,
           (FrameKind.IF, False): "", (FrameKind.IF, True): "  loop {\n"}


def block_type(st: Lowering) -> BlockType:
    value = st.r.leb(33, True)
    if value in BLOCK_TYPES:
        return BLOCK_TYPES[value]
    if value < 0:
        raise CompileError(UNSUPPORTED, "block type is unsupported")
    types = st.module.types
    sig = types[value] if value < len(types) else None
    if sig is None:
        raise CompileError(INVALID, "block type index out of range")
    params, results = tuple(sig[0]), tuple(sig[1])
    if not LOCAL_TYPES.issuperset(params + results):
        raise CompileError(UNSUPPORTED, "block type is unsupported")
    return params, results


def enter_top_construct(st: Lowering, at: int) -> None:
    """Before a top-level construct: pre-scan it and move the locals it assigns into vars."""
    r = st.r
    written, st.targeted = prescan(r.data, at, r.end, st.scan_kinds)
    locals_ = st.locals
    base = st.local_base  # the function now lowered (an inlined callee's locals start there)
    for i in (range(base, len(locals_)) if written is None else sorted(base + w for w in written)):
        if i >= len(locals_):
            continue  # the main pass reports the bad index
        rec = locals_[i]
        if rec[0] == VAR or rec[0] == HANDLE or rec[0] == FRAME:
            continue  # already there / an address: refused if the construct really assigns it
        name = local_var(i, rec[1])
        if name not in st.var_locals:
            st.var_locals.add(name)
            st.decls.append(f"  var {name}: {WGSL_TYPE[BITS_FORM[rec[1]]]};\n")
        st.emit(f"  {name} = {st.bits(rec)};\n")
        locals_[i] = (VAR, rec[1], i)


def open_frame(st: Lowering, kind: FrameKind, at: int, block: BlockType, head: str = "") -> None:
    params, results = block
    frames = st.frames
    if len(frames) > lim.MAX_BLOCK_DEPTH:
        raise CompileError(LIMIT, "control nesting limit")
    args = st.pop_types(params)
    if st.pending is not None:
        return
    if len(frames) - 1 == st.frame_base:
        enter_top_construct(st, at)
    st.flush_pending()
    targeted = st.targeted
    wrapper = targeted is None or at in targeted
    parent = frames[-1]
    frame = Frame(kind, params, results, len(st.stack), wrapper, parent.dead, not parent.dead)
    frame.mw_entry = st.mw
    addressvars.opened(st, frame)
    frame.result_vars = tuple(st.new_var(t) for t in results)
    reentered = kind == FrameKind.LOOP and wrapper
    if reentered and not parent.dead:
        st.uses_fuel = st.uses_err = True
    if reentered:  # branches to it come back with new parameters: they travel in vars
        frame.param_vars = tuple(st.new_var(t) for t in params)
        st.emit(assignments(st, frame.param_vars, args))
    st.emit(OPENING[kind, wrapper] + head)
    st.push_frame(frame)
    st.known.clear()
    if reentered:  # each pass reads them into lets, so stack values stay snapshots
        args = [(NUMBER, t, st.let(BITS_FORM[t], st.names[var])) for t, var in zip(params, frame.param_vars)]
    frame.param_records = tuple(args)
    st.stack.extend(args)


def assignments(st: Lowering, variables: tuple[int, ...], values: list[Record]) -> str:
    """Statements that store `values` (bits) in the vars numbered `variables`."""
    return "".join(f"  {st.names[var]} = {st.bits(value)};\n" for var, value in zip(variables, values))


def end_part(st: Lowering, frame: Frame) -> None:
    """The fall-through into the end of `frame` (at its end, or at an if's else): its results go to
    their vars, and nothing else may be left on the stack."""
    values = st.pop_types(frame.results)
    if st.pending is None and not frame.dead:
        check_joinable(st)
        st.emit(assignments(st, frame.result_vars, values))
    if len(st.stack) != frame.height and st.pending is None:
        st.pending = CompileError(INVALID, "operand stack mismatch at block end")


def close_frame(st: Lowering, frame: Frame) -> None:
    """The `end` of a block, loop or if (not the function's). An if without else has an empty else:
    its parameters are its results, which Wasm allows only when their types are the same."""
    if frame.kind == FrameKind.IF and not frame.else_seen and frame.results:
        if frame.params != frame.results and st.pending is None:
            st.pending = CompileError(INVALID, "if without else cannot produce a value")
        else:
            switch_to_else(st, frame)
    end_part(st, frame)
    if st.pending is not None:
        raise st.pending
    live_end = not frame.dead
    st.drop_pending()
    st.pop_frame()
    st.known.clear()
    parent = st.top
    mw = st.mw if live_end else ALL_SLOTS
    other = False  # an if's other part reaches its end
    if frame.kind == FrameKind.IF:
        st.emit("  }\n  break;\n  }\n" if frame.wrapper else "  }\n")
        other = frame.then_live if frame.else_seen else frame.entry_live
        live_after = frame.reached or live_end or other
        if other:
            mw &= frame.mw_then if frame.else_seen else frame.mw_entry
    else:
        st.emit(("  break;\n  }\n" if live_end else "  }\n") if frame.wrapper else "  }\n")
        live_after = live_end or (frame.reached and frame.kind == FrameKind.BLOCK)
    if frame.reached and frame.kind != FrameKind.LOOP:
        mw &= frame.mw_in
    addressvars.closed(st, frame, live_end, other)
    if live_after:
        st.mw = mw
    if frame.crossers:
        st.emit(redispatch(st, frame))
    for wtype, var in zip(frame.results, frame.result_vars):
        st.stack.append((NUMBER, wtype, var) if live_after else (CONSTANT, wtype, 0))
    if not live_after and not parent.dead:
        parent.dead = True


def redispatch(st: Lowering, frame: Frame) -> str:
    """After a wrapper that brk branches crossed: finish the branch here or break further out."""
    frames = st.frames
    n = len(frames) - 1
    while n > 0 and not frames[n].wrapper:
        n -= 1
    if n == 0:
        raise AssertionError("a brk branch crossed a wrapper with no wrapper outside it")
    if n not in frame.crossers:
        return "  if (brk != 0u) {\n  break;\n  }\n"
    action = "continue" if frames[n].kind == FrameKind.LOOP else "break"
    if frame.crossers == {n}:
        return f"  if (brk != 0u) {{\n  brk = 0u;\n  {action};\n  }}\n"
    return f"  if (brk == {n}u) {{\n  brk = 0u;\n  {action};\n  }}\n  if (brk != 0u) {{\n  break;\n  }}\n"


def label(st: Lowering) -> int:
    depth = st.r.u32()
    if depth >= len(st.frames) - st.frame_base:  # an inlined callee's labels end at its own frame
        raise CompileError(INVALID, "branch depth out of range")
    return len(st.frames) - 1 - depth


def branch(st: Lowering, target: int, values: list[Record]) -> str:
    """Statements that take a branch to frame `target` (live code only), carrying `values`."""
    frames = st.frames
    frame = frames[target]
    parts = [assignments(st, frame.label_vars, values)]
    if target == 0:
        if st.ext.sp_offset:
            raise CompileError(UNSUPPORTED, "the kernel returns with its stack pointer moved")
        st.exit_mw &= st.mw
        parts.append("  return;\n")
        return "".join(parts)
    if target != st.frame_base:  # (a branch to an inlined callee's frame is its return)
        check_joinable(st)
    if not frame.wrapper:
        raise AssertionError("branch to a construct the pre-scan did not see targeted")
    frame.reached = True
    addressvars.branched(st, frame)
    if frame.kind != FrameKind.LOOP:
        frame.mw_in &= st.mw
    crossed = [f for f in frames[target + 1:] if f.wrapper]
    if not crossed:
        parts.append("  continue;\n" if frame.kind == FrameKind.LOOP else "  break;\n")
    else:
        st.uses_brk = True
        for f in crossed:
            f.crossers.add(target)
        parts.append(f"  brk = {target}u;\n  break;\n")
    return "".join(parts)


def switch_to_else(st: Lowering, frame: Frame) -> None:
    """The then-part of `frame` (an if) ends; its else-part starts with the if's parameters."""
    end_part(st, frame)
    if st.pending is not None:
        return
    frame.then_live = not frame.dead
    frame.mw_then = st.mw
    addressvars.to_else(st, frame)
    frame.else_seen = True
    st.mw = frame.mw_entry
    st.known.clear()
    st.drop_pending()
    frame.dead = not frame.entry_live
    st.emit("  } else {\n")
    st.stack.extend(frame.param_records)
