"""Go kernels (compiler/golang.py, gotrace.py): a hand-written module in the shape standard Go
emits (the export wrapper's `global.get 0; i32.eqz` test, a resume state machine, the stack-guard
prologue, values on Go's stack in memory), traced into a plain body; the corpus's Go cells."""
from __future__ import annotations

from pathlib import Path

import pytest
import wasmtime

from wagogpu import BindingConfig, KernelConfig
from wagogpu.compiler import BlockerKind, CompileError, compile_buffer_wgsl, explain_kernel
from wagogpu.compiler.contract import CompileErrorKind
from wagogpu.compiler.decoder import decode_module
from wagogpu.compiler.wasmencode import sleb, uleb
from wagogpu.compiler.golang import is_go_kernel
from wagogpu.compiler.gomemory import Blocked, load, store
from wagogpu.compiler.gobody import Body, CONST, LOCAL
from wagogpu.compiler.gonumeric import fold
from wagogpu.compiler.gotrace import trace_kernel
from wagogpu.compiler.intrinsics import I32, I64
from wagogpu.compiler.optable import skip_locals, walk
from wagogpu.compiler.reader import Reader

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "wasm"
NOT_HOST = "a call to a host function outside wago_gpu_v1"

# x = in[i]; three times x = 3x + 1 (a loop through the state machine: a forward jump to its test,
# a back edge to its body); then, on a run-time condition (THEN), a WASI call; out[i] = x.
GO_SHAPED = """(module
  (import "wago_gpu_v1" "getBuffer" (func $getBuffer (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferI32" (func $read (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "writeBufferI32" (func $write (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (memory (export "memory") 1)
  (global (mut i32) (i32.const 0)) (global (mut i64) (i64.const 0)) (global (mut i64) (i64.const 0))
  (global (mut i64) (i64.const 0)) (global (mut i64) (i64.const 0)) (global (mut i64) (i64.const 0))
  (global (mut i64) (i64.const 0)) (global (mut i32) (i32.const 0))
  (func $morestack (param i32) (result i32) (drop (call $yield)) (i32.const 1))
  (func $body (param $pc i32) (result i32) (local $sp i32) (local $x i32) (local $k i32)
    global.get 0 local.set $sp
    block loop block block block
      local.get $pc
      br_table 0 0 1 2 2
    end
    local.get $sp global.get 2 i32.wrap_i64 i32.load offset=16 i32.le_u
    if (br_if 4 (call $morestack (i32.const 0))) end
    local.get $sp i32.const 16 i32.sub local.tee $sp global.set 0
    (local.set $x (call $read (call $getBuffer (i32.const 0)) (i32.load offset=24 (local.get $sp))))
    i32.const 0 local.set $k
    i32.const 3 local.set $pc br 2
    end
    (local.set $x (i32.add (i32.mul (local.get $x) (i32.const 3)) (i32.const 1)))
    (local.set $k (i32.add (local.get $k) (i32.const 1)))
    end
    (if (i32.lt_s (local.get $k) (i32.const 3)) (then (local.set $pc (i32.const 2)) (br 1)))
    THEN
    (call $write (call $getBuffer (i32.const 1)) (i32.load offset=24 (local.get $sp)) (local.get $x))
    local.get $sp i32.const 16 i32.add local.tee $sp global.set 0
    i32.const 0 return
    end end i32.const 1)
  (func $notInitialized)
  (func (export "wago_gpu.kernel.k") (param i32)
    global.get 0 i32.eqz if call $notInitialized end
    global.get 0 i32.const 8 i32.sub global.set 0
    global.get 0 local.get 0 i32.store
    global.get 0 i32.const 8 i32.sub global.set 0
    global.get 0 i64.const 1 i64.store
    i32.const 0 call $body
    if unreachable end
    global.get 0 i32.const 16 i32.add global.set 0)
  (func (export "wago_gpu.cpu.k") (param i32)))"""
# abs(x) in a helper the kernel calls: its branch's two sides meet again where it returns.
IN_A_CALLEE = "(local.set $x (call $abs (local.get $x)))"
ABS = """  (func $abs (param i32) (result i32)
    (if (i32.lt_s (local.get 0) (i32.const 0)) (then (return (i32.sub (i32.const 0) (local.get 0)))))
    (local.get 0))
"""
BEHIND_A_BRANCH = "(if (i32.eq (local.get $x) (i32.const 7)) (then (drop (call $yield))))"
ON_EVERY_PATH = "(drop (call $yield))"
KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                      (BindingConfig(0, "I32", "read"), BindingConfig(1, "I32", "write")))


def go_module(then: str) -> bytes:
    return bytes(wasmtime.wat2wasm(GO_SHAPED.replace("THEN", then).replace("  (func $notInitialized)",
                                                                           ABS + "  (func $notInitialized)")))


def traced(source: bytes):
    module = decode_module(source)
    index = module.exports[b"wago_gpu.kernel.k"] - len(module.func_imports)
    return module, trace_kernel(module, index)


