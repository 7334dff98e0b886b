"""Calls to defined functions inside kernels: inlined at the call site.

Why inlining rather than WGSL functions: the shader keeps one `main`, so a trap, an exhausted loop
budget or an out-of-range load anywhere in a callee raises the error word and returns from the
invocation directly (a WGSL function could only return to its caller, which would then have to
test a flag after every call); buffer handles, the invocation index and stack addresses reach the
callee as the records they are (records.py), so a helper that writes at the index still writes at
the index; and the callee is lowered for the constants it is called with.

A call opens a frame for the callee (a BLOCK with the callee's results), whose locals are its
arguments followed by its declared locals, appended to the caller's (st.local_base is where they
start; st.frame_base is the callee's frame, so branch depths and "top level" are the callee's).
The driver then lowers the callee's body to its final end. When no branch or `return` inside
control flow targets the callee's frame, the frame emits no WGSL at all: its straight-line code
is the caller's, and its results stay records. Otherwise it is a wrapper `loop { ... break; }`
(constructs.py) and a `return` is a branch to it.

Bounds (reader.py): nesting MAX_INLINE_DEPTH, callee bytes MAX_INLINE_BYTES and instructions
MAX_INLINE_INSTRUCTIONS over all inlined calls of a kernel. Recursion, direct or mutual, stays on
the CPU (its depth is a run-time value), and so does call_indirect (its target is).
"""
from __future__ import annotations

from . import reader as lim
from .addressvars import forget
from .constructs import branch, close_frame
from .contract import CompileError
from .extensions import Call
from .frames import Frame, FrameKind
from .intrinsics import F32, F64, I32, I64
from .lowering import INVALID, LIMIT, UNSUPPORTED, Lowering
from .names import NameKind, described
from .optable import OP_END, skip_locals, walk
from .prescan import prescan
from .reader import Reader, ReaderError
from .records import CONSTANT, Record
from .shadow import check_joinable, check_restored
from .constructs import TRAP

OP_UNREACHABLE = 0x00
ESCAPES = frozenset((0x0E, 0x0F, 0x12, 0x13))  # br_table, return, return_call(_indirect): may leave the body

PARAM_TYPES = frozenset((I32, F32, I64, F64))  # the value types a callee's parameters and results may have


def call_defined(st: Lowering, function: int) -> None:
    """`call function` where function is defined in the module (not an import)."""
    module = st.module
    defined = function - len(module.func_imports)
    if defined >= len(module.functions):
        raise CompileError(UNSUPPORTED, "only buffer intrinsic calls are supported")
    sig = module.function_type(function)
    if sig is None:
        raise CompileError(INVALID, f"call {function}: function type out of range")
    params, results = tuple(sig[0]), tuple(sig[1])
    st.go_beyond_reference()  # the reference calls only the buffer intrinsics
    if not PARAM_TYPES.issuperset(params + results):
        raise CompileError(UNSUPPORTED, f"call {function}: a parameter or result type the GPU does not carry")
    args = st.pop_types(params)
    if st.pending is not None:
        return
    if st.top.dead:
        st.stack.extend((CONSTANT, t, 0) for t in results)
        return
    check_joinable(st)  # (a path that released its frame to return calls nothing)
    if never_returns(st, defined):
        st.uses_err = True
        st.emit(TRAP)
        st.set_dead()
        return
    _check_bounds(st, function, module.bodies[defined])
    _enter(st, function, module.bodies[defined], args, results)
    ext = st.ext
    assert ext.run_body is not None  # set by lower.lower_body
    ext.inlined_instructions = ext.run_body(st, ext.inlined_instructions, lim.MAX_INLINE_INSTRUCTIONS)
    _leave(st)


def never_returns(st: Lowering, defined: int) -> bool:
    """Whether defined function `defined` cannot return normally: its body ends in `unreachable`
    and no `return` or branch reaches its end (a panic or sanitizer handler). A call to it is then
    a trap as far as the GPU is concerned: reaching it raises the error word, and the CPU runner
    runs the handler, whatever it does. Its body is not lowered at all."""
    cache = st.ext.noreturn
    known = cache.get(defined)
    if known is None:
        start, end = st.module.bodies[defined]
        data = st.module.source
        try:
            body = list(walk(data, skip_locals(data, start, end), end))
        except (ReaderError, CompileError):
            body = []
        known = (len(body) >= 2 and body[-1].opcode == OP_END and body[-1].at == end - 1
                 and body[-2].opcode == OP_UNREACHABLE and body[-2].depth == 0
                 and not any(i.opcode in ESCAPES or i.label == i.depth for i in body))
        cache[defined] = known
    return known


