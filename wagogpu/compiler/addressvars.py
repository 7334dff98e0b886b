"""Locals that control flow assigns a buffer handle or a stack address.

A local assigned inside a construct lives in a WGSL var (instructions.py), but a var cannot hold a
handle (its number is the guest's, unknown to the GPU) or a frame address (it exists only at
compile time, shadow.py). Compilers still put them there: musl's FORCE_EVAL stores to a volatile
stack slot and leaves its address in a scratch local; Debug builds and libm frames reuse a local
for an address on one path and a number on another, and never read it after the paths meet.

So such an assignment leaves the var as it is and marks the local *unknown* on the path it is
on: reads further along that straight-line stretch get the record itself (st.known), and a read
of the var where the mark may hold is refused with the reason. The mark travels with control
flow as the write flags do (constructs.py): a branch carries it to its target, a join unites its
incoming paths, code after a branch is not on any path. A loop's back edge carries it to the
loop's head, so a var read since the loop opened, or one later in the loop, is refused too.
A plain assignment in the function's straight-line code gives the local a record again.
"""
from __future__ import annotations

from .contract import CompileError
from .frames import Frame, FrameKind
from .lowering import UNSUPPORTED, Lowering
from .records import FRAME, HANDLE, Record, local_var

LOOP, IF = FrameKind.LOOP, FrameKind.IF
HANDLE_IN_VAR = "buffer handle in a local that control flow assigns"
# Why a local assigned inside control flow cannot keep a value, by record kind.
ADDRESS_IN_VAR = {HANDLE: HANDLE_IN_VAR, FRAME: "stack address in a local that control flow assigns"}
Marks = dict[int, str]


def assign(st: Lowering, i: int, value: Record) -> None:
    """local.set of a handle or stack address to local i (a var) inside control flow."""
    st.ext.unknown_locals[i] = ADDRESS_IN_VAR[value[0]]


def assign_number(st: Lowering, i: int) -> None:
    """local.set of a value in the function's straight-line code: the local is a record again."""
    if st.ext.unknown_locals:
        st.ext.unknown_locals.pop(i, None)


def var_read(st: Lowering, i: int, wtype: int) -> str:
    """The name of local i's var for a read, refused where the var may lack the local's value."""
    ext = st.ext
    message = ext.unknown_locals.get(i)
    if message is None:
        for frame in st.frames:
            if frame.unknown_back and i in frame.unknown_back:
                message = frame.unknown_back[i]
                break
    if message is not None:
        raise CompileError(UNSUPPORTED, message)
    ext.events += 1
    ext.var_reads[i] = ext.events
    return local_var(i, wtype)


def opened(st: Lowering, frame: Frame) -> None:
    ext = st.ext
    ext.events += 1
    frame.opened = ext.events
    if ext.unknown_locals and frame.kind == IF:
        frame.unknown_entry = dict(ext.unknown_locals)


def branched(st: Lowering, frame: Frame) -> None:
    """A live branch to `frame`: the marks of this path go with it."""
    marks = st.ext.unknown_locals
    if not marks:
        return
    if frame.kind == LOOP:
        reads = st.ext.var_reads
        for i, message in marks.items():
            if reads.get(i, -1) > frame.opened:
                raise CompileError(UNSUPPORTED, message)  # a read the next pass repeats
        frame.unknown_back = {**(frame.unknown_back or {}), **marks}
    else:
        frame.unknown_in = {**(frame.unknown_in or {}), **marks}


def to_else(st: Lowering, frame: Frame) -> None:
    frame.unknown_then = st.ext.unknown_locals
    st.ext.unknown_locals = dict(frame.unknown_entry or {})


def closed(st: Lowering, frame: Frame, live_end: bool, other_live: bool) -> None:
    """At `frame`'s end: the marks of every path that reaches the code after it."""
    marks: Marks = dict(st.ext.unknown_locals) if live_end else {}
    if frame.kind == IF and other_live:
        marks.update((frame.unknown_then if frame.else_seen else frame.unknown_entry) or {})
    if frame.reached and frame.kind != LOOP and frame.unknown_in:
        marks.update(frame.unknown_in)
    if live_end and frame.unknown_back:  # what a back edge brought to the head may reach the end
        marks.update(frame.unknown_back)
    st.ext.unknown_locals = marks


def forget(st: Lowering, first: int) -> None:
    """An inlined callee's locals (from index `first`) end with its call."""
    marks = st.ext.unknown_locals
    for i in [i for i in marks if i >= first]:
        del marks[i]
