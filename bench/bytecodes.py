"""How many bytecodes of given source files one call executes: a count that does not move with
the machine's load, beside the timings (a 2-core machine shared with other work moves a
microsecond figure by 10-30% between processes; a change of a few percent shows only here).

The count covers the Python frames whose file path contains one of the given parts (the package,
or a floor's own module), each opcode once; C calls count nothing of their own.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable


@dataclass(frozen=True)
class BytecodeCount:
    opcodes: int
    frames: int


def count_bytecodes(fn: Callable[[], Any], parts: tuple[str, ...],
                    skip: tuple[tuple[str, str], ...] = ()) -> BytecodeCount:
    """The opcodes and frames one call of fn executes in files whose path contains any of parts,
    but for the frames of the functions in ``skip`` ((path part, function name) pairs: a wait
    whose polls depend on the device). fn runs twice, traced both times, and the second call is
    counted: CPython 3.12 reports no opcode of a code object on the first traced call that asks
    for them."""
    _count(fn, parts, skip)
    return _count(fn, parts, skip)


def _count(fn: Callable[[], Any], parts: tuple[str, ...], skip: tuple[tuple[str, str], ...]) -> BytecodeCount:
    opcodes = frames = 0

    def trace(frame: FrameType, event: str, _arg: Any) -> Any:
        nonlocal opcodes, frames
        if event == "call":
            code = frame.f_code
            if not any(part in code.co_filename for part in parts) or \
                    any(part in code.co_filename and name == code.co_name for part, name in skip):
                return None  # (nor the frames it calls: they are traced on their own call)
            frame.f_trace_opcodes = True
            frames += 1
        elif event == "opcode":
            opcodes += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return BytecodeCount(opcodes, frames)