def test_the_go_shape_is_recognised_and_other_modules_are_not():
    module = decode_module(go_module(BEHIND_A_BRANCH))
    index = module.exports[b"wago_gpu.kernel.k"] - len(module.func_imports)
    assert is_go_kernel(module, *module.bodies[index])
    c = decode_module((CORPUS / "c-O2.wasm").read_bytes())
    c_index = c.exports[b"wago_gpu.kernel.saxpy"] - len(c.func_imports)
    assert not is_go_kernel(c, *c.bodies[c_index])


def test_the_trace_folds_the_state_machine_unrolls_the_loop_and_traps_the_wasi_path():
    module, tracer = traced(go_module(BEHIND_A_BRANCH))
    assert tracer.returned == 1  # x != 7; the x == 7 path ends at its WASI call
    assert tracer.blockers == [NOT_HOST + " (WASI: fmt, os, time or the scheduler's clock)"]
    body = tracer.body.finish()
    ops = [i.name for i in walk(body, skip_locals(body, 0, len(body)), len(body))]
    assert ops.count("i32.mul") == 3 and "br_table" not in ops and "loop" not in ops  # unrolled, no dispatcher
    # getBuffer and read, then the path that traps at the WASI call, then getBuffer and write: no morestack
    assert ops.count("unreachable") == 1 and ops.count("call") == 4
    assert "global.get" not in ops and "i32.store" not in ops  # Go's stack became compile-time cells


def test_the_sides_of_a_branch_in_a_callee_meet_where_it_returns():
    _module, tracer = traced(go_module(IN_A_CALLEE))
    assert tracer.returned == 1 and tracer.blockers == []
    body = tracer.body.finish()
    calls = [i.index for i in walk(body, skip_locals(body, 0, len(body)), len(body)) if i.name == "call"]
    assert calls == [0, 1, 0, 2]  # getBuffer, read, getBuffer, write: the write is not duplicated
    assert "fn main" in compile_buffer_wgsl(go_module(IN_A_CALLEE), KERNEL)


def test_a_go_kernel_compiles_and_names_its_trapping_path():
    wgsl = compile_buffer_wgsl(go_module(BEHIND_A_BRANCH), KERNEL)
    assert "fn main" in wgsl


def test_a_blocker_on_every_path_stays_on_the_cpu_and_explain_says_why_in_go_terms():
    source = go_module(ON_EVERY_PATH)
    with pytest.raises(CompileError) as caught:
        compile_buffer_wgsl(source, KERNEL)
    assert caught.value.kind == CompileErrorKind.UNSUPPORTED
    assert caught.value.message.startswith("Go kernel: " + NOT_HOST)
    blockers = explain_kernel(source, KERNEL)
    assert blockers[0].kind == BlockerKind.FIRST and "Go kernel: " in blockers[0].reason
    assert [b.kind for b in blockers[1:]] == [BlockerKind.GO_PATH] and NOT_HOST in blockers[1].reason


@pytest.mark.parametrize("cell", ["go-default", "go-N-l"])
def test_every_corpus_go_kernel_compiles(cell):
    from tests.corpus.table import KERNELS  # noqa: PLC0415 (numpy, only here)

    source = (CORPUS / f"{cell}.wasm").read_bytes()
    go = [(i, k) for i, k in enumerate(KERNELS, start=1) if any(lang.value == "go" for lang in k.languages)]
    assert len(go) == 8
    for i, kernel in go:
        assert "fn main" in compile_buffer_wgsl(source, kernel.config(i)), kernel.name


def test_stack_cells_keep_what_was_stored_and_refuse_what_was_not():
    body = Body()
    cells: dict = {}
    store(cells, body, -8, 8, (CONST, I64, 0xFFFF_FFFF_8000_0001))
    assert load(cells, body, -8, 4, I32, False) == (CONST, I32, 0x8000_0001)  # the low word
    assert load(cells, body, -8, 1, I64, True) == (CONST, I64, 1)
    store(cells, body, -4, 4, (LOCAL, I32, 3))  # overlaps the 8-byte cell: it is gone
    with pytest.raises(Blocked):
        load(cells, body, -8, 8, I64, False)
    assert load(cells, body, -4, 4, I32, False) == (LOCAL, I32, 3)


def test_folding_and_encoding():
    assert fold(0x74, [1, 33]) == 2  # i32.shl counts modulo 32
    assert fold(0x75, [0x8000_0000, 31]) == 0xFFFF_FFFF  # i32.shr_s
    assert fold(0x48, [0xFFFF_FFFF, 0]) == 1  # i32.lt_s: -1 < 0
    assert fold(0x6D, [7, 0]) is None  # division does not fold (it may trap)
    for value in (0, 1, 63, 64, -1, -64, -65, 2 ** 31 - 1, -2 ** 63):
        assert Reader(sleb(value)).leb(64, True) == value
    assert Reader(uleb(624485)).u32() == 624485
