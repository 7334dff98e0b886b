"""The Go tracer's instruction handlers (gotrace.py says what the trace does and why)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .gobody import CONST, G, GUARD, LOCAL, STACK, Val, uleb
from .gomemory import LOADS, STORES, Blocked, goroutine_load, load, store
from .gonumeric import SAT_SIGNATURES, SIGNATURES, fold, signed
from .gopath import BLOCK, G_GLOBAL, IF, LOOP, SCRATCH_GLOBALS, SP_GLOBAL, Ctl, Path
from .intrinsics import I32, I64
from .reader import Reader

if TYPE_CHECKING:  # type-only: closes no runtime circle (the tracer calls these handlers)
    from .gotrace import Tracer

BLOCK_RESULTS = {-64: 0, -1: 1, -2: 1, -3: 1, -4: 1, -5: 1}
WHY = {0x11: "a call through a func value, an interface method or a deferred call (call_indirect)",
       0x3F: "memory.size (the Go heap: an allocation)", 0x40: "memory.grow (the Go heap grows: an allocation)"}
NOT_HOST = "a call to a host function outside wago_gpu_v1 (WASI: fmt, os, time or the scheduler's clock)"
ADDRESS_AS_NUMBER = "a Go stack address used as a number (a pointer to a local, converted or stored)"
M64 = (1 << 64) - 1


def pop(path: Path, n: int) -> list[Val]:
    if len(path.stack) < n:
        raise Blocked("operand stack underflow in traced Go code")
    values = path.stack[len(path.stack) - n:] if n else []
    del path.stack[len(path.stack) - n:]
    return values


def block_arity(t: Tracer, r: Reader) -> int:
    kind = r.leb(33, True)
    if kind < 0:
        if kind not in BLOCK_RESULTS:
            raise Blocked("a block type the trace does not know")
        return BLOCK_RESULTS[kind]
    sig = t.module.types[kind] if kind < len(t.module.types) else None
    if sig is None or sig[0]:
        raise Blocked("a block with parameters")
    return len(sig[1])


def open_construct(t: Tracer, path: Path, opcode: int) -> None:
    fn = path.fns[-1]
    r = fn.reader
    at = r.pos - 1
    arity = block_arity(t, r)
    end, else_at = t.control_map(fn.function)[at]
    if opcode != 0x04:
        kind = LOOP if opcode == 0x03 else BLOCK
        fn.ctl.append(Ctl(kind, r.pos, end, -1, len(path.stack), 0 if kind == LOOP else arity))
        return
    (cond,) = pop(path, 1)
    ctl = Ctl(IF, r.pos, end, else_at, len(path.stack), arity)

    def then(p: Path) -> None:
        p.fns[-1].ctl.append(ctl)

    def otherwise(p: Path) -> None:
        if else_at >= 0:
            p.fns[-1].ctl.append(ctl)
            p.fns[-1].reader.pos = else_at + 1
        else:
            p.fns[-1].reader.pos = end
    decide(t, path, cond, then, otherwise)


def decide(t: Tracer, path: Path, cond: Val, taken: Callable[[Path], None], other: Callable[[Path], None]) -> None:
    """A conditional: folded where `cond` is a constant, else a fork."""
    if cond[0] == CONST:
        (taken if cond[2] else other)(path)
        return
    t.fork(path, cond, taken, other)


def op_else(t: Tracer, path: Path) -> None:
    fn = path.fns[-1]
    fn.reader.pos = fn.ctl.pop().end


def op_end(t: Tracer, path: Path) -> None:
    fn = path.fns[-1]
    if fn.ctl:
        fn.ctl.pop()
    else:
        t.leave(path)


def op_br(t: Tracer, path: Path) -> None:
    t.branch(path, path.fns[-1].reader.u32())


def op_br_if(t: Tracer, path: Path) -> None:
    depth = path.fns[-1].reader.u32()
    (cond,) = pop(path, 1)
    decide(t, path, cond, lambda p: t.branch(p, depth), lambda p: None)


def op_br_table(t: Tracer, path: Path) -> None:
    r = path.fns[-1].reader
    targets = [r.u32() for _ in range(r.count())]
    default = r.u32()
    (selector,) = pop(path, 1)
    if selector[0] == CONST:
        t.branch(path, targets[selector[2]] if selector[2] < len(targets) else default)
        return
    if selector[0] != LOCAL or len(targets) > 64:
        raise Blocked("a Go switch on a run-time value with more cases than the trace follows")

    def cases_from(p: Path, k: int) -> None:  # case k is tested in the else-part of case k - 1
        if k == len(targets):
            t.branch(p, default)
            return
        cond = t.body.compute([selector, (CONST, I32, k)], bytes((0x46,)), I32)
        assert cond is not None
        t.fork(p, cond, lambda q: t.branch(q, targets[k]), lambda q: cases_from(q, k + 1))
    cases_from(path, 0)


def op_call(t: Tracer, path: Path) -> None:
    index = path.fns[-1].reader.u32()
    module = t.module
    sig = module.function_type(index)
    if sig is None:
        raise Blocked("a call of a function whose type the module lacks")
    args = pop(path, len(sig[0]))
    n_imports = len(module.func_imports)
    if index >= n_imports:
        t.enter(path, index - n_imports, args)
        return
    if not module.func_imports[index].in_namespace:
        raise Blocked(NOT_HOST)
    plain(args)
    result = t.body.compute(args, bytes((0x10,)) + uleb(index), sig[1][0] if sig[1] else None)
    if len(sig[1]) > 1:
        raise Blocked("a host call with several results")
    if result is not None:
        path.stack.append(result)


def plain(args: list[Val]) -> None:
    """Operands written to the output: constants and locals only."""
    for arg in args:
        if arg[0] != CONST and arg[0] != LOCAL:
            raise Blocked(ADDRESS_AS_NUMBER)


def op_local(t: Tracer, path: Path, opcode: int) -> None:
    fn = path.fns[-1]
    i = fn.reader.u32()
    if i >= len(fn.locals):
        raise Blocked("a local index out of range")
    if opcode == 0x20:
        path.stack.append(fn.locals[i])
    elif opcode == 0x21:
        fn.locals[i] = pop(path, 1)[0]
    else:
        fn.locals[i] = path.stack[-1]


def op_global(t: Tracer, path: Path, opcode: int) -> None:
    i = path.fns[-1].reader.u32()
    if opcode == 0x23:
        if i == G_GLOBAL:
            path.stack.append((G, I64, 0))
        elif i in path.globals:
            path.stack.append(path.globals[i])
        else:
            raise Blocked(f"a read of Go runtime register global {i} the kernel did not set")
        return
    (value,) = pop(path, 1)
    if i == SP_GLOBAL and value[0] == STACK and value[1] == I32:
        path.globals[i] = value
    elif i in SCRATCH_GLOBALS:
        path.globals[i] = value
    else:
        raise Blocked("a write to the goroutine pointer or the pause flag (the scheduler switches goroutines)")


def op_memory(t: Tracer, path: Path, opcode: int) -> None:
    r = path.fns[-1].reader
    align = r.u32()
    offset = r.u32()
    if opcode in LOADS:
        width, wtype, sign = LOADS[opcode]
        (address,) = pop(path, 1)
        if address[0] == STACK:
            path.stack.append(load(path.cells, t.body, address[2] + offset, width, wtype, sign))
        elif address[0] == G:
            path.stack.append(goroutine_load(address, offset, opcode))
        else:
            plain([address])
            memarg = uleb(align) + uleb(offset)
            path.stack.append(t.body.compute([address], bytes((opcode,)) + memarg, wtype))  # type: ignore[arg-type]
        return
    width, _ = STORES[opcode]
    address, value = pop(path, 2)
    if address[0] != STACK:
        raise Blocked("a store to Go heap or package memory (an allocation, a pointer write or a package variable)")
    store(path.cells, t.body, address[2] + offset, width, value)


def address_arith(opcode: int, args: list[Val]) -> Val | None:
    """What the numeric instruction `opcode` gives when an operand is a stack address, g or its
    stack guard; None where no operand is one."""
    kinds = [a[0] for a in args]
    if all(k == CONST or k == LOCAL for k in kinds):
        return None
    if opcode in (0x6A, 0x7C) and sorted(kinds) == [CONST, STACK]:
        base, const = (args[0], args[1]) if kinds[0] == STACK else (args[1], args[0])
        return (STACK, base[1], base[2] + signed(const[2], 32 if base[1] == I32 else 64))
    if opcode in (0x6B, 0x7D) and kinds == [STACK, CONST]:
        return (STACK, args[0][1], args[0][2] - signed(args[1][2], 32 if args[0][1] == I32 else 64))
    if opcode == 0x45 and kinds == [STACK]:
        return (CONST, I32, 0)  # the private frame's address is not zero: Go's "initialized" test
    if opcode in (0x4D, 0x49) and kinds == [STACK, GUARD]:
        return (CONST, I32, 0)  # sp <= g.stackguard0: the frame has room, morestack is not called
    if 0x46 <= opcode <= 0x4F and kinds == [STACK, STACK]:
        return (CONST, I32, fold(opcode, [a[2] + (1 << 30) for a in args]) or 0)  # two frame addresses: one base
    if opcode == 0xA7 and kinds[0] in (STACK, G):
        return (kinds[0], I32, args[0][2])
    if opcode == 0xAD and kinds == [STACK]:
        return (STACK, I64, args[0][2])
    raise Blocked(ADDRESS_AS_NUMBER)


def numeric(t: Tracer, path: Path, opcode: int, prefix: bytes = b"") -> None:
    params, result = (SAT_SIGNATURES if prefix else SIGNATURES)[opcode]
    args = pop(path, len(params))
    special = address_arith(opcode, args) if not prefix else None
    if special is not None:
        path.stack.append(special)
        return
    plain(args)
    if not prefix and all(a[0] == CONST for a in args):
        folded = fold(opcode, [a[2] for a in args])
        if folded is not None:
            path.stack.append((CONST, result, folded))
            return
    code = prefix + uleb(opcode) if prefix else bytes((opcode,))
    path.stack.append(t.body.compute(args, code, result))  # type: ignore[arg-type]

