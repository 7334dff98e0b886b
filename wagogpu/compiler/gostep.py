"""The Go tracer's dispatch table: opcode -> handler (goops.py), and the leaf handlers."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .gobody import CONST
from .gomemory import LOADS, STORES, Blocked
from .gonumeric import SAT_SIGNATURES, SIGNATURES
from .goops import (WHY, M64, numeric, op_br, op_br_if, op_br_table, op_call, op_else, op_end, op_global, op_local,
                    op_memory, open_construct, plain, pop)
from .gopath import Path
from .intrinsics import I32, I64

if TYPE_CHECKING:  # type-only: closes no runtime circle (the tracer calls step)
    from .gotrace import Tracer


def op_const(t: Tracer, path: Path, opcode: int) -> None:
    r = path.fns[-1].reader
    if opcode == 0x41:
        path.stack.append((CONST, I32, r.leb(32, True) & 0xFFFFFFFF))
    elif opcode == 0x42:
        path.stack.append((CONST, I64, r.leb(64, True) & M64))
    else:
        raw = r.take(4 if opcode == 0x43 else 8)
        path.stack.append((CONST, 0x7D if opcode == 0x43 else 0x7C, int.from_bytes(raw, "little")))


def op_select(t: Tracer, path: Path, opcode: int) -> None:
    if opcode == 0x1C:
        r = path.fns[-1].reader
        for _ in range(r.count()):
            r.byte()
    a, b, cond = pop(path, 3)
    if cond[0] == CONST:
        path.stack.append(a if cond[2] else b)
        return
    plain([a, b, cond])
    path.stack.append(t.body.compute([a, b, cond], bytes((0x1B,)), a[1]))  # type: ignore[arg-type]


def op_prefixed(t: Tracer, path: Path) -> None:
    sub = path.fns[-1].reader.u32()
    if sub not in SAT_SIGNATURES:
        raise Blocked("memory.copy or memory.fill (a Go copy of an array or struct)")
    numeric(t, path, sub, b"\xfc")


def op_drop(t: Tracer, path: Path) -> None:
    pop(path, 1)


def op_unreachable(t: Tracer, path: Path) -> None:
    raise Blocked("a Go panic or a runtime abort (unreachable)")


def op_fixed(why: str) -> Callable[[Tracer, Path], None]:
    def handler(t: Tracer, path: Path) -> None:
        raise Blocked(why)
    return handler


Handler = Callable[["Tracer", Path], None]
HANDLERS: dict[int, Handler] = {
    0x00: op_unreachable, 0x01: lambda t, p: None, 0x05: op_else, 0x0B: op_end, 0x0C: op_br, 0x0D: op_br_if,
    0x0E: op_br_table, 0x0F: lambda t, p: t.leave(p), 0x10: op_call, 0x1A: op_drop,
    0xFC: op_prefixed, **{op: op_fixed(why) for op, why in WHY.items()}}
for _op in (0x02, 0x03, 0x04):
    HANDLERS[_op] = lambda t, p, o=_op: open_construct(t, p, o)  # type: ignore[misc]
for _op in (0x20, 0x21, 0x22, 0x23, 0x24):
    HANDLERS[_op] = lambda t, p, o=_op: (op_local if o < 0x23 else op_global)(t, p, o)  # type: ignore[misc]
for _op in (*LOADS, *STORES):
    HANDLERS[_op] = lambda t, p, o=_op: op_memory(t, p, o)  # type: ignore[misc]
for _op in (0x41, 0x42, 0x43, 0x44):
    HANDLERS[_op] = lambda t, p, o=_op: op_const(t, p, o)  # type: ignore[misc]
for _op in (0x1B, 0x1C):
    HANDLERS[_op] = lambda t, p, o=_op: op_select(t, p, o)  # type: ignore[misc]
for _op in SIGNATURES:
    HANDLERS[_op] = lambda t, p, o=_op: numeric(t, p, o)  # type: ignore[misc]


def step(t: Tracer, path: Path) -> None:
    """Trace one instruction of the innermost function of `path`."""
    r = path.fns[-1].reader
    opcode = r.byte()
    handler = HANDLERS.get(opcode)
    if handler is None:
        raise Blocked(f"instruction 0x{opcode:02x}, which the Go trace does not follow")
    handler(t, path)
