"""Lowering of one kernel body to WGSL statements: one forward pass, one opcode table.

The workspace (lowering.Lowering) moves immutable value records (records.py) through an operand
stack and the locals; opcodes.LOWERING maps each instruction to its handler. Two drivers run the
same handlers over the same workspace:

* run_checked tests every workspace limit (docs/design/compiler.md §1.3.5 step 6) at the head of every
  instruction and runs any row;
* run_fast runs only while the limits provably cannot fire, and only the rows of the reference's
  subset (opcodes.Fast): it inlines the simple ones (local.get/set/tee, f32.const, the deferred
  f32 arithmetic, with a local.get or f32.const handed straight to the arithmetic that follows
  it) and calls the handler for the others. At the first instruction outside that subset it hands
  the body, in whatever state it has reached, to run_checked, which continues from there. A
  kernel of the reference subset is lowered by run_fast alone.

Inlined rows run with their handler's semantics whenever no error can arise (no construct has
opened, so no local is a var and the stack has no frame below it); otherwise the handler runs. A
pending error (set only by handlers and Lowering.pop) is raised right after the instruction that
set it, which is the reference's "stop at the next iteration".
"""
from __future__ import annotations

import struct
from typing import Callable

from . import reader as lim
from .bindings import BindingFacts
from .contract import CompileError
from .decoder import DecodedModule
from .intrinsics import F32
from .lowering import INVALID, LIMIT, LoweredBody, Lowering, Restart
from .opcodes import DEFERRED_OPS, FAST_KIND, HANDLERS, SCAN_KINDS, Fast
from .reader import ReaderError
from .records import CONSTANT, NUMBER, Form

VALUE = Form.VALUE
OP_RETURN, OP_END = 0x0F, 0x0B

MAX_LINE_BYTES = 100  # no statement the fast rows emit is longer (the longest, an I8 load, is about 80 bytes)
UNPACK_U32: Callable[[bytes, int], tuple[int]] = struct.Struct("<I").unpack_from  # an f32.const's bits
# The Fast kinds as plain ints: CPython specialises comparisons of exact ints, not of IntEnum members.
K_HANDOVER, K_HANDLER, K_GET, K_SET, K_TEE, K_F32, K_NODE = (int(k) for k in (
    Fast.HANDOVER, Fast.HANDLER, Fast.LOCAL_GET, Fast.LOCAL_SET, Fast.LOCAL_TEE, Fast.F32_CONST, Fast.DEFERRED))


def lower_body(module: DecodedModule, start: int, end: int, facts: BindingFacts, strict: bool = False) -> LoweredBody:
    """Lower the body source[start:end] of a kernel whose bindings passed config validation;
    `strict`: a strict_float kernel (exact rows for the rounding f32 instructions).

    A pass that found shadow-stack slots stored inside control flow after their records were used
    (shadow.py) is repeated with those slots in vars, at most reader.MAX_FRAME_PASSES times."""
    if end - start > lim.MAX_BODY_BYTES:
        raise CompileError(LIMIT, "kernel byte limit")
    if facts.problem is not None:
        raise CompileError(*facts.problem)
    forced: frozenset[int] = frozenset()
    for _ in range(lim.MAX_FRAME_PASSES):
        st, error = lowered_pass(module, start, end, facts, strict, forced)
        if not st.ext.conflicts:
            if error is not None:
                raise error
            return st.finish()
        forced = forced | st.ext.conflicts
    raise CompileError(LIMIT, "stack frame pass limit")


def lowered_pass(module: DecodedModule, start: int, end: int, facts: BindingFacts, strict: bool,
                 forced: frozenset[int]) -> tuple[Lowering, CompileError | None]:
    """One pass over the body: its workspace and the error that stopped it, if any. Where it
    leaves the reference subset after f32 arithmetic was emitted without opaque operands
    (Restart), it runs again with them from the first instruction."""
    st = workspace(module, start, end, facts, strict, strict, forced)
    try:
        try:
            st.declare_locals()
            if st.beyond_reference and not st.opaque:  # 64-bit bindings or locals
                st.set_opaque()
            run(st)
        except Restart:
            st = workspace(module, start, end, facts, strict, True, forced)
            st.beyond_reference = True
            st.declare_locals()
            run_checked(st)
    except ReaderError as e:
        return st, CompileError(INVALID, e.message)
    except CompileError as e:
        return st, e
    return st, None


def workspace(module: DecodedModule, start: int, end: int, facts: BindingFacts, strict: bool, opaque: bool,
              forced: frozenset[int]) -> Lowering:
    st = Lowering(module, start, end, facts, SCAN_KINDS, strict, opaque)
    st.ext.forced = forced
    st.ext.run_body = run_checked
    return st


def run(st: Lowering) -> None:
    code_start = st.r.pos
    fast = not st.strict and fast_loop_applies(st)
    done = fast and run_fast(st)
    if fast and st.nodes:  # run_fast's inlined nodes are f32 arithmetic
        st.is_float = True
    if done:
        return
    if fast:  # handed over at the first instruction outside the reference subset
        leave_reference(st)
    # Where run_fast handed over, the bytes it consumed bound the instructions it ran from above:
    # in its regime no limit can fire, so the checked loop cannot fire early either.
    run_checked(st, st.r.pos - code_start)


