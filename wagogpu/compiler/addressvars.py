"""Locals that control flow assigns a buffer handle or a stack address.

A local assigned inside a construct lives in a WGSL var (instructions.py), but a var cannot hold a
handle (its number is the guest's, unknown to the GPU) or a frame address (it exists only at
compile time, shadow.py). Compilers still put them there: musl's FORCE_EVAL stores to a volatile
stack slot and leaves its address in a scratch local; -O0 code loads a handle from its frame into
a local inside a branch and uses it there; Debug builds and libm frames reuse a local for an
address on one path and a number on another, and never read it after the paths meet.

So such an assignment leaves the var as it is and *marks* the local on the path it is on with
the record it holds: a read on that path gets the record. The marks are a per-path state that
travels with control flow as the write flags do (constructs.py): a branch carries them to its
target, code after a branch is on no path, and a join merges its incoming paths: a local marked
with the same record on every one of them keeps it; one marked on some paths only, or with
different records, is *conflicted*, and a read of it is refused with the reason. A number assigned
inside control flow clears the mark on its path (the var holds it there); one assigned in the
function's straight-line code gives the local a record again.

Loops: lowering reads a loop's body once, with the marks at its entry; a back edge that brings
other marks to its head would change what an earlier read in the body saw, so it is refused when
the local was read since the loop opened, and otherwise the local is conflicted in the rest of
the loop and after it.
"""
from __future__ import annotations

from functools import reduce

from .contract import CompileError
from .frames import Frame, FrameKind
from .lowering import UNSUPPORTED, Lowering
from .records import FRAME, HANDLE, Record

LOOP, IF = FrameKind.LOOP, FrameKind.IF
HANDLE_IN_VAR = "buffer handle in a local that control flow assigns"
# Why a local assigned inside control flow cannot keep a value, by record kind.
ADDRESS_IN_VAR = {HANDLE: HANDLE_IN_VAR, FRAME: "stack address in a local that control flow assigns"}
Mark = tuple[str, Record | None]  # (why, the record every path here agrees on; None: conflicted)
Marks = dict[int, Mark]  # local -> its mark; never mutated once made (paths share them)
NONE: Marks = {}


def assign(st: Lowering, i: int, value: Record) -> None:
    """local.set of a handle or stack address to local i (a var) inside control flow."""
    st.ext.unknown_locals = {**st.ext.unknown_locals, i: (ADDRESS_IN_VAR[value[0]], value)}


def assign_number(st: Lowering, i: int) -> None:
    """local.set of a value: the local's var (or record) holds it on this path."""
    marks = st.ext.unknown_locals
    if i in marks:
        st.ext.unknown_locals = {k: m for k, m in marks.items() if k != i}


def marked(st: Lowering, i: int) -> Record | None:
    """The record a read of local i (a var) gets on this path, None when its var holds its value;
    refused where the paths to here disagree."""
    ext = st.ext
    mark = ext.unknown_locals.get(i)
    for frame in st.frames:
        if frame.unknown_back and i in frame.unknown_back:
            mark = (frame.unknown_back[i][0], None)
            break
    ext.events += 1
    ext.var_reads[i] = ext.events
    if mark is None:
        return None
    if mark[1] is None:
        raise CompileError(UNSUPPORTED, mark[0])
    return mark[1]



def merge(a: Marks, b: Marks) -> Marks:
    """The marks where two paths meet."""
    if a is b or a == b:
        return a
    out: Marks = {}
    for i in a.keys() | b.keys():
        x, y = a.get(i), b.get(i)
        if x is not None and x == y:
            out[i] = x
        else:
            out[i] = ((x or y or ("", None))[0], None)
    return out


def opened(st: Lowering, frame: Frame) -> None:
    ext = st.ext
    ext.events += 1
    frame.opened = ext.events
    frame.unknown_entry = ext.unknown_locals


def branched(st: Lowering, frame: Frame) -> None:
    """A live branch to `frame`: the marks of this path go with it."""
    marks = st.ext.unknown_locals
    if frame.kind != LOOP:
        frame.unknown_in = marks if frame.unknown_in is None else merge(frame.unknown_in, marks)
        return
    entry = frame.unknown_entry or NONE
    if marks is entry or marks == entry:
        return
    reads = st.ext.var_reads
    changed = {i: ((marks.get(i) or entry[i])[0], None) for i in marks.keys() | entry.keys()
               if marks.get(i) != entry.get(i)}
    for i, (message, _) in changed.items():
        if reads.get(i, -1) > frame.opened:
            raise CompileError(UNSUPPORTED, message)  # a read the next pass repeats with another value
    frame.unknown_back = {**(frame.unknown_back or NONE), **changed}


def to_else(st: Lowering, frame: Frame) -> None:
    frame.unknown_then = st.ext.unknown_locals
    st.ext.unknown_locals = frame.unknown_entry or NONE


def closed(st: Lowering, frame: Frame, live_end: bool, other_live: bool) -> None:
    """At `frame`'s end: the marks of every path that reaches the code after it."""
    paths: list[Marks] = [st.ext.unknown_locals] if live_end else []
    if frame.kind == IF and other_live:
        paths.append((frame.unknown_then if frame.else_seen else frame.unknown_entry) or NONE)
    if frame.reached and frame.kind != LOOP and frame.unknown_in is not None:
        paths.append(frame.unknown_in)
    marks = reduce(merge, paths) if paths else NONE
    if live_end and frame.unknown_back:  # what a back edge brought to the head may reach the end
        marks = {**marks, **frame.unknown_back}
    st.ext.unknown_locals = marks


def forget(st: Lowering, first: int) -> None:
    """An inlined callee's locals (from index `first`) end with its call."""
    marks = st.ext.unknown_locals
    if any(i >= first for i in marks):
        st.ext.unknown_locals = {i: m for i, m in marks.items() if i < first}
