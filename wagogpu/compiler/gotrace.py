"""The Go tracer: a Go kernel export, runtime paths included, followed at compile time into one
plain Wasm body (gobody.py) that the lowering then compiles like any kernel.

Go compiles every function as a resumable state machine (a resume-point parameter, a `loop` and
a `br_table` on it, every jump `state = k; br loop`), checks `sp <= g.stackguard0` in every
prologue and passes values on its own stack in memory. None of that has a value the kernel's
inputs choose: the trace enters each function at its first state (Go calls with resume point 0),
keeps the stack pointer as a compile-time address (gomemory.py), folds the stack-guard check to
"has room" (the private frame has), folds every branch whose condition is a constant (the
resume state, loop counters of fixed trip count) and inlines every call. A branch on a run-time
value forks the trace: the taken path is written inside an `if`, to its end, and the other
continues after it (tail duplication). A path that reaches something the GPU cannot do (a panic
that calls into the scheduler, an allocation, a WASI call, a loop past the unroll bound) ends
there in `unreachable`: on the GPU it raises the error word, and the CPU runner then runs the
guest as Wasm does. A kernel none of whose paths returns stays on the CPU with the first reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule
from .gobody import CONST, LOCAL, STACK, Body, Val
from .gomemory import Blocked, Cells
from .gomerge import Ended, merge_sides
from .intrinsics import I32
from .optable import skip_locals, walk
from .reader import Reader

MAX_STEPS = 400_000  # instructions traced over all paths of one kernel
MAX_EDGES = 2048  # branches back to a loop head on one path (Go's state jumps included)
MAX_CALL_DEPTH = 48
MAX_FORK_DEPTH = 32  # nested `if`s in the output (the lowering allows 48 constructs)
MAX_OUTPUT_BYTES = 16384  # reader.MAX_BODY_BYTES: the lowering's kernel limit
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


class Tracer:
    """One kernel's trace: the output body, the step count, why paths ended early."""

    def __init__(self, module: DecodedModule) -> None:
        self.module = module
        self.body = Body()
        self.steps = 0
        self.forks = 0
        self.returned = 0  # paths that reached the kernel's end
        self.blockers: list[str] = []
        self.controls: dict[int, dict[int, tuple[int, int]]] = {}

    def control_map(self, function: int) -> dict[int, tuple[int, int]]:
        """Block, loop and if opcode offset -> (just after its end, its else or -1)."""
        known = self.controls.get(function)
        if known is None:
            start, end = self.module.bodies[function]
            data = self.module.source
            known, open_, elses = {}, [], {}
            for ins in walk(data, skip_locals(data, start, end), end):
                if ins.opcode in (0x02, 0x03, 0x04):
                    open_.append(ins.at)
                elif ins.opcode == 0x05 and open_:
                    elses[open_[-1]] = ins.at
                elif ins.opcode == 0x0B and open_:
                    at = open_.pop()
                    known[at] = (ins.at + 1, elses.get(at, -1))
            self.controls[function] = known
        return known

    def enter(self, path: Path, function: int, args: list[Val]) -> None:
        if len(path.fns) >= MAX_CALL_DEPTH:
            raise Blocked("Go calls nested deeper than the trace follows (recursion)")
        start, end = self.module.bodies[function]
        r = Reader(self.module.source, start, end)
        declared: list[Val] = []
        for _ in range(r.count()):
            n, wtype = r.u32(), r.byte()
            if len(declared) + n > 4096:
                raise Blocked("a Go function with more locals than the trace follows")
            declared.extend((CONST, wtype, 0) for _ in range(n))
        sig = self.module.function_type(function + len(self.module.func_imports))
        assert sig is not None
        path.fns.append(Fn(function, args + declared, r, len(sig[1]), len(path.stack)))

    def run(self, path: Path, stop: int = 1) -> bool:
        """Trace `path`, writing its code, until it returns from the function at depth `stop`
        (True; the caller merges it) or ends: at the kernel's end or where it is blocked (False)."""
        from .gostep import step  # the instruction handlers (they call back into fork/branch)

        try:
            while len(path.fns) >= stop:
                self.steps += 1
                if self.steps > MAX_STEPS or len(self.body.code) > MAX_OUTPUT_BYTES:
                    raise CompileError(CompileErrorKind.LIMIT, "Go kernel: the traced paths exceed the kernel byte limit")
                step(self, path)
        except (Blocked, Ended) as stop_here:
            return self._stopped(stop_here)
        if path.fns:
            return True
        self.returned += 1
        self.body.end_path(False)
        return False

    def follow(self, path: Path, setup: Callable[[Path], None], stop: int) -> bool:
        """Take one side of a fork (`setup` moves `path` to it), then run it (see run)."""
        try:
            setup(path)
        except (Blocked, Ended) as stop_here:
            return self._stopped(stop_here)
        return self.run(path, stop)

    def _stopped(self, stop_here: Blocked | Ended) -> bool:
        """A path that stopped early (False): a blocked one records why and ends as blocked."""
        if isinstance(stop_here, Blocked):
            self.blockers.append(stop_here.message)
            self.body.end_path(True)
        return False

    def fork(self, path: Path, cond: Val, taken: Callable[[Path], None], other: Callable[[Path], None]) -> None:
        """A branch on run-time value `cond`. Both sides run until the function the branch is in
        returns, each writing its code apart; then `if (cond) {taken} else {other}`, and where
        both returned, `path` goes on with their states merged (gomerge.py). Raises Ended where
        neither side returns."""
        if cond[0] != LOCAL:
            raise Blocked("a branch on a Go pointer")
        if self.forks >= MAX_FORK_DEPTH:
            raise Blocked("more nested run-time branches than the trace follows")
        body, stop = self.body, len(path.fns)
        self.forks += 1
        copy = path.clone()
        then_code, then_ok = body.cut(lambda: self.follow(copy, taken, stop))
        else_code, else_ok = body.cut(lambda: self.follow(path, other, stop))
        self.forks -= 1
        merge_sides(self, path, copy if then_ok else None, path if else_ok else None, cond, then_code, else_code)

    def branch(self, path: Path, depth: int) -> None:
        fn = path.fns[-1]
        if depth == len(fn.ctl):
            self.leave(path)
            return
        if depth > len(fn.ctl):
            raise CompileError(CompileErrorKind.INVALID_CONTRACT, "branch depth out of range")
        index = len(fn.ctl) - 1 - depth
        target = fn.ctl[index]
        values = path.stack[len(path.stack) - target.arity:] if target.arity else []
        del path.stack[target.height:]
        path.stack.extend(values)
        if target.kind == LOOP:
            path.edges += 1
            if path.edges > MAX_EDGES:
                raise Blocked(f"a Go loop that runs past {MAX_EDGES} jumps (its trip count is a run-time value)")
            del fn.ctl[index + 1:]
            fn.reader.pos = target.head
        else:
            del fn.ctl[index:]
            fn.reader.pos = target.end

    def leave(self, path: Path) -> None:
        """A return (or the final end) of the function being traced."""
        fn = path.fns.pop()
        results = path.stack[len(path.stack) - fn.results:] if fn.results else []
        del path.stack[fn.height:]
        path.stack.extend(results)


def trace_kernel(module: DecodedModule, function: int) -> Tracer:
    """Trace defined function `function`, an `(i32) -> ()` kernel export of a Go module."""
    tracer = Tracer(module)
    path = Path([], [], {}, {SP_GLOBAL: (STACK, I32, 0)})
    tracer.enter(path, function, [(LOCAL, I32, 0)])
    tracer.run(path)
    return tracer

