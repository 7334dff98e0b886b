"""Handlers of the value instructions: locals, constants, numeric rows, select, drop, reinterpret.

Locals. A local keeps its record while it is assigned only in straight-line code at the top
level. A construct that assigns a local moves it into a WGSL `var l<i>` first (its bits: u32, or vec2<u32> for i64/f64) (control.py);
inside constructs `local.set` writes the var and `local.get` copies it into a fresh let, so stack
values stay snapshots, and `known` remembers the record last written to the var in the current
straight-line stretch so that reading it again needs no copy. A handle can never live in a var,
because its runtime value is the guest's handle number, which the GPU does not know.

In unreachable code every handler still checks its operands but emits nothing and pushes zero
constants.
"""
from __future__ import annotations

from .addressvars import ADDRESS_IN_VAR, assign, assign_number, marked
from .contract import CompileError, KernelError
from .intrinsics import F32, F64, I32, I64
from .lowering import BITS, LOCAL_TYPES, UNSUPPORTED, Lowering
from .ops import SATURATING, NumericOp
from .records import BITS_FORM, CONSTANT, FRAME, HANDLE, INDEX, NUMBER, VAR, local_var
from .shadow import address_arith
from .valuetext import second_copy



def nop(st: Lowering) -> None:
    return None


def local_get(st: Lowering) -> None:
    i = st.local_index()
    rec = st.locals[i]
    if rec[0] == VAR:
        if st.top.dead:
            rec = (CONSTANT, rec[1], 0)
        else:
            known = st.known.get(i)
            if known is None:
                known = marked(st, i) or (NUMBER, rec[1], st.let(BITS_FORM[rec[1]], local_var(i, rec[1])))
                st.known[i] = known
            rec = known
    st.stack.append(rec)


def local_set(st: Lowering, tee: bool) -> None:
    i = st.local_index()
    value = st.pop(st.local_types[i])
    if st.pending is not None:
        return
    if len(st.frames) - 1 == st.frame_base:  # straight-line code of the function now lowered
        st.locals[i] = value
        assign_number(st, i)
    else:
        old = st.locals[i][0]
        if old != VAR:
            if old in ADDRESS_IN_VAR:
                raise CompileError(UNSUPPORTED, ADDRESS_IN_VAR[old])
            raise AssertionError("a local assigned inside control flow was not moved into a var")
        if value[0] in ADDRESS_IN_VAR:
            assign(st, i, value)
        else:
            st.emit(f"  {local_var(i, value[1])} = {st.bits(value)};\n")
            assign_number(st, i)
        st.known[i] = value
    if tee:
        st.stack.append(value)


def i32_const(st: Lowering) -> None:
    st.stack.append((CONSTANT, I32, st.r.i32()))


def f32_const(st: Lowering) -> None:
    st.is_float = True
    st.stack.append((CONSTANT, F32, st.r.u32_le()))


def i64_const(st: Lowering) -> None:
    st.stack.append((CONSTANT, I64, st.r.leb(64, True) & 0xFFFFFFFFFFFFFFFF))


def f64_const(st: Lowering) -> None:
    st.is_float = True
    st.stack.append((CONSTANT, F64, int.from_bytes(st.r.take(8), "little")))


def deferred(st: Lowering, op: NumericOp) -> None:
    """The reference's f32 add, sub and mul (lower.run_fast inlines this; both must stay identical).
    A strict_float kernel computes them with its exact rows instead."""
    if st.strict and op.strict is not None:
        return numeric(st, op)
    right = st.pop(op.params[1])
    left = st.pop(op.params[0])
    st.is_float = True
    if st.pending is None:
        st.stack.append((CONSTANT, op.result, 0) if st.top.dead else (NUMBER, op.result, st.new_node(op, left, right)))


def numeric(st: Lowering, op: NumericOp) -> None:
    if st.strict and op.strict is not None:
        op = op.strict
    args = st.pop_types(op.params)
    if op.is_float:
        st.is_float = True
    if st.pending is not None:
        return
    if st.top.dead:
        st.stack.append((CONSTANT, op.result, 0))
        return
    if args[0][0] == FRAME or args[-1][0] == FRAME:  # stack-address arithmetic (shadow.py)
        st.stack.append(address_arith(st, st.r.data[st.r.pos - 1], args))
        return
    if all(a[0] == CONSTANT for a in args):
        args[0] = st.launder(args[0])
    texts = [st.operand(a, form) for a, form in zip(args, op.forms)]
    if op.trap:
        st.raise_error_if(op.trap.format(*texts), KernelError.TRAP)
    if st.opaque and op.rounding and len(args) == 2:
        texts[1] = second_copy(texts[1], op.forms[1])  # two values to the driver, even if equal
    st.helpers.update(op.helpers)
    st.stack.append((NUMBER, op.result, st.result(op, op.expr.format(*texts))))


def prefixed(st: Lowering) -> None:
    sub = st.r.u32()
    op = SATURATING.get(sub)
    if op is None:
        raise CompileError(UNSUPPORTED, f"unsupported opcode 0xfc 0x{sub:02x}")
    numeric(st, op)


# reinterpret: the result type's bits are the operand's (same width, other type).
REINTERPRETED = {I32: F32, F32: I32, I64: F64, F64: I64}


def reinterpret(st: Lowering, result: int) -> None:
    value = st.pop(REINTERPRETED[result])
    st.is_float = True
    if st.pending is not None:
        return
    kind = value[0]
    if kind == HANDLE:
        raise CompileError(UNSUPPORTED, "buffer handle used as a value")
    if kind == INDEX and not st.top.dead:
        st.stack.append((NUMBER, result, st.let(BITS, "index")))
    else:
        st.stack.append((kind if kind != INDEX else CONSTANT, result, value[2]))


def drop(st: Lowering) -> None:
    st.pop_any()


def select(st: Lowering, typed: bool) -> None:
    want = 0
    if typed:
        if st.r.u32() != 1:
            raise CompileError(UNSUPPORTED, "select type is unsupported")
        want = st.r.byte()
        if want not in LOCAL_TYPES:
            raise CompileError(UNSUPPORTED, "select type is unsupported")
    cond = st.pop(I32)
    second = st.pop(want) if typed else st.pop_any()
    first = st.pop(second[1])
    if st.pending is not None:
        return
    if st.top.dead:
        st.stack.append((CONSTANT, second[1], 0))
        return
    if first == second:
        st.stack.append(first)
        return
    if first[0] == HANDLE or second[0] == HANDLE:
        raise CompileError(UNSUPPORTED, "select of a buffer handle")
    n = st.let(BITS_FORM[second[1]], f"select({st.bits(second)}, {st.bits(first)}, {st.bits(cond)} != 0u)")
    st.stack.append((NUMBER, second[1], n))
