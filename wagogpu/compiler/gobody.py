"""The Wasm function body the Go tracer (gotrace.py) writes: a kernel of its own, `(i32) -> ()`,
whose code is the one path (or tree of paths) the Go kernel takes, in plain Wasm the lowering
already knows.

Every value the trace cannot fix at compile time is computed once into a fresh local (each local
is assigned exactly once, so a local holding a buffer handle never meets another value at a
join); constants stay immediates. Local 0 is the invocation index.
"""
from __future__ import annotations

from typing import Callable

from .wasmencode import const, uleb  # the one LEB128 and constant encoder (re-exported for the go* modules)

# A traced value: (kind, Wasm type, payload). CONST: payload is the value's bits; LOCAL: the output
# local holding it; STACK: a Go stack address, payload its offset from the kernel's entry stack
# pointer; G: the goroutine pointer (global 2); GUARD: g.stackguard0 loaded through it.
Val = tuple[str, int, int]
Segment = tuple[bytes, dict[int, tuple[int, int]]]  # code cut out of the body, its widenings' spans in it
CONST, LOCAL, STACK, G, GUARD = "const", "local", "stack", "g", "guard"
WRAP, EXTENDS = b"\xa7", (b"\xac", b"\xad")  # i32.wrap_i64; i64.extend_i32_s / _u
OP_LOCAL_GET, OP_LOCAL_SET, OP_IF, OP_END, OP_RETURN, OP_UNREACHABLE, EMPTY = 0x20, 0x21, 0x04, 0x0B, 0x0F, 0x00, 0x40


class Body:
    """The output function being written."""

    def __init__(self) -> None:
        self.code = bytearray()
        self.local_types: list[int] = []  # declared locals after param 0, in order
        self.extended: dict[int, Val] = {}  # i64 local -> the i32 value it extends
        self.spans: dict[int, tuple[int, int]] = {}  # local -> its widening's code, dropped if never read
        self.read: set[int] = set()

    def new_local(self, wtype: int) -> int:
        self.local_types.append(wtype)
        return len(self.local_types)

    def push(self, value: Val) -> None:
        """Code that pushes a CONST or LOCAL value (the tracer refuses the others first)."""
        kind, wtype, payload = value
        if kind == CONST:
            self.code += const(wtype, payload)
        else:
            assert kind == LOCAL, "the tracer writes only constants and locals"  # (gotrace refuses the others first)
            self.read.add(payload)
            self.code.append(OP_LOCAL_GET)
            self.code += uleb(payload)

    def compute(self, args: list[Val], instruction: bytes, result: int | None) -> Val | None:
        """Push `args`, run `instruction`; its result (if any) goes to a fresh local. The low word
        of an i32 widened to i64 is that i32 itself: Go widens every int it moves through its
        stack (a buffer handle too), and the handle must reach the buffer call as it was."""
        if instruction == WRAP and args[0][0] == LOCAL and args[0][2] in self.extended:
            return self.extended[args[0][2]]
        at = len(self.code)
        for arg in args:
            self.push(arg)
        self.code += instruction
        if result is None:
            return None
        n = self.new_local(result)
        self.code.append(OP_LOCAL_SET)
        self.code += uleb(n)
        if instruction in EXTENDS:
            self.extended[n] = args[0]
            self.spans[n] = (at, len(self.code))
        return (LOCAL, result, n)

    def cut(self, run: Callable[[], bool]) -> tuple[Segment, bool]:
        """Run `run` and take the code it wrote out of the body (gomerge.py places it)."""
        at = len(self.code)
        result = run()
        spans = {n: (s - at, e - at) for n, (s, e) in self.spans.items() if s >= at}
        for n in spans:
            del self.spans[n]
        segment = (bytes(self.code[at:]), spans)
        del self.code[at:]
        return segment, result

    def paste(self, segment: Segment) -> None:
        code, spans = segment
        at = len(self.code)
        self.code += code
        for n, (s, e) in spans.items():
            self.spans[n] = (s + at, e + at)

    def open_if(self, cond: Val) -> None:
        self.push(cond)
        self.code += bytes((OP_IF, EMPTY))

    def close(self) -> None:
        self.code.append(OP_END)

    def end_path(self, trap: bool) -> None:
        self.code.append(OP_UNREACHABLE if trap else OP_RETURN)

    def finish(self) -> bytes:
        """The body: local declarations (runs of one type), code, final end."""
        groups: list[list[int]] = []
        for wtype in self.local_types:
            if groups and groups[-1][1] == wtype:
                groups[-1][0] += 1
            else:
                groups.append([1, wtype])
        code = bytearray(self.code)
        for n, (start, end) in sorted(self.spans.items(), key=lambda item: -item[1][0]):
            if n not in self.read:  # a widening nothing reads (its low word went on as the i32)
                del code[start:end]
        head = uleb(len(groups)) + b"".join(uleb(n) + bytes((t,)) for n, t in groups)
        return head + bytes(code) + bytes((OP_END,))
