"""The shared work queue of a threaded CPU kernel: two functions added to its module beside
run(start, end), over the words abi.accessor keeps for them in the shared buffer memory.

Why in Wasm: with the queue in Python every piece costs a thread a round trip through the GIL
(it must hold it to take the next piece and to return from the last), and those hand-offs are
serial: they were most of the time lost at 1M elements on 16 threads. Here each thread makes one
call, `work`, which takes chunks with an atomic add until none is left, so pieces can be small
(even balance for uneven work such as Mandelbrot's rows) at no Python cost; the calling thread then
waits in `join` (the GIL released) until every element is done, without waiting for the other
threads to get the GIL back and return.

* work(end, chunk) -> i32: while stop is 0, take [s, s + chunk) from `next` (a u64, so no count
  can wrap it), run it, add its length to `done` (waking `join` when that reaches `end`); answers
  the elements this call ran.
* join(end, timeout_ns) -> i32: 1 once `done` is `end`, 0 once `stop` is set (a thread trapped:
  the host sets it, since the trapped call cannot), waiting on `done` between looks.
"""
from __future__ import annotations

from ..abi.accessor import KERNEL_DONE_OFFSET, KERNEL_NEXT_OFFSET, KERNEL_STOP_OFFSET
from . import wasmencode as enc
from .intrinsics import I32, I64

__all__ = ["WORK_EXPORT", "JOIN_EXPORT", "work_body", "join_body", "WORK_TYPE", "JOIN_TYPE"]

WORK_EXPORT = "work"
JOIN_EXPORT = "join"
WORK_TYPE = (bytes([I32, I32]), bytes([I32]))
JOIN_TYPE = (bytes([I32, I64]), bytes([I32]))
_ATOMIC = 0xFE
_VOID, _RESULT_I32 = b"\x40", bytes([I32])


def _atomic(code: int, align_log2: int, memory: int) -> bytes:
    return bytes([_ATOMIC]) + enc.uleb(code) + enc.memarg(memory, align_log2, 0)


def _ops(memory: int) -> dict[str, bytes]:
    return {"i32.load": _atomic(0x10, 2, memory), "i32.add": _atomic(0x1E, 2, memory),
            "i64.add": _atomic(0x1F, 3, memory), "notify": _atomic(0x00, 2, memory),
            "wait32": _atomic(0x01, 2, memory)}


def work_body(run_index: int, memory: int) -> bytes:
    """work(end, chunk): locals 0 end, 1 chunk, 2 s (i64), 3 s32, 4 e, 5 did."""
    a, g, s = _ops(memory), enc.local, enc.op
    end64 = g("local.get", 0) + s("i64.extend_i32_u")
    chunk64 = g("local.get", 1) + s("i64.extend_i32_u")
    length = g("local.get", 4) + g("local.get", 3) + s("i32.sub")
    code = (s("block", _VOID) + s("loop", _VOID)
            + enc.i32_const(KERNEL_STOP_OFFSET) + a["i32.load"] + s("br_if", enc.uleb(1))
            + enc.i32_const(KERNEL_NEXT_OFFSET) + chunk64 + a["i64.add"] + g("local.tee", 2)
            + end64 + s("i64.ge_u") + s("br_if", enc.uleb(1))
            + g("local.get", 2) + s("i32.wrap_i64") + g("local.set", 3)
            + g("local.get", 2) + chunk64 + s("i64.add") + end64 + s("i64.gt_u")
            + s("if", _RESULT_I32) + g("local.get", 0) + s("else")
            + g("local.get", 3) + g("local.get", 1) + s("i32.add") + s("end") + g("local.set", 4)
            + g("local.get", 3) + g("local.get", 4) + s("call", enc.uleb(run_index))
            + g("local.get", 5) + length + s("i32.add") + g("local.set", 5)
            + enc.i32_const(KERNEL_DONE_OFFSET) + length + a["i32.add"] + length + s("i32.add")
            + g("local.get", 0) + s("i32.eq")
            + s("if", _VOID) + enc.i32_const(KERNEL_DONE_OFFSET) + enc.i32_const(0xFFFFFFFF) + a["notify"]
            + s("drop") + s("end")
            + s("br", enc.uleb(0)) + s("end") + s("end")
            + g("local.get", 5) + s("end"))
    return enc.body([(1, I64), (3, I32)], code)


def join_body(memory: int) -> bytes:
    """join(end, timeout_ns): locals 0 end, 1 timeout, 2 d."""
    a, g, s = _ops(memory), enc.local, enc.op
    code = (s("block", _RESULT_I32) + s("loop", _VOID)
            + enc.i32_const(1) + enc.i32_const(KERNEL_DONE_OFFSET) + a["i32.load"] + g("local.tee", 2)
            + g("local.get", 0) + s("i32.eq") + s("br_if", enc.uleb(1)) + s("drop")
            + enc.i32_const(0) + enc.i32_const(KERNEL_STOP_OFFSET) + a["i32.load"] + s("br_if", enc.uleb(1))
            + s("drop")
            + enc.i32_const(KERNEL_DONE_OFFSET) + g("local.get", 2) + g("local.get", 1) + a["wait32"] + s("drop")
            + s("br", enc.uleb(0)) + s("end") + s("unreachable") + s("end") + s("end"))
    return enc.body([(1, I32)], code)
