"""Multi-value block types on the GPU: block, if and loop with parameters and several results.

Every kernel here is lowered (it must be GPU-eligible), validated by wgpu (conftest), run on the
test adapter and compared bit for bit with the same kernel run in wasmtime (watkit.reference).

SPEC holds functions of the official WebAssembly testsuite (WebAssembly/testsuite at commit
193e551ff22663995b1ac95dc62344133669e14b, files block.wast, if.wast and loop.wast; Apache License
2.0, see data/WASM_TESTSUITE_LICENSE): their bodies with `(call $dummy)` (a no-op) left out and the
function's parameter `local.get 0` read as the kernel's input `$p`, each with the results the
testsuite's assert_return expects.
"""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu.abi.table import Access, ElementType
from wagogpu.compiler import CompileError, CompileErrorKind, compile_buffer_wgsl
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.config import BindingConfig, KernelConfig
from watkit import kernel_module, reference

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access
KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                      [BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.READ),
                       BindingConfig(2, E.I32, A.WRITE), BindingConfig(3, E.I32, A.WRITE),
                       BindingConfig(4, E.F32, A.READ), BindingConfig(5, E.F32, A.WRITE)], relaxed_float=True)
LOCALS = "(local $p i32) (local $q i32) (local $x i32) (local $t i32) (local $u i32) (local $n i32) (local $m i32)"
INPUTS = "(local.set $p (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i)))" \
         " (local.set $q (call $readBufferI32 (call $getBuffer (i32.const 1)) (local.get $i)))"
F_IN = "(call $readBufferF32 (call $getBuffer (i32.const 4)) (local.get $i))"


def out(slot: int, value: str, t: str = "I32") -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


def result(body: str) -> str:
    """Write the i32 that `body` (an instruction sequence) leaves to slot 2."""
    return out(2, f"(block (result i32) {body})")


INTS = [0, 1, -1, 2, 3, 5, 7, 9, 10, 11, 12, 15, 16, -7, 100, 0x7FFFFFFF, -0x80000000, 0x12345678]


