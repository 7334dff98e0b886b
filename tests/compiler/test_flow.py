"""The extended subset (control.py, instructions.py, access.py, ops.py): every new instruction
lowered, validated by wgpu (conftest) and run on the test adapter against the Wasm answer of the
same kernel (watkit.reference), traps, loop budget and gather range included; control-flow
shapes; plan flags; limits; and a differential property over random programs (flowgen)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import COPY_BODY, A, E, bufferwork_config, bufferwork_wasm
from flowgen import LOCALS, flow_inputs, flow_kernel, flow_programs
from wagogpu.compiler import CompileError, CompileErrorKind, KernelClass, compile_buffer_wgsl, inspect_module
from wagogpu.compiler import reader as lim
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.contract import KernelError
from wagogpu.compiler.decoder import decode_module
from wagogpu.compiler import float64, int64
from wagogpu.compiler.ops import NUMERIC, SATURATING
from wagogpu.config import BindingConfig, KernelConfig
from watkit import kernel_module, reference

UNSUPPORTED, LIMIT, INVALID = CompileErrorKind.UNSUPPORTED, CompileErrorKind.LIMIT, CompileErrorKind.INVALID_CONTRACT

# ---- running a kernel on the adapter and in wasmtime -----------------------------------------------
OPS_BINDINGS = [BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.READ), BindingConfig(2, E.F32, A.READ),
                BindingConfig(3, E.F32, A.READ), BindingConfig(4, E.I32, A.WRITE), BindingConfig(5, E.F32, A.WRITE)]
OPS = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", OPS_BINDINGS, relaxed_float=True)
FLOW = flow_kernel()


def rd(slot: int, t: str = "I32", element: str = "(local.get $i)") -> str:
    return f"(call $readBuffer{t} (call $getBuffer (i32.const {slot})) {element})"


def wr(slot: int, t: str, value: str) -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


def words(values, dtype) -> np.ndarray:
    """u32 words of f32 values (their bits) or of integers (two's complement)."""
    if dtype == np.float32:
        return np.asarray(values, dtype=np.float32).view(np.uint32)
    return (np.asarray(values, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


def run(gpu, body: str, inputs: dict[int, np.ndarray], kernel: KernelConfig = OPS, locals_: str = LOCALS,
        count: int | None = None):
    """Lower `body`, run it on the adapter and in wasmtime; (lowered, gpu outputs, error word, reference)."""
    source = kernel_module(body, locals_)
    lk = lower_kernel(decode_module(source), kernel)
    n = count if count is not None else len(next(iter(inputs.values())))
    slots = {b.slot: np.asarray(inputs.get(b.slot, np.zeros(n, np.uint32)), np.uint32) for b in kernel.bindings}
    used = [s for s in range(8) if (lk.reads | lk.writes) >> s & 1]
    out, err = gpu.run_kernel(lk.wgsl, n, {s: slots[s].copy() for s in used}, {s for s in used if lk.writes >> s & 1})
    return lk, out, err, reference(source, "k", n, slots)


def same_floats(a: np.ndarray, b: np.ndarray, ulps: int = 0) -> bool:
    """Equal f32 bit patterns, any NaN equal to any NaN, or at most `ulps` apart (same sign)."""
    fa, fb = a.view(np.float32), b.view(np.float32)
    nan = np.isnan(fa) & np.isnan(fb)
    distance = np.abs(a.astype(np.int64) - b.astype(np.int64))
    close = (distance <= ulps) & ((a >> 31) == (b >> 31))
    return bool(np.all(nan | (a == b) | close))


# ---- every numeric instruction ---------------------------------------------------------------------
INTS = [0, 1, -1, 2, 5, -7, 31, 32, 33, 0x7F, 0x80, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x12345678, -0x10000]
# No subnormal inputs, and no pair whose product or quotient is subnormal: GPUs may flush those to zero.
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -0.75, 1e20, -1e20, 1e-10, math.inf, -math.inf,
          math.nan, 2147483648.0, -2147483648.0, 2147483520.0, -2147483904.0, 4294967296.0, 4294967040.0, 1e10]

# WAT name of every NUMERIC / SATURATING row (and the rows are exactly these: one test per instruction).
NAMES = {
    0x45: "i32.eqz", 0x46: "i32.eq", 0x47: "i32.ne", 0x48: "i32.lt_s", 0x49: "i32.lt_u", 0x4A: "i32.gt_s",
    0x4B: "i32.gt_u", 0x4C: "i32.le_s", 0x4D: "i32.le_u", 0x4E: "i32.ge_s", 0x4F: "i32.ge_u", 0x5B: "f32.eq",
    0x5C: "f32.ne", 0x5D: "f32.lt", 0x5E: "f32.gt", 0x5F: "f32.le", 0x60: "f32.ge", 0x67: "i32.clz",
    0x68: "i32.ctz", 0x69: "i32.popcnt", 0x6A: "i32.add", 0x6B: "i32.sub", 0x6C: "i32.mul", 0x6D: "i32.div_s",
    0x6E: "i32.div_u", 0x6F: "i32.rem_s", 0x70: "i32.rem_u", 0x71: "i32.and", 0x72: "i32.or", 0x73: "i32.xor",
    0x74: "i32.shl", 0x75: "i32.shr_s", 0x76: "i32.shr_u", 0x77: "i32.rotl", 0x78: "i32.rotr", 0x8B: "f32.abs",
    0x8C: "f32.neg", 0x8D: "f32.ceil", 0x8E: "f32.floor", 0x8F: "f32.trunc", 0x90: "f32.nearest",
    0x91: "f32.sqrt", 0x92: "f32.add", 0x93: "f32.sub", 0x94: "f32.mul", 0x95: "f32.div", 0x96: "f32.min",
    0x97: "f32.max", 0x98: "f32.copysign", 0xA8: "i32.trunc_f32_s", 0xA9: "i32.trunc_f32_u",
    0xB2: "f32.convert_i32_s", 0xB3: "f32.convert_i32_u", 0xC0: "i32.extend8_s", 0xC1: "i32.extend16_s",
}
SAT_NAMES = {0x00: "i32.trunc_sat_f32_s", 0x01: "i32.trunc_sat_f32_u"}
# ulps the GPU may differ by (relaxed_float; Vulkan allows 2.5 ulp for division and more for sqrt)
ROUNDING = {"f32.sqrt": 4, "f32.div": 3, "f32.add": 0, "f32.sub": 0, "f32.mul": 0, "f32.convert_i32_s": 0,
            "f32.convert_i32_u": 0}


def test_every_numeric_row_is_tested():
    # (the i64 and f64 rows: tests/compiler/test_int64.py, test_float64.py)
    wide = set(int64.NUMERIC) | set(float64.NUMERIC)
    assert set(NAMES) == set(NUMERIC) - wide
    assert set(SAT_NAMES) == set(SATURATING) - set(int64.SATURATING) - set(float64.SATURATING)


def _traps(name: str, a, b) -> bool:
    if name in ("i32.div_u", "i32.rem_u", "i32.rem_s"):
        return b == 0
    if name == "i32.div_s":
        return b == 0 or (a == -0x80000000 and b == -1)
    if name == "i32.trunc_f32_s":
        return math.isnan(a) or not -2147483649.0 < a < 2147483648.0
    if name == "i32.trunc_f32_u":
        return math.isnan(a) or not -1.0 < a < 4294967296.0
    return False


ROWS = [(name, NUMERIC[op]) for op, name in NAMES.items()] + [(name, SATURATING[op]) for op, name in SAT_NAMES.items()]


@pytest.mark.parametrize("name, row", ROWS, ids=[name for name, _ in ROWS])
def test_instruction_on_device(gpu, name, row):
    """Each instruction over all (pairs of) interesting values: the GPU gives Wasm's answer."""
    f32 = 0x7D
    values = [FLOATS if t == f32 else INTS for t in row.params]
    pairs = [(a, b) for a in values[0] for b in values[-1]] if len(row.params) == 2 else [(a, a) for a in values[0]]
    ok_pairs = [(a, b) for a, b in pairs if not _traps(name, a, b)]
    bad_pairs = [(a, b) for a, b in pairs if _traps(name, a, b)]
    sources = {0x7F: (0, 1, "I32", np.int64), f32: (2, 3, "F32", np.float32)}
    s0, _, t0, _ = sources[row.params[0]]
    s1 = sources[row.params[-1]][1]
    args = rd(s0, t0) + (" " + rd(s1, sources[row.params[-1]][2]) if len(row.params) == 2 else "")
    wat = f"({name} {args})"
    out_slot, out_t = (4, "I32") if row.result == 0x7F else (5, "F32")
    body = wr(out_slot, out_t, wat)

    def inputs(chosen):
        a = [p[0] for p in chosen]
        b = [p[1] for p in chosen]
        return {s0: words(a, np.float32 if row.params[0] == f32 else np.int64),
                s1: words(b, np.float32 if row.params[-1] == f32 else np.int64)}

    lk, out, err, ref = run(gpu, body, inputs(ok_pairs))
    assert err == 0 and not ref.trapped
    assert lk.is_float  # F32 bindings are declared: float whatever the instruction
    assert lk.error_word == bool(row.trap)
    if out_t == "I32":
        assert (out[out_slot] == ref.slots[out_slot]).all(), name
    else:
        assert same_floats(out[out_slot], ref.slots[out_slot], ROUNDING.get(name, 0)), name
    if bad_pairs:
        for bad in (bad_pairs[:1], ok_pairs[:5] + bad_pairs + ok_pairs[5:9]):
            _, _, err, ref = run(gpu, body, inputs(bad))
            assert ref.trapped and err == KernelError.TRAP, name


def test_reinterpret_and_select_are_exact(gpu):
    patterns = words([0x7FC12345, 0xFFC00001, 0x80000000, 1, 0x807FFFFF, 0x7F800000, 0x3F800000, 0], np.uint32)
    body = (wr(4, "I32", f"(i32.reinterpret_f32 {rd(2, 'F32')})")
            + wr(5, "F32", f"(f32.reinterpret_i32 (i32.xor {rd(0)} (i32.const 1)))"))
    lk, out, err, ref = run(gpu, body, {2: patterns, 0: patterns})
    assert err == 0 and (out[4] == patterns).all() and (out[5] == (patterns ^ 1)).all()
    body = (wr(4, "I32", f"(select {rd(0)} (i32.const 7) {rd(1)})")
            + wr(5, "F32", f"(select (result f32) {rd(2, 'F32')} {rd(3, 'F32')} (i32.and {rd(1)} (i32.const 1)))"))
    cond = words([0, 1, 2, 3, 0, 5, 0, 7], np.uint32)
    _, out, err, ref = run(gpu, body, {0: patterns, 1: cond, 2: patterns, 3: patterns ^ 2})
    assert err == 0 and (out[4] == ref.slots[4]).all() and (out[5] == ref.slots[5]).all()


# ---- control flow ----------------------------------------------------------------------------------
def flow_run(gpu, body: str, count: int = 80, seed: int = 3, ints=None):
    rng = np.random.default_rng(seed)
    inputs = {0: words(ints if ints is not None else rng.integers(-40, 40, count), np.int64),
              1: words(rng.integers(-16, 16, count) / 4, np.float32),
              2: np.full(count, 0xDEADBEEF, np.uint32), 3: np.full(count, 0x3F800000, np.uint32),
              4: np.arange(count, dtype=np.uint32) & 0xFF}
    return run(gpu, body, inputs, FLOW, count=count)


def agree(lk, out, err, ref) -> None:
    assert (err != 0) == ref.trapped, (err, ref.trapped, lk.wgsl)
    if not ref.trapped:
        for slot, got in out.items():
            assert (got == ref.slots[slot]).all(), (slot, got[:12], ref.slots[slot][:12], lk.wgsl)


W2 = "(call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i) {})"
SUM_LOOP = ("(local.set $a (i32.const 0)) (local.set $b " + rd(0) + ")"
            " (block $done (loop $next (br_if $done (i32.le_s (local.get $b) (i32.const 0)))"
            " (local.set $a (i32.add (local.get $a) (local.get $b)))"
            " (local.set $b (i32.sub (local.get $b) (i32.const 1))) (br $next)))" + W2.format("(local.get $a)"))
NESTED_BREAKS = ("(block $o (loop $l (block $p (br_if $o (i32.gt_s (local.get $a) (i32.const 5)))"
                 " (br_if $p (i32.and (local.get $a) (i32.const 1)))"
                 " (local.set $b (i32.add (local.get $b) (local.get $a))))"
                 " (local.set $a (i32.add (local.get $a) (i32.const 1))) (br $l)))" + W2.format("(local.get $b)"))
CONTINUE_FROM_DEEP = ("(local.set $c " + rd(0) + ") (loop $l (block $x (block $y"
                      " (br_if $l (i32.ge_s (local.tee $c (i32.sub (local.get $c) (i32.const 3))) (i32.const 0)))"
                      " (br_if $x (i32.const 1)))) (local.set $a (i32.const 99)))" + W2.format("(local.get $c)"))
TABLE = ("(block $a (block $b (block $c (br_table $a $b $c $b (i32.and " + rd(0) + " (i32.const 3))))"
         + W2.format("(i32.const 11)") + " (return))" + W2.format("(i32.const 22)") + ")")
RESULTS = W2.format("(i32.add (block $r (result i32) (drop (br_if $r (i32.const 9) (i32.gt_s " + rd(0)
                    + " (i32.const 10)))) (i32.const 3)) (if (result i32) (i32.lt_s " + rd(0)
                    + " (i32.const 0)) (then (i32.const 100)) (else (i32.const 200))))")
LOOP_RESULT = W2.format("(loop $l (result i32) (local.set $a (i32.add (local.get $a) (i32.const 1)))"
                        " (br_if $l (i32.lt_u (local.get $a) (i32.const 4))) (i32.mul (local.get $a) (i32.const 3)))")
EARLY_RETURN = ("(if (i32.lt_s " + rd(0) + " (i32.const 0)) (then " + W2.format("(i32.const 1)") + " (return)))"
                + W2.format("(i32.const 2)"))
DEAD_CODE = ("(block $b (br $b) (drop (i32.div_s (i32.const 1) (i32.const 0))) " + W2.format("(i32.const 5)") + ")"
             + W2.format("(i32.const 6)") + " (return) (local.set $a (i32.const 3)) unreachable")
SPLIT_WRITE = ("(if " + rd(0) + " (then " + W2.format("(i32.const 1)") + ") (else nop))"
               " (drop (local.get $i))")
TABLE_VALUE = W2.format("(block $o (result i32) (block $p (result i32) (br_table $o $p $o (i32.const 40) "
                        "(i32.and " + rd(0) + " (i32.const 3)))) (i32.const 1) (i32.add))")


@pytest.mark.parametrize("body", [SUM_LOOP, NESTED_BREAKS, CONTINUE_FROM_DEEP, TABLE, RESULTS, LOOP_RESULT,
                                  EARLY_RETURN, DEAD_CODE, SPLIT_WRITE, TABLE_VALUE],
                         ids=["sum_loop", "nested_breaks", "continue_from_deep", "br_table", "block_results",
                              "loop_result", "early_return", "dead_code", "split_write", "br_table_value"])
def test_control_flow_shapes(gpu, body):
    agree(*flow_run(gpu, body))


def test_branches_crossing_wrappers_use_brk(gpu):
    lk = flow_run(gpu, NESTED_BREAKS)[0]
    assert "brk = 1u;" in lk.wgsl and "var brk: u32 = 0u;" in lk.wgsl
    lk = flow_run(gpu, CONTINUE_FROM_DEEP)[0]
    assert "continue;" in lk.wgsl and lk.loop_budget == lim.LOOP_BUDGET
    # a block nobody branches to is a plain brace block, not a WGSL loop
    lk = flow_run(gpu, "(block (local.set $a (i32.const 1))) " + W2.format("(local.get $a)"))[0]
    main = lk.wgsl[lk.wgsl.index("fn main"):]
    assert "loop" not in main and "brk" not in main and not lk.error_word and lk.loop_budget == 0


def test_traps_and_unreachable(gpu):
    for body in ("(if (i32.eq " + rd(0) + " (i32.const 7)) (then unreachable))",
                 W2.format("(i32.div_s (i32.const 5) (i32.sub " + rd(0) + " (i32.const 7)))"),
                 W2.format("(i32.rem_u (i32.const 5) (i32.sub " + rd(0) + " (i32.const 7)))"),
                 "(drop (i32.div_u (local.get $i) (i32.sub " + rd(0) + " (i32.const 7))))",  # dead value, still traps
                 W2.format("(i32.div_s (i32.const -2147483648) (i32.or " + rd(0) + " (i32.const -1)))"),
                 W2.format("(i32.trunc_f32_s (f32.mul " + rd(1, "F32") + " (f32.const 1e30)))")):
        lk, out, err, ref = flow_run(gpu, body, ints=[7 if i == 50 else 3 for i in range(80)])
        assert ref.trapped and err == KernelError.TRAP and lk.error_word, body
        _, _, err, ref = flow_run(gpu, body, ints=[3] * 80)
        if "1e30" not in body and "-2147483648" not in body:
            assert not ref.trapped and err == 0, body


def test_loop_budget(gpu, monkeypatch):
    monkeypatch.setattr(lim, "LOOP_BUDGET", 10)
    body = "(loop $l (br_if $l (i32.lt_u (local.tee $a (i32.add (local.get $a) (i32.const 1))) " + rd(0) + ")))" \
           + W2.format("(local.get $a)")
    lk, out, err, ref = flow_run(gpu, body, ints=[10] * 80)  # 10 passes through the loop head: within budget
    assert lk.loop_budget == 10 and "var fuel: u32 = params.pad0;" in lk.wgsl  # the runner passes 10
    agree(lk, out, err, ref)
    lk, out, err, ref = flow_run(gpu, body, ints=[10] * 79 + [11])  # one invocation needs 11
    assert err == KernelError.LOOP_BUDGET and not ref.trapped
    # the budget is per invocation over all loops together: 4 x 3 passes > 10
    nested = ("(local.set $a (i32.const 4)) (loop $o (local.set $b (i32.const 2)) (loop $in (br_if $in"
              " (local.tee $b (i32.sub (local.get $b) (i32.const 1))))) (br_if $o (local.tee $a (i32.sub"
              " (local.get $a) (i32.const 1)))))")
    _, _, err, _ = flow_run(gpu, nested)
    assert err == KernelError.LOOP_BUDGET
    monkeypatch.setattr(lim, "LOOP_BUDGET", 12)
    _, _, err, _ = flow_run(gpu, nested)
    assert err == 0


def test_gather_reads(gpu):
    n = 80
    within = W2.format(rd(0, element="(i32.rem_u (i32.add (local.get $i) (i32.const 17)) (i32.const 80))"))
    lk, out, err, ref = flow_run(gpu, within, count=n)
    assert lk.error_word and "arrayLength(&slot0)" in lk.wgsl and lk.read_before_write == 0
    agree(lk, out, err, ref)
    beyond = W2.format(rd(0, element="(i32.add (local.get $i) (i32.const 1))"))
    lk, out, err, ref = flow_run(gpu, beyond, count=n)
    assert ref.trapped and err == KernelError.INDEX_RANGE
    negative = W2.format(rd(4, "U8", element="(i32.sub (local.get $i) (i32.const 1))"))
    _, _, err, ref = flow_run(gpu, negative, count=n)
    assert ref.trapped and err == KernelError.INDEX_RANGE
    constant = W2.format(rd(0, element="(i32.const 5)"))  # a constant element is a gather too
    agree(*flow_run(gpu, constant, count=n))


def test_gather_from_a_written_slot_is_refused():
    source = kernel_module(W2.format(rd(4, "U8", element="(i32.const 0)")) + wr(4, "U8", "(i32.const 1)"), LOCALS)
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(source, FLOW)
    assert (e.value.kind, e.value.message) == (UNSUPPORTED, "gather read of a written slot")


# ---- plan facts ------------------------------------------------------------------------------------
def plan(body: str, kernel: KernelConfig = FLOW, locals_: str = LOCALS):
    return inspect_module(kernel_module(body, locals_), [kernel]).kernels[kernel.id]


def test_write_flags_follow_control_flow():
    unconditional = plan(W2.format("(i32.add (local.get $i) (i32.const 1))"))
    assert unconditional.cls is KernelClass.ELIGIBLE and unconditional.read_before_write == frozenset()
    assert not unconditional.error_word and unconditional.loop_budget == 0
    conditional = plan("(if " + rd(0) + " (then " + W2.format("(i32.const 1)") + "))")
    assert conditional.write_slots == {2} and conditional.read_before_write == {2}
    first = plan(W2.format("(i32.const 0)") + " (if " + rd(0) + " (then " + W2.format("(i32.const 1)") + "))")
    assert first.read_before_write == frozenset()  # every element was written before the branch
    after_return = plan("(if " + rd(0) + " (then (return))) " + W2.format("(i32.const 1)"))
    assert after_return.read_before_write == {2}
    # written on every path that leaves the kernel: the branches agree, a trap or a loop back edge
    # is no exit, and a return after the write is fine
    both = plan("(if " + rd(0) + " (then " + W2.format("(i32.const 1)") + ") (else " + W2.format("(i32.const 2)") + "))")
    assert both.read_before_write == frozenset()
    trap_path = plan("(if " + rd(0) + " (then unreachable)) " + W2.format("(i32.const 1)"))
    assert trap_path.read_before_write == frozenset() and trap_path.error_word
    in_loop = plan("(loop $l " + W2.format("(i32.const 1)") + " (br_if $l (i32.const 0)))")
    assert in_loop.read_before_write == frozenset() and in_loop.error_word and in_loop.loop_budget == lim.LOOP_BUDGET
    write_then_return = plan("(block $b (loop $l (br_if $b " + rd(0) + ") " + W2.format("(i32.const 1)")
                             + " (return))) " + W2.format("(i32.const 2)"))
    assert write_then_return.read_before_write == frozenset()
    branch_skips = plan("(block $b (br_if $b " + rd(0) + ") " + W2.format("(i32.const 1)") + ")")
    assert branch_skips.read_before_write == {2}
    table_skips = plan("(block $a (block $b (br_table $a $b " + rd(0) + ") ) " + W2.format("(i32.const 1)") + ")")
    assert table_skips.read_before_write == {2}


def test_integer_control_flow_needs_no_float_consent():
    kernel = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                          [BindingConfig(0, E.I32, A.READ), BindingConfig(2, E.I32, A.WRITE)])
    ints = "(local $a i32) (local $b i32)"
    p = plan(SUM_LOOP, kernel, ints)
    assert p.cls is KernelClass.ELIGIBLE and not p.is_float and p.error_word
    p = plan(W2.format("(i32.trunc_sat_f32_s (f32.const 2.5))"), kernel, ints)
    assert p.is_float


def test_reference_kernels_keep_their_exact_wgsl():
    """Bodies inside the reference subset never reach the extended lowering."""
    for name in ("twice", "square", "copy", "polynomial"):
        wgsl = compile_buffer_wgsl(bufferwork_wasm(), bufferwork_config(name))
        assert "err" not in wgsl and "var " not in wgsl.split("fn main")[1]
    from fixtures import compile_ok
    assert compile_ok(COPY_BODY).endswith("  let v0: u32 = slot0[index];\n  slot1[index] = v0;\n}\n")


def test_locals_keep_index_and_handles_across_loops():
    # the handle and the index are set before the loop and only read inside it: still exact
    body = ("(local.set $b (call $getBuffer (i32.const 2))) (local.set $c (local.get $i))"
            " (loop $l (br_if $l (i32.lt_u (local.tee $a (i32.add (local.get $a) (i32.const 1))) (i32.const 3))))"
            " (call $writeBufferI32 (local.get $b) (local.get $c) (local.get $a))")
    assert plan(body).cls is KernelClass.ELIGIBLE
    # a handle assigned inside control flow cannot live in a var: a use after the join is refused
    assigned = "(if (i32.const 1) (then (local.set $b (call $getBuffer (i32.const 2)))))"
    p = plan(assigned + " (call $writeBufferI32 (local.get $b) (local.get $i) (i32.const 1))")
    assert (p.cls, p.reason) == (KernelClass.REJECTED, "buffer handle in a local that control flow assigns")
    # ... while one never used after it changes nothing the GPU computes
    assert plan(assigned).cls is KernelClass.ELIGIBLE
    # the index assigned inside control flow is no longer the index: writes with it are refused
    body = "(if (i32.const 1) (then (local.set $c (local.get $i)))) " + \
           "(call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $c) (i32.const 1))"
    assert plan(body).reason == "element must be the original invocation index"


# ---- malformed and limits --------------------------------------------------------------------------
@pytest.mark.parametrize("body, kind, message", [
    ("(block (result i32) (i32.const 1) (i32.const 2))", INVALID, "operand stack mismatch at block end"),
    ("(block (result f32) (i32.const 1))", INVALID, "operand type mismatch"),
    ("(block (result i32) (br 0))", INVALID, "operand stack underflow"),
    ("(drop (select (i32.const 1) (f32.const 2) (i32.const 0)))", INVALID, "operand type mismatch"),
    ("(drop (i32.add (local.get $i) (call $getBuffer (i32.const 0))))", UNSUPPORTED, "buffer handle used as a value"),
    ("(drop (select (call $getBuffer (i32.const 0)) (call $getBuffer (i32.const 2)) (local.get $i)))", UNSUPPORTED,
     "select of a buffer handle"),
])
def test_extended_rejections(body, kind, message):
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(kernel_module(body, LOCALS), FLOW)
    assert (e.value.kind, e.value.message) == (kind, message)


def test_raw_rejections():
    from fixtures import compile_err
    from wasmgen import END, lget

    cases = [(b"\x0c\x05", INVALID, "branch depth out of range"), (b"\x05", INVALID, "else without if"),
             (b"\x02\x7b" + END, UNSUPPORTED, "block type is unsupported"),  # v128
             (b"\x02\x09" + END, INVALID, "block type index out of range"),
             (b"\x41\x01\x04\x7f\x41\x01\x0b\x1a", INVALID, "if without else cannot produce a value"),
             (lget(0) + b"\x1c\x02\x7f\x7f", UNSUPPORTED, "select type is unsupported"),
             (b"\x02\x40" * 49 + END * 49, LIMIT, "control nesting limit")]
    for body, kind, message in cases:
        err = compile_err(body)
        assert (err.kind, err.message) == (kind, message), body
    from fixtures import compile_ok
    assert compile_ok(b"\x02\x40" * 48 + END * 48)  # 48 open: allowed


def test_br_table_case_limit(monkeypatch):
    # entries that go where the default goes need no case: 1,000 others are allowed, 1,001 are not
    body = "(block $a (block $b (br_table " + " ".join(["$a", "$b"] * 1000) + " $b (local.get $i))))"
    wgsl = compile_buffer_wgsl(kernel_module(body, LOCALS), FLOW)
    assert wgsl.count("u, ") == 999
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(kernel_module(body.replace("(br_table", "(br_table $a"), LOCALS), FLOW)
    assert (e.value.kind, e.value.message) == (LIMIT, "br_table case limit")


def test_constant_operands_never_form_const_expressions():
    # WGSL rejects an overflowing constant shift; the lowering copies a constant into a let first
    wgsl = compile_buffer_wgsl(kernel_module(W2.format("(i32.shl (i32.const -1) (i32.const 40))"), LOCALS), FLOW)
    assert "let v0: u32 = 0xffffffffu;" in wgsl and "v0 << (0x00000028u & 31u)" in wgsl


def test_mandelbrot_loop_kernel_lowers():
    from pathlib import Path

    from examples.mandelbrot.__main__ import MANDEL

    source = (Path(__file__).resolve().parents[2] / "examples" / "guests" / "mandelbrot.wasm").read_bytes()
    p = inspect_module(source, [MANDEL]).kernels[2]
    assert p.cls is KernelClass.ELIGIBLE and p.is_float and p.error_word
    # the parameters are read at fixed elements (gathers); the counts, written on every way out of the
    # loop, need no seed
    assert (p.read_slots, p.write_slots, p.read_before_write) == ({0}, {1}, frozenset())
    assert p.wgsl.count("arrayLength(&slot0)") == 3
    assert p.loop_budget == lim.LOOP_BUDGET and p.wgsl.count("loop {") == 3


# ---- differential: random programs -----------------------------------------------------------------
@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_programs_match_wasm(gpu, data):
    program = data.draw(flow_programs())
    count = data.draw(st.sampled_from([64, 80, 300]))
    inputs = {s: np.array(w, np.uint32) for s, w in flow_inputs(data.draw, count).items()}
    lk, out, err, ref = run(gpu, program.body, inputs, FLOW, count=count)
    assert (err != 0) == ref.trapped, (err, program.body)
    assert err != KernelError.LOOP_BUDGET
    if ref.trapped:
        return
    for slot, got in out.items():
        if slot == 3:
            ok = _close_floats(got, ref.slots[3])
        else:
            ok = bool((got == ref.slots[slot]).all())
        assert ok, (slot, program.body, got[:8], ref.slots[slot][:8])


def _close_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """Relaxed-float agreement (docs/design/abi.md §5.5): close where Wasm's result is finite. Where it is NaN or
    infinite the GPU may differ (WGSL lets implementations assume no non-finite values, so lavapipe
    folds inf - inf to 0); only the exact paths promise those bits."""
    fa, fb = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    nonfinite_ref = ~np.isfinite(fb)
    with np.errstate(invalid="ignore"):
        close = np.isclose(fa, fb, rtol=1e-4, atol=1e-3) | (fa == fb)
    return bool(np.all(nonfinite_ref | close))


def test_close_floats_follows_the_relaxed_contract():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    ref = np.array([1.0, inf, nan, -inf], np.float32).view(np.uint32)
    assert _close_floats(np.array([1.00001, 0.0, 0.0, 5.0], np.float32).view(np.uint32), ref)
    assert not _close_floats(np.array([1.1, inf, nan, -inf], np.float32).view(np.uint32), ref)
    assert not _close_floats(np.array([inf, inf, nan, -inf], np.float32).view(np.uint32), ref)


def test_flow_programs_compile_to_valid_wgsl():
    """The generator stays inside the subset (the conftest validates every shader with wgpu)."""
    @settings(max_examples=60, deadline=None)
    @given(flow_programs())
    def check(program):
        wgsl = compile_buffer_wgsl(kernel_module(program.body, program.locals), FLOW)
        assert len(wgsl) <= lim.MAX_WGSL_BYTES

    check()