def leave_reference(st: Lowering) -> None:
    """At the first instruction outside the reference subset: from here on float operands are
    opaque (Lowering.go_beyond_reference). Reference-subset kernels keep the reference's WGSL byte
    for byte; the reference's one return (right before the final end) is in its subset."""
    r = st.r
    if r.end - r.pos == 2 and r.data[r.pos] == OP_RETURN and r.data[r.pos + 1] == OP_END:
        return
    st.go_beyond_reference()


def fast_loop_applies(st: Lowering) -> bool:
    """Every instruction takes at least one byte, and a fast row adds at most one stack entry, one
    value and two statements of at most MAX_LINE_BYTES each. So when the rest of the body has no
    more bytes than MAX_INSTRUCTIONS and the other limits are at least as large, no limit check
    can fail while run_fast runs."""
    max_pc = lim.MAX_INSTRUCTIONS
    return (st.r.end - st.r.pos <= max_pc and lim.MAX_NODES >= max_pc and lim.MAX_STACK >= max_pc
            and lim.MAX_BODY_CODE >= 2 * MAX_LINE_BYTES * max_pc)


def run_checked(st: Lowering, pc: int = 0, max_pc: int = -1) -> int:
    """The table-driven loop with every workspace limit tested at each head; returns the count of
    instructions run (an inlined callee's body runs here too, counted against its own bound)."""
    r, depth, stack, code = st.r, st.depth, st.stack, st.code
    data = r.data
    handlers = HANDLERS
    max_nodes, max_stack, max_code = lim.MAX_NODES, lim.MAX_STACK, lim.MAX_BODY_CODE
    if max_pc < 0:
        max_pc = lim.MAX_INSTRUCTIONS
    pieces = -1  # len(code) when its bytes were last counted
    watch = not st.beyond_reference  # (where run_fast did not run: a longer body, or a strict_float one)
    kinds, k_handover = FAST_KIND, K_HANDOVER
    while r.pos < r.end:
        if pc >= max_pc or len(depth) >= max_nodes or len(stack) > max_stack or (
                len(code) != pieces and st.code_bytes() > max_code):
            raise CompileError(LIMIT, "kernel workspace limit")
        pieces = len(code)
        if watch and kinds[data[r.pos]] == k_handover:
            watch = False
            leave_reference(st)
        handler = handlers[data[r.pos]]
        r.pos += 1
        pc += 1
        if handler(st):
            return pc
        if st.pending is not None:
            raise st.pending
    raise CompileError(INVALID, "missing function end")


def run_fast(st: Lowering) -> bool:
    """True when the body ended, False when it handed over at st.r.pos (see the module docstring)."""
    r, stack, local_records, local_types, depth, nodes = st.r, st.stack, st.locals, st.local_types, st.depth, st.nodes
    data, end, pos, push, form, ftext, names = r.data, r.end, r.pos, stack.append, st.form, st.ftext, st.names
    handlers, kinds, ops, unpack_u32, max_depth = HANDLERS, FAST_KIND, DEFERRED_OPS, UNPACK_U32, lim.MAX_DEPTH
    k_get, k_set, k_tee, k_f32, k_node, k_handover = K_GET, K_SET, K_TEE, K_F32, K_NODE, K_HANDOVER
    constant, number, f32, value_form, fast_locals = CONSTANT, NUMBER, F32, VALUE, min(len(local_records), 0x80)
    while pos < end:
        opcode = data[pos]
        pos += 1
        kind = kinds[opcode]
        if kind == k_get and pos < end and data[pos] < fast_locals:  # a one-byte LEB index in range
            right = local_records[data[pos]]
            pos += 1
        elif kind == k_f32 and end - pos >= 4:
            right = (constant, f32, unpack_u32(data, pos)[0])
            pos += 4
            st.is_float = True
        elif kind == k_node and stack:
            right = stack.pop()
        elif ((kind == k_set or kind == k_tee) and stack and pos < end and data[pos] < fast_locals
              and stack[-1][1] == local_types[data[pos]]):
            local_records[data[pos]] = stack[-1] if kind == k_tee else stack.pop()
            pos += 1
            continue
        elif kind == k_handover:
            r.pos = pos - 1
            return False
        else:
            kind = K_HANDLER
        if kind == k_get or kind == k_f32:  # an operand: handed straight to a node right after it
            if pos >= end or kinds[data[pos]] != k_node:
                push(right)
                continue
            opcode, pos, kind = data[pos], pos + 1, k_node
        if kind == k_node:  # Lowering.new_node, inline: a node over the top of the stack and `right`
            op = ops[opcode]
            if stack and right[1] == op.params[1] and stack[-1][1] == op.params[0]:
                left = stack[-1]
                ld = depth[left[2]] if left[0] == number else 0
                rd = depth[right[2]] if right[0] == number else 0
                if ld >= max_depth or rd >= max_depth:
                    ld, rd = st.depth_rule(left, right)
                n = len(depth)
                stack[-1] = (number, op.result, n)
                nodes[n] = (op, left, right)
                depth.append((ld if ld > rd else rd) + 1)
                form.append(value_form)
                ftext.append(names[n])
                continue
            push(right)  # the handler reports the underflow or type mismatch
        r.pos = pos
        if handlers[opcode](st):
            return True
        if st.pending is not None:
            raise st.pending
        pos = r.pos
        names = st.names  # an inlined call may have grown the name tables
    raise CompileError(INVALID, "missing function end")