def words(values) -> np.ndarray:
    return (np.asarray(values, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


def run_both(gpu, body: str, p=None, q=None, f=None):
    """(lowered kernel, GPU outputs, wasmtime reference) of INPUTS + `body` over the inputs."""
    p = list(INTS) if p is None else list(p)
    n = len(p)
    q = list(reversed(INTS))[:n] if q is None else list(q)
    f = np.linspace(-3, 3, n, dtype=np.float32) if f is None else np.asarray(f, np.float32)
    slots = {0: words(p), 1: words(q), 2: np.full(n, 0xDEADBEEF, np.uint32), 3: np.full(n, 0xDEADBEEF, np.uint32),
             4: f.view(np.uint32), 5: np.zeros(n, np.uint32)}
    source = kernel_module(INPUTS + " " + body, LOCALS)
    lk = lower_kernel(decode_module(source), KERNEL)  # raises if the GPU path refuses the kernel
    used = [s for s in range(8) if (lk.reads | lk.writes) >> s & 1]
    got, err = gpu.run_kernel(lk.wgsl, n, {s: slots[s].copy() for s in used}, {s for s in used if lk.writes >> s & 1})
    ref = reference(source, "k", n, slots)
    assert err == 0 and not ref.trapped, (err, lk.wgsl)
    for slot, words_ in got.items():
        assert (words_ == ref.slots[slot]).all(), (slot, words_[:8], ref.slots[slot][:8], lk.wgsl)
    return lk, got, ref


# ---- our own shapes -----------------------------------------------------------------------------
SHAPES = {
    # parameters flow in as the construct's stack; two results flow out
    "block_params": result("(local.get $p) (local.get $q) (block (param i32 i32) (result i32) (i32.sub))"),
    "block_two_results": result("(block (result i32 i32) (local.get $q) (local.get $p)) (i32.sub)"),
    # a br_if carrying two values: the parameters if taken, new values if not
    "br_if_two_values": result("(local.get $p) (local.get $q) (block $b (param i32 i32) (result i32 i32)"
                               " (br_if $b (i32.lt_s (local.get $p) (local.get $q))) (drop) (drop)"
                               " (i32.const 7) (local.get $p)) (i32.sub)"),
    "br_two_values_from_inside": result("(block $b (result i32 i32) (block (br_if $b (local.get $q) (local.get $p)"
                                        " (i32.and (local.get $p) (i32.const 1))) (drop) (drop))"
                                        " (i32.const 40) (i32.const 2)) (i32.sub)"),
    "if_params_else": result("(local.get $p) (local.get $q) (if (param i32 i32) (result i32 i32)"
                             " (i32.gt_s (local.get $p) (i32.const 5)) (then (i32.add) (i32.const 1))"
                             " (else (i32.mul) (i32.const 2))) (i32.shl)"),
    "if_params_without_else": result("(local.get $p) (local.get $q) (if (param i32 i32) (result i32 i32)"
                                     " (i32.and (local.get $q) (i32.const 1)) (then (drop) (i32.const 99)))"
                                     " (i32.sub)"),
    # br_table carrying two values to different targets
    "br_table_two_values": result("(block $outer (result i32 i32) (block $inner (result i32 i32)"
                                  " (local.get $p) (local.get $q) (br_table $inner $outer $inner $outer"
                                  " (i32.and (local.get $p) (i32.const 3)))) (i32.const 1000) (i32.add)) (i32.sub)"),
    # a loop re-entered with new parameters: Fibonacci over (a, b) -> (b, a + b)
    "loop_params_fibonacci": result("(local.set $n (i32.and (local.get $p) (i32.const 15))) (i32.const 0) (i32.const 1)"
                                    " (loop $l (param i32 i32) (result i32 i32) (local.set $t) (local.get $t) (i32.add)"
                                    " (local.set $u) (local.get $t) (local.get $u) (br_if $l (i32.gt_s (local.tee $n"
                                    " (i32.sub (local.get $n) (i32.const 1))) (i32.const 0)))) (drop)"),
    # the parameters come back swapped: the assignments must not read a var already overwritten
    "loop_params_swapped": result("(local.set $n (i32.and (local.get $p) (i32.const 7))) (local.get $p) (local.get $q)"
                                  " (loop $l (param i32 i32) (result i32 i32) (local.set $t) (local.set $u)"
                                  " (local.get $t) (i32.add (local.get $u) (i32.const 1)) (br_if $l (i32.gt_s"
                                  " (local.tee $n (i32.sub (local.get $n) (i32.const 1))) (i32.const 0))))"
                                  " (i32.sub)"),
    # nested loops with parameters; the inner one also branches to the outer one, carrying its value
    "nested_loop_params": result("(local.set $n (i32.and (local.get $p) (i32.const 7))) (i32.const 0)"
                                 " (loop $outer (param i32) (result i32) (local.set $n (i32.sub (local.get $n)"
                                 " (i32.const 1))) (local.set $m (i32.const 3)) (loop $inner (param i32) (result i32)"
                                 " (i32.add (local.get $m)) (br_if $outer (i32.and (i32.eq (local.get $m) (i32.and"
                                 " (local.get $q) (i32.const 3))) (i32.gt_s (local.get $n) (i32.const 0))))"
                                 " (br_if $inner (local.tee $m (i32.sub (local.get $m) (i32.const 1)))))"
                                 " (br_if $outer (i32.gt_s (local.get $n) (i32.const 0))))"),
    # floats through block parameters and results: exact bit operations only
    "f32_params_results": out(5, "(block (result f32) " + F_IN + " (f32.const -0.5) (block (param f32 f32)"
                                 " (result f32 f32) (f32.neg) (local.get $p) (br_if 0) (drop) (f32.const 2))"
                                 " (f32.copysign))", "F32")
                          + out(2, "(i32.reinterpret_f32 (block (result f32 i32) " + F_IN + " (local.get $q)) (drop))"),
    # a deferred f32 node made before a construct, used inside it and after it
    "deferred_node_across_constructs": "(f32.mul " + F_IN + " (f32.const 3)) (block (param f32) (result f32)"
                                       " (local.get $p) (if (param f32) (result f32) (then (f32.abs))))"
                                       " (local.set $x (i32.reinterpret_f32)) " + out(2, "(local.get $x)"),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_multi_value_shapes_match_wasm(gpu, name):
    run_both(gpu, SHAPES[name])


def test_loop_parameters_travel_in_vars_and_lets():
    source = kernel_module(INPUTS + " " + SHAPES["loop_params_fibonacci"], LOCALS)
    wgsl = compile_buffer_wgsl(source, KERNEL)
    main = wgsl[wgsl.index("fn main"):]
    head = main[main.index("  loop {"):]
    # before the loop the two vars get the parameters; each pass reads them into lets after the fuel check
    assert main.count("  var v") >= 4 and "fuel = fuel - 1u;\n  let v" in head


def test_a_loop_nobody_branches_to_keeps_its_parameters_as_values():
    wgsl = compile_buffer_wgsl(kernel_module(INPUTS + " " + result(
        "(local.get $p) (loop (param i32) (result i32) (i32.const 2) (i32.add))"), LOCALS), KERNEL)
    main = wgsl[wgsl.index("fn main"):]
    assert "loop" not in main and "fuel" not in main


def _typed_block_module(sig: tuple[list[int], list[int]], code: bytes) -> bytes:
    """TM with one more type, `sig`, the block type index the kernel body's `{t}` bytes stand for."""
    from wasmgen import END, TM, I32, uleb

    m = TM.builder()
    t = m.type(*sig)
    m.func([I32], [], code.replace(b"{t}", uleb(t)) + END, export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    return m.build()


@pytest.mark.parametrize("sig, code, message", [
    (([0x7F], [0x7D]), b"\x41\x01\x41\x01\x04{t}\x0b\x1a", "if without else cannot produce a value"),
    (([0x7F, 0x7F], [0x7F]), b"\x41\x01\x02{t}\x6a\x0b\x1a", "operand stack underflow"),
    (([0x7F], [0x7F, 0x7F]), b"\x41\x01\x03{t}\x0b\x1a", "operand stack underflow"),
    (([0x7F], [0x7F]), b"\x41\x01\x03{t}\x43\x00\x00\x00\x00\x0c\x00\x0b\x1a", "operand type mismatch"),
    (([0x7F], []), b"\x41\x01\x02{t}\x0b", "operand stack mismatch at block end"),
])
def test_malformed_multi_value_is_rejected(sig, code, message):
    """Bodies wasmtime would not validate are refused by the lowering itself (the module is never
    run on the GPU)."""
    from fixtures import K

    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(_typed_block_module(sig, code), K)
    assert (e.value.kind, e.value.message) == (CompileErrorKind.INVALID_CONTRACT, message)


# ---- the spec's functions of that shape ---------------------------------------------------------
SPEC = {  # name: (file, body, {input $p: expected result})
    "block/as-binary-operands": ("(i32.mul (block (result i32 i32) (i32.const 3) (i32.const 4)))", {0: 12}),
    "block/as-compare-operands": ("(f32.gt (block (result f32 f32) (f32.const 3) (f32.const 3)))", {0: 0}),
    "block/as-mixed-operands": ("(block (result i32 i32) (i32.const 3) (i32.const 4)) (i32.const 5) (i32.add)"
                                " (i32.mul)", {0: 27}),
    "block/param": ("(i32.const 1) (block (param i32) (result i32) (i32.const 2) (i32.add))", {0: 3}),
    "block/params": ("(i32.const 1) (i32.const 2) (block (param i32 i32) (result i32) (i32.add))", {0: 3}),
    "block/params-id": ("(i32.const 1) (i32.const 2) (block (param i32 i32) (result i32 i32)) (i32.add)", {0: 3}),
    "block/param-break": ("(i32.const 1) (block (param i32) (result i32) (i32.const 2) (i32.add) (br 0))", {0: 3}),
    "block/params-break": ("(i32.const 1) (i32.const 2) (block (param i32 i32) (result i32) (i32.add) (br 0))",
                           {0: 3}),
    "block/params-id-break": ("(i32.const 1) (i32.const 2) (block (param i32 i32) (result i32 i32) (br 0))"
                              " (i32.add)", {0: 3}),
    "if/as-binary-operands": ("(i32.mul (if (result i32 i32) (local.get $p) (then (i32.const 3) (i32.const 4))"
                              " (else (i32.const 3) (i32.const -4))))", {0: -12, 1: 12}),
    "if/as-compare-operands": ("(f32.gt (if (result f32 f32) (local.get $p) (then (f32.const 3) (f32.const 3))"
                               " (else (f32.const -2) (f32.const -3))))", {0: 1, 1: 0}),
    "if/as-mixed-operands": ("(if (result i32 i32) (local.get $p) (then (i32.const 3) (i32.const 4))"
                             " (else (i32.const -3) (i32.const -4))) (i32.const 5) (i32.add) (i32.mul)",
                             {0: -3, 1: 27}),
    "if/param": ("(i32.const 1) (if (param i32) (result i32) (local.get $p) (then (i32.const 2) (i32.add))"
                 " (else (i32.const -2) (i32.add)))", {0: -1, 1: 3}),
    "if/params": ("(i32.const 1) (i32.const 2) (if (param i32 i32) (result i32) (local.get $p) (then (i32.add))"
                  " (else (i32.sub)))", {0: -1, 1: 3}),
    "if/params-id": ("(i32.const 1) (i32.const 2) (if (param i32 i32) (result i32 i32) (local.get $p) (then))"
                     " (i32.add)", {0: 3, 1: 3}),
    "if/param-break": ("(i32.const 1) (if (param i32) (result i32) (local.get $p) (then (i32.const 2) (i32.add)"
                       " (br 0)) (else (i32.const -2) (i32.add) (br 0)))", {0: -1, 1: 3}),
    "if/params-break": ("(i32.const 1) (i32.const 2) (if (param i32 i32) (result i32) (local.get $p)"
                        " (then (i32.add) (br 0)) (else (i32.sub) (br 0)))", {0: -1, 1: 3}),
    "if/params-id-break": ("(i32.const 1) (i32.const 2) (if (param i32 i32) (result i32 i32) (local.get $p)"
                           " (then (br 0))) (i32.add)", {0: 3, 1: 3}),
    "loop/as-binary-operands": ("(i32.mul (loop (result i32 i32) (i32.const 3) (i32.const 4)))", {0: 12}),
    "loop/as-compare-operands": ("(f32.gt (loop (result f32 f32) (f32.const 3) (f32.const 3)))", {0: 0}),
    "loop/as-mixed-operands": ("(loop (result i32 i32) (i32.const 3) (i32.const 4)) (i32.const 5) (i32.add)"
                               " (i32.mul)", {0: 27}),
    "loop/break-value": ("(block (result i32) (i32.const 0) (loop (param i32) (block (br 2 (i32.const 18)))"
                         " (br 0 (i32.const 20))) (i32.const 19))", {0: 18}),
    "loop/param": ("(i32.const 1) (loop (param i32) (result i32) (i32.const 2) (i32.add))", {0: 3}),
    "loop/params": ("(i32.const 1) (i32.const 2) (loop (param i32 i32) (result i32) (i32.add))", {0: 3}),
    "loop/params-id": ("(i32.const 1) (i32.const 2) (loop (param i32 i32) (result i32 i32)) (i32.add)", {0: 3}),
    "loop/param-break": ("(i32.const 1) (loop (param i32) (result i32) (i32.const 4) (i32.add) (local.tee $x)"
                         " (local.get $x) (i32.const 10) (i32.lt_u) (br_if 0))", {0: 13}),
    "loop/params-break": ("(i32.const 1) (i32.const 2) (loop (param i32 i32) (result i32) (i32.add)"
                          " (local.tee $x) (i32.const 3) (local.get $x) (i32.const 10) (i32.lt_u) (br_if 0)"
                          " (drop))", {0: 12}),
    "loop/params-id-break": ("(local.set $x (i32.const 0)) (i32.const 1) (i32.const 2) (loop (param i32 i32)"
                             " (result i32 i32) (local.set $x (i32.add (local.get $x) (i32.const 1)))"
                             " (br_if 0 (i32.lt_u (local.get $x) (i32.const 10)))) (i32.add)", {0: 3}),
}


@pytest.mark.parametrize("name", list(SPEC))
def test_spec_functions_on_the_gpu(gpu, name):
    body, expected = SPEC[name]
    p = sorted(expected) + [v for v in INTS if v not in expected]
    _, got, _ = run_both(gpu, result(body), p=p)
    for i, arg in enumerate(sorted(expected)):
        assert int(got[2][i]) == expected[arg] & 0xFFFFFFFF, (name, arg)


def test_block_types_outside_the_number_types_stay_unsupported():
    source = kernel_module(INPUTS + " " + out(2, "(block (result i32 funcref) (i32.const 1) (ref.null func)) (drop)"),
                           LOCALS)
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(source, KERNEL)
    assert (e.value.kind, e.value.message) == (CompileErrorKind.UNSUPPORTED, "block type is unsupported")
