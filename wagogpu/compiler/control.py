"""Handlers of the control instructions: block, loop, if, else, end, br, br_if, br_table, return and
unreachable. What they emit and why is constructs.py's; here are their Wasm operand rules.
"""
from __future__ import annotations

from . import reader as lim
from .constructs import TRAP, block_type, branch, close_frame, label, open_frame, switch_to_else
from .contract import CompileError
from .frames import FrameKind
from .inline import callee_return
from .intrinsics import I32
from .lowering import INVALID, LIMIT, Lowering
from .optable import OP_END
from .records import Record
from .shadow import check_restored


def unreachable(st: Lowering) -> None:
    if not st.top.dead:
        st.uses_err = True
        st.emit(TRAP)
    st.set_dead()


def block(st: Lowering, kind: FrameKind) -> None:
    at = st.r.pos - 1
    open_frame(st, kind, at, block_type(st))


def if_(st: Lowering) -> None:
    at = st.r.pos - 1
    sig = block_type(st)
    cond = st.pop(I32)
    if st.pending is not None:
        return
    head = "" if st.top.dead else f"  if ({st.bits(cond)} != 0u) {{\n"
    open_frame(st, FrameKind.IF, at, sig, head)


def else_(st: Lowering) -> None:
    frame = st.top
    if frame.kind != FrameKind.IF or frame.else_seen:
        raise CompileError(INVALID, "else without if")
    switch_to_else(st, frame)


def end(st: Lowering) -> bool:
    frames = st.frames
    if len(frames) - 1 > st.frame_base:
        close_frame(st, frames[-1])
        return False
    if st.frame_base:  # an inlined callee's final end: inline.py closes its frame
        return True
    r = st.r
    if st.stack or r.pos != r.end:
        raise CompileError(INVALID, "nonempty final stack or trailing code")
    if not st.top.dead:
        st.exit_mw &= st.mw
        check_restored(st, 0)
    return True


def br(st: Lowering) -> None:
    target = label(st)
    values = st.pop_types(st.frames[target].label_types)
    if st.pending is not None:
        return
    if not st.top.dead:
        st.emit(branch(st, target, values))
    st.set_dead()


def br_if(st: Lowering) -> None:
    target = label(st)
    cond = st.pop(I32)
    values = st.pop_types(st.frames[target].label_types)
    st.stack.extend(values)
    if st.pending is not None or st.top.dead:
        return
    test = st.bits(cond)
    st.emit(f"  if ({test} != 0u) {{\n" + branch(st, target, values) + "  }\n")


def br_table(st: Lowering) -> None:
    n = st.r.count()
    targets = [label(st) for _ in range(n)]
    default = label(st)
    frames = st.frames
    types = frames[default].label_types
    if any(frames[t].label_types != types for t in targets):
        raise CompileError(INVALID, "br_table targets differ in type")
    selector = st.pop(I32)
    values = st.pop_types(types)
    if st.pending is not None:
        return
    if not st.top.dead:
        st.emit(_table_dispatch(st, targets, default, selector, values))
    st.set_dead()


def _table_dispatch(st: Lowering, targets: list[int], default: int, selector: Record, values: list[Record]) -> str:
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(targets):
        if t != default:
            groups.setdefault(t, []).append(i)
    if sum(map(len, groups.values())) > lim.MAX_BR_TABLE_CASES:
        raise CompileError(LIMIT, "br_table case limit")
    parts = []
    if groups:
        pick = st.names[st.new_var()]
        parts.append(f"  switch ({st.bits(selector)}) {{\n")
        for k, indices in enumerate(groups.values()):
            cases = ", ".join(f"{i}u" for i in indices)
            parts.append(f"  case {cases}: {{\n  {pick} = {k}u;\n  }}\n")
        parts.append(f"  default: {{\n  {pick} = {len(groups)}u;\n  }}\n  }}\n")
        for k, t in enumerate(groups):
            parts.append(f"  if ({pick} == {k}u) {{\n" + branch(st, t, values) + "  }\n")
    parts.append(branch(st, default, values))
    return "".join(parts)


def return_(st: Lowering) -> None:
    if st.frame_base:
        callee_return(st)
        return
    r = st.r
    if not st.top.dead:
        if len(st.frames) == 1 and r.end - r.pos == 1 and r.data[r.pos] == OP_END:
            st.exit_mw &= st.mw  # right before the final end: the return changes nothing
        else:
            st.emit(branch(st, 0, []))
    st.set_dead()
