"""Kernels built by standard Go (GOOS=wasip1, //go:wasmexport): recognised and traced.

A Go export wrapper starts `global.get 0; i32.eqz; if` (is the runtime initialised: Go's stack
pointer is global 0, the goroutine pointer the i64 global 2). Such a kernel is not lowered as
written: gotrace.py follows it at compile time into a plain body (the resume state machines
entered at their first state, the stack guard folded, calls inlined, Go's stack kept as
compile-time cells), appended to the module's source as one more body, and that body is what
the lowering compiles. Everything else about the kernel (bindings, the memory snapshot of the
loads it makes, the CPU runner) is as for any module.
"""
from __future__ import annotations

import dataclasses

from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule
from .gotrace import trace_kernel
from .intrinsics import I32, I64
from .optable import skip_locals
from .reader import ReaderError

WRAPPER_HEAD = bytes((0x23, 0x00, 0x45, 0x04, 0x40))  # global.get 0; i32.eqz; if (empty)
GO_GLOBALS = (I32, I64, I64, I64, I64, I64, I64, I32)  # SP, CTXT, g, RET0..RET3, PAUSE
GO_PREFIX = "Go kernel: "


def is_go_kernel(module: DecodedModule, start: int, end: int) -> bool:
    """Whether the body [start, end) is a Go export wrapper in a module with Go's globals."""
    globals_ = module.statics.globals
    if len(globals_) < len(GO_GLOBALS) or any(g.type != t or not g.mutable or g.imported
                                              for g, t in zip(globals_, GO_GLOBALS)):
        return False
    try:
        code = skip_locals(module.source, start, end)
    except ReaderError:
        return False
    return module.source[code:code + len(WRAPPER_HEAD)] == WRAPPER_HEAD


def specialize(module: DecodedModule, start: int, end: int) -> tuple[DecodedModule, int, int]:
    """The module and body range the lowering compiles: unchanged for a module not built by Go;
    for a Go kernel, its trace appended to the source. Raises CompileError (UNSUPPORTED, in
    Go's terms) when no path of the kernel returns."""
    if not is_go_kernel(module, start, end):
        return module, start, end
    function = module.bodies.index((start, end))
    try:
        tracer = trace_kernel(module, function)
    except ReaderError as e:
        raise CompileError(CompileErrorKind.INVALID_CONTRACT, e.message) from None
    except (KeyError, IndexError):  # a construct or type the walk of a malformed body did not map
        raise CompileError(CompileErrorKind.UNSUPPORTED, GO_PREFIX + "a function body the trace could not follow") from None
    if not tracer.returned:
        first = tracer.blockers[0] if tracer.blockers else "no path returns"
        raise CompileError(CompileErrorKind.UNSUPPORTED, GO_PREFIX + first)
    body = tracer.body.finish()
    source = module.source + body
    return dataclasses.replace(module, source=source), len(module.source), len(source)


def go_blockers(module: DecodedModule, start: int, end: int) -> list[str]:
    """Why each traced path of the Go kernel [start, end) that ends early ends, each reason once,
    in the order the trace met them (explain.py lists them)."""
    try:
        tracer = trace_kernel(module, module.bodies.index((start, end)))
    except (CompileError, ReaderError):
        return []
    return list(dict.fromkeys(tracer.blockers))
