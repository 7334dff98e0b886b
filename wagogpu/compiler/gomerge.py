"""Where the two sides of a Go trace's fork meet again: at the return of the function the branch
is in (gotrace.Tracer.fork). Joining there, rather than following each side to the kernel's end,
keeps the traced code linear in the branches of a kernel instead of exponential (`math.Exp` has a
dozen; followed apart they were 76 paths).

Both sides left the function with the same callers (Wasm functions cannot touch their callers'
locals), so their states differ only in values: the operand stack, Go's stack cells, the
runtime's scratch registers. A value the sides agree on stays; one they disagree on, if both are
numbers of one type, goes into a fresh local that each side assigns at its end (a phi); a cell or
register they disagree on otherwise is forgotten (a later read is refused, which is safe), and an
operand they disagree on otherwise ends the joined path (it raises the error word there).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gobody import CONST, LOCAL, OP_LOCAL_SET, Val, const, uleb
from .gomemory import Blocked

if TYPE_CHECKING:  # type-only: closes no runtime circle (the tracer calls merge_sides)
    from .gobody import Body, Segment
    from .gopath import Path
    from .gotrace import Tracer

OP_ELSE = 0x05


class Ended(Exception):
    """Neither side of a fork returned: the path that forked has ended (its code is written)."""


class Phis:
    """The assignments each side makes at its end."""

    def __init__(self, body: Body) -> None:
        self.body = body
        self.then_code = bytearray()
        self.else_code = bytearray()

    def join(self, a: Val, b: Val) -> Val | None:
        """The joined value of `a` (then) and `b` (else); None where they cannot join."""
        if a == b:
            return a
        if a[1] != b[1] or a[0] not in (CONST, LOCAL) or b[0] not in (CONST, LOCAL):
            return None
        n = self.body.new_local(a[1])
        for value, code in ((a, self.then_code), (b, self.else_code)):
            code += self.value_bytes(value) + bytes((OP_LOCAL_SET,)) + uleb(n)
        return (LOCAL, a[1], n)

    def value_bytes(self, value: Val) -> bytes:
        if value[0] == CONST:
            return const(value[1], value[2])
        self.body.read.add(value[2])
        return bytes((0x20,)) + uleb(value[2])


def join_states(phis: Phis, then: Path, path: Path) -> bool:
    """Merge `then` into `path` (the else side); False where an operand cannot join."""
    joined = True
    for i, (a, b) in enumerate(zip(then.stack, path.stack)):
        value = phis.join(a, b)
        joined = joined and value is not None
        path.stack[i] = value if value is not None else b
    for mine, theirs in zip(then.fns, path.fns):
        for i, (a, b) in enumerate(zip(mine.locals, theirs.locals)):
            value = phis.join(a, b)
            joined = joined and value is not None
            theirs.locals[i] = value if value is not None else b
    for offset in list(path.cells):
        width, value = path.cells[offset]
        stored = then.cells.get(offset)
        cell = phis.join(stored[1], value) if stored is not None and stored[0] == width else None
        if cell is None:
            del path.cells[offset]  # forgotten: a later load of it is refused
        else:
            path.cells[offset] = (width, cell)
    for index in list(path.globals):
        held = then.globals.get(index)
        register = phis.join(held, path.globals[index]) if held is not None else None
        if register is None:
            del path.globals[index]
        else:
            path.globals[index] = register
    path.edges = max(path.edges, then.edges)
    return joined


def merge_sides(t: Tracer, path: Path, then: Path | None, other: Path | None, cond: Val,
                then_code: Segment, else_code: Segment) -> None:
    """Write `if (cond) {then} else {else}` and leave `path` in the state after it."""
    body = t.body
    phis = Phis(body)
    joined = True
    if then is not None and other is not None:
        joined = join_states(phis, then, path)
    elif then is not None:
        path.stack, path.fns, path.cells, path.globals, path.edges = (
            then.stack, then.fns, then.cells, then.globals, then.edges)
    body.open_if(cond)
    body.paste(then_code)
    body.code += phis.then_code
    body.code.append(OP_ELSE)
    body.paste(else_code)
    body.code += phis.else_code
    body.close()
    if then is None and other is None:
        raise Ended()
    if not joined:
        raise Blocked("the two sides of a Go branch leave different pointers on the operand stack")
