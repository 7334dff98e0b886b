"""What stays on the CPU among calls, globals, loads and stores, and the bounds of inlining
(inline.py, globalvars.py, shadow.py, memload.py); the GPU runs are in tests/host/test_kernel_memory_gpu.py."""
from __future__ import annotations

import pytest
import wasmtime

from wagogpu import CompileError, CompileErrorKind, compile_buffer_wgsl
from wagogpu.compiler import reader as lim
from watkit import kernel_wat

K_INT = None


def compile_wat(body: str, extra: str = "", locals_: str = "(local $p i32)") -> str:
    from fixtures import config
    from wagogpu.abi.table import Access, ElementType

    text = kernel_wat(body, locals_).rstrip().removesuffix(")") + extra + ")"
    kernel = config((0, ElementType.I32, Access.READ), (2, ElementType.I32, Access.WRITE), name="k")
    return compile_buffer_wgsl(bytes(wasmtime.wat2wasm(text)), kernel)


def refused(body: str, extra: str = "", kind: CompileErrorKind = CompileErrorKind.UNSUPPORTED,
            locals_: str = "(local $p i32)") -> str:
    with pytest.raises(CompileError) as e:
        compile_wat(body, extra, locals_)
    assert e.value.kind == kind
    return e.value.message


WRITE = "(call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i) {})"
READ = "(call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i))"


def test_a_helper_is_inlined_with_its_result_and_the_index_keeps_its_identity():
    extra = "(func $put (param $h i32) (param $at i32) (param $v i32) (call $writeBufferI32 (local.get $h) (local.get $at) (local.get $v)))"
    wgsl = compile_wat(f"(call $put (call $getBuffer (i32.const 2)) (local.get $i) {READ})", extra)
    assert "slot2[index] = " in wgsl and "fn " not in wgsl.split("fn main")[0]


def names_stripped_message(wat: str) -> str:
    """The refusal of a module whose name section is gone: the function is named by index alone."""
    from fixtures import config
    from wagogpu.abi.table import Access, ElementType
    from wagogpu.compiler.decoder import decode_module
    from wagogpu.host.memexports import uleb128

    wasm = bytes(wasmtime.wat2wasm(wat))
    custom = decode_module(wasm).custom
    assert custom, "wat2wasm writes a name section"
    start = custom[0][0] - 1 - len(uleb128(custom[0][1] - custom[0][0]))  # the section id and its size
    stripped = wasm[:start] + wasm[custom[0][1]:]
    kernel = config((0, ElementType.I32, Access.READ), (2, ElementType.I32, Access.WRITE), name="k")
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(stripped, kernel)
    assert "$" not in e.value.message
    return e.value.message


def test_recursion_and_call_indirect_stay_on_the_cpu():
    rec = "(func $f (param i32) (result i32) (call $g (local.get 0))) (func $g (param i32) (result i32) (call $f (local.get 0)))"
    message = refused(WRITE.format(f"(call $f {READ})"), rec)
    assert message.startswith("recursive call to function ") and message.endswith(" ($f)")  # by its name-section name
    stripped = kernel_wat(WRITE.format(f"(call $f {READ})"), "(local $p i32)").rstrip().removesuffix(")") + rec + ")"
    assert names_stripped_message(stripped).startswith("recursive call to function ")
    table = "(table 1 funcref) (type $t (func (param i32) (result i32)))"
    assert "call_indirect" in refused(WRITE.format(f"(call_indirect (type $t) {READ} (i32.const 0))"), table)


def test_inline_depth_is_bounded(monkeypatch):
    chain = "".join(f"(func $f{k} (param i32) (result i32) (call $f{k + 1} (local.get 0)))" for k in range(4))
    chain += "(func $f4 (param i32) (result i32) (local.get 0))"
    body = WRITE.format(f"(call $f0 {READ})")
    assert "slot2[index]" in compile_wat(body, chain)
    monkeypatch.setattr(lim, "MAX_INLINE_DEPTH", 3)
    assert refused(body, chain, CompileErrorKind.LIMIT) == "inline depth limit"


def test_globals():
    consts = "(global $c i32 (i32.const 41)) (global $m (mut i32) (i32.const 0)) (global $f (mut f32) (f32.const 0))"
    assert "0x00000029u" in compile_wat(WRITE.format("(i32.add (global.get $c) (i32.const 0))"), consts)
    assert "mutable f32 global" in refused(WRITE.format("(i32.reinterpret_f32 (global.get $f))"), consts)
    # the mutable i32 global is taken for the stack pointer: its value is a frame address, never a number;
    # the message names the global (a plain variable, as here, is the usual cause)
    assert refused(WRITE.format("(global.get $m)"), consts) == (
        "global 1 ($m): its value is used as a number, which a stack address cannot be (the first mutable i32 global "
        "a kernel reads is taken for its shadow-stack pointer; a plain mutable global keeps the kernel on the CPU, "
        "whose value only the guest knows)")
    assert refused("(global.set $m (i32.add (global.get $m) (i32.const 4)))", consts).startswith(
        "global 1 ($m): set above its value at kernel entry, which a stack pointer never is (")
    assert "a global other than the stack pointer" in refused("(global.set $m (i32.const 1))", consts)


SP = "(global $sp (mut i32) (i32.const 4096))"


def test_shadow_stack_rules():
    frame = "(local.set $p (i32.sub (global.get $sp) (i32.const 16))) (global.set $sp (local.get $p))"
    restore = "(global.set $sp (i32.add (local.get $p) (i32.const 16)))"
    ok = frame + f"(i32.store offset=4 (local.get $p) {READ})" + WRITE.format("(i32.load offset=4 (local.get $p))") + restore
    assert "slot2[index]" in compile_wat(ok, SP)
    assert refused(frame + WRITE.format("(i32.const 0)"), SP) == "the stack pointer is not restored where the function returns"
    assert "did not store" in refused(frame + WRITE.format("(i32.load offset=4 (local.get $p))") + restore, SP)
    assert "outside the kernel's frame" in refused(frame + "(i32.store offset=16 (local.get $p) (i32.const 1))" + restore, SP)
    assert "overlap" in refused(frame + "(i32.store offset=4 (local.get $p) (i32.const 1))"
                                "(i32.store16 offset=6 (local.get $p) (i32.const 1))" + restore, SP)
    moved = "(if (i32.eqz (local.get $i)) (then (global.set $sp (i32.sub (global.get $sp) (i32.const 16)))))"
    assert refused(moved, SP) == "the stack pointer is moved inside control flow"


def test_memory_rules():
    assert "stay on the CPU" in refused(f"(i32.store (i32.const 64) {READ})")
    shared = compile_wat(WRITE.format("(i32.load (local.get $i))"))
    assert "var<storage, read> mem: array<u32>" in shared and "wasm_mem_at" in shared


def test_memory64_and_shared_memories_stay_on_the_cpu():
    from fixtures import config
    from wagogpu.abi.table import Access, ElementType

    kernel = config((0, ElementType.I32, Access.READ), (2, ElementType.I32, Access.WRITE), name="k")
    for memory, address, words in [("(memory i64 1)", "(i32.const 0)", "memory64"),  # wat2wasm does not type-check
                                   ("(memory 1 1 shared)", "(i32.const 0)", "shared memory")]:
        text = kernel_wat(WRITE.format(f"(i32.load {address})")).replace('(memory (export "memory") 1)', memory)
        with pytest.raises(CompileError) as e:
            compile_buffer_wgsl(bytes(wasmtime.wat2wasm(text)), kernel)
        assert words in e.value.message