def _check_bounds(st: Lowering, function: int, body: tuple[int, int]) -> None:
    ext = st.ext
    if any(c.function == function for c in ext.calls):
        raise CompileError(UNSUPPORTED, f"recursive call to {described(st.module, NameKind.FUNCTION, function)}")
    if len(ext.calls) >= lim.MAX_INLINE_DEPTH:
        raise CompileError(LIMIT, "inline depth limit")
    ext.inlined_bytes += body[1] - body[0]
    if ext.inlined_bytes > lim.MAX_INLINE_BYTES:
        raise CompileError(LIMIT, "inlined code byte limit")


def _enter(st: Lowering, function: int, body: tuple[int, int], args: list[Record], results: tuple[int, ...]) -> None:
    ext = st.ext
    base = len(st.locals)
    saved = (st.r, st.frame_base, st.local_base, st.targeted)
    st.r = Reader(st.module.source, body[0], body[1])
    st.locals.extend(args)
    st.local_types.extend(r[1] for r in args)
    st.local_base = base
    st.declare_locals()
    _written, targeted = prescan(st.r.data, st.r.pos, st.r.end, st.scan_kinds, body=True)
    at = st.r.pos
    wrapper = targeted is None or at in targeted
    parent = st.top
    frame = Frame(FrameKind.BLOCK, (), results, len(st.stack), wrapper, False, True)
    frame.mw_entry = st.mw
    if wrapper:
        st.flush_pending()
        frame.result_vars = tuple(st.new_var(t) for t in results)
        st.emit("  loop {\n")
        st.known.clear()
    else:
        ext.braceless += 1
    assert not parent.dead
    st.push_frame(frame)
    st.frame_base = len(st.frames) - 1
    st.targeted = targeted
    ext.calls.append(Call(function, saved, ext.sp_offset, not wrapper, base))


def _leave(st: Lowering) -> None:
    """At the callee's final end: close its frame, give the caller back its reader and locals."""
    r = st.r
    if r.pos != r.end:
        raise CompileError(INVALID, "trailing code after a function's end")
    ext = st.ext
    call = ext.calls[-1]
    frame = st.frames[-1]
    if not frame.dead:
        check_restored(st, call.entry_sp)
    ext.sp_offset = call.entry_sp  # (a callee that ended unreachable never ran its epilogue)
    if call.braceless:
        _close_braceless(st, frame)
        ext.braceless -= 1
    else:
        close_frame(st, frame)
    ext.calls.pop()
    reader, st.frame_base, st.local_base, targeted = call.saved
    assert isinstance(reader, Reader)
    st.r = reader
    st.targeted = targeted  # type: ignore[assignment]
    del st.locals[call.locals_start:]
    del st.local_types[call.locals_start:]
    forget(st, call.locals_start)


def _close_braceless(st: Lowering, frame: Frame) -> None:
    values = st.pop_types(frame.results)
    if st.pending is None and len(st.stack) != frame.height:
        st.pending = CompileError(INVALID, "operand stack mismatch at function end")
    if st.pending is not None:
        raise st.pending
    dead = frame.dead
    st.pop_frame()
    if dead:
        st.stack.extend((CONSTANT, t, 0) for t in frame.results)
        st.set_dead()
    else:
        st.stack.extend(values)


def callee_return(st: Lowering) -> None:
    """`return` in an inlined callee: a branch to its frame carrying its results, or, directly
    before its final end at its top level, nothing more than the fall-through."""
    frame = st.frames[st.frame_base]
    values = st.pop_types(frame.results)
    if st.pending is not None:
        return
    r = st.r
    if not st.top.dead:
        check_restored(st, st.ext.calls[-1].entry_sp)
        if len(st.frames) - 1 == st.frame_base and r.end - r.pos == 1 and r.data[r.pos] == 0x0B:
            del st.stack[frame.height:]
            st.stack.extend(values)
            return
        st.emit(branch(st, st.frame_base, values))
    st.set_dead()
