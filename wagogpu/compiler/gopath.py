"""The Go tracer's records: a path's operand stack, call frames and control constructs (gotrace.py
walks them, goops.py and gostep.py change them). A leaf below the tracer and its handlers, so that
the handlers import no part of the tracer at run time."""

from __future__ import annotations

from dataclasses import dataclass, field

from .gobody import Val
from .gomemory import Cells
from .reader import Reader

BLOCK, LOOP, IF = 0, 1, 2
SCRATCH_GLOBALS = frozenset((1, 3, 4, 5, 6))  # Go's CTXT and RET0..RET3 registers
SP_GLOBAL, G_GLOBAL = 0, 2


@dataclass(slots=True)
class Ctl:
    kind: int
    head: int  # a loop's first instruction
    end: int  # just after its `end`
    else_at: int  # an if's `else` opcode, -1: none
    height: int  # operand-stack height below it
    arity: int  # values a branch to it carries


@dataclass(slots=True)
class Fn:
    function: int  # defined function index
    locals: list[Val]
    reader: Reader
    results: int
    height: int
    ctl: list[Ctl] = field(default_factory=list)


@dataclass(slots=True)
class Path:
    stack: list[Val]
    fns: list[Fn]
    cells: Cells
    globals: dict[int, Val]
    edges: int = 0

    def clone(self) -> Path:
        fns = [Fn(f.function, list(f.locals), Reader(f.reader.data, f.reader.pos, f.reader.end), f.results,
                  f.height, list(f.ctl)) for f in self.fns]
        return Path(list(self.stack), fns, dict(self.cells), dict(self.globals), self.edges)
