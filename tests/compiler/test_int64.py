"""i64 in 32-bit words (int64.py): every i64 row lowered, validated by wgpu and run on the test adapter
against wasmtime's answer for the same instruction, over edge values and random operands, bit for bit;
traps where Wasm traps; i64 locals, block values, select and I64/U64 buffers of two words per element."""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import A, E
from rowkit import F32, I32, I64, run_gpu, wasm_answers
from wagogpu.compiler import int64
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.contract import KernelError
from wagogpu.compiler.decoder import decode_module
from wagogpu.config import BindingConfig, KernelConfig
from watkit import kernel_module

NAMES = {
    0x50: "i64.eqz", 0x51: "i64.eq", 0x52: "i64.ne", 0x53: "i64.lt_s", 0x54: "i64.lt_u", 0x55: "i64.gt_s",
    0x56: "i64.gt_u", 0x57: "i64.le_s", 0x58: "i64.le_u", 0x59: "i64.ge_s", 0x5A: "i64.ge_u", 0x79: "i64.clz",
    0x7A: "i64.ctz", 0x7B: "i64.popcnt", 0x7C: "i64.add", 0x7D: "i64.sub", 0x7E: "i64.mul", 0x7F: "i64.div_s",
    0x80: "i64.div_u", 0x81: "i64.rem_s", 0x82: "i64.rem_u", 0x83: "i64.and", 0x84: "i64.or", 0x85: "i64.xor",
    0x86: "i64.shl", 0x87: "i64.shr_s", 0x88: "i64.shr_u", 0x89: "i64.rotl", 0x8A: "i64.rotr",
    0xA7: "i32.wrap_i64", 0xAC: "i64.extend_i32_s", 0xAD: "i64.extend_i32_u", 0xAE: "i64.trunc_f32_s",
    0xAF: "i64.trunc_f32_u", 0xB4: "f32.convert_i64_s", 0xB5: "f32.convert_i64_u", 0xC2: "i64.extend8_s",
    0xC3: "i64.extend16_s", 0xC4: "i64.extend32_s",
}
SAT_NAMES = {0x04: "i64.trunc_sat_f32_s", 0x05: "i64.trunc_sat_f32_u"}
MASK64 = (1 << 64) - 1

EDGES64 = [0, 1, -1, 2, 3, 5, -7, 31, 32, 33, 63, 64, 65, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000,
           0xFFFFFFFF, 0x100000000, 0x1FFFFFFFF, -0x80000000, -0x80000001, 0x123456789ABCDEF0, 0x00FF00FF00FF00FF,
           1 << 53, (1 << 53) + 1, (1 << 24) + 1, 0x7FFFFF8000000000, -0x8000000000000000, 0x7FFFFFFFFFFFFFFF]
EDGES32 = [0, 1, -1, 2, 0x7F, 0x80, 0xFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x12345678, -0x10000]
# f32 bit patterns around every truncation bound (2^63, 2^64, -1, -2^63), NaNs, infinities, subnormals
EDGES_F32 = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F000000, 0xBF7FFFFF, 0x5EFFFFFF, 0x5F000000,
             0x5F7FFFFF, 0x5F800000, 0xDEFFFFFF, 0xDF000000, 0xDF000001, 0x4F000000, 0x4B000001, 0x7F800000,
             0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x00000001, 0x807FFFFF, 0x40490FDB, 0xC2F6E979]


def _random(rng: np.random.Generator, wtype: int, n: int) -> list[int]:
    """Operands as unsigned bit patterns: mixed widths, so small and huge values both occur."""
    if wtype == F32:
        return [int(v) for v in rng.integers(0, 1 << 32, n, dtype=np.uint64)]
    bits = 64 if wtype == I64 else 32
    raw = rng.integers(0, 1 << 63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    shifts = rng.integers(0, bits, n, dtype=np.uint64)
    return [int(v) >> int(s) & ((1 << bits) - 1) for v, s in zip(raw, shifts)]


def _operands(row, seed: int) -> list[tuple[int, ...]]:
    edges = {I64: [v & MASK64 for v in EDGES64], I32: [v & 0xFFFFFFFF for v in EDGES32], F32: EDGES_F32}
    rng = np.random.default_rng(seed)
    if len(row.params) == 1:
        values = edges[row.params[0]] + _random(rng, row.params[0], 400)
        return [(v,) for v in values]
    a, b = row.params
    pairs = [(x, y) for x in edges[a] for y in edges[b]]
    return pairs + list(zip(_random(rng, a, 1500), _random(rng, b, 1500)))


ROWS = [(name, int64.NUMERIC[op]) for op, name in NAMES.items()] + [
    (name, int64.SATURATING[op]) for op, name in SAT_NAMES.items()]


def test_every_i64_row_is_tested():
    assert set(NAMES) == set(int64.NUMERIC) and set(SAT_NAMES) == set(int64.SATURATING)


@pytest.mark.parametrize("name, row", ROWS, ids=[name for name, _ in ROWS])
def test_i64_instruction_on_device(gpu, name, row):
    """Edge values (every pair) and random operands: the GPU gives Wasm's bits; a trap raises the error word."""
    operands = _operands(row, seed=len(name))
    want, traps = wasm_answers(name, row, operands)
    ok = [ops for ops, t in zip(operands, traps) if not t]
    lk, got, err = run_gpu(gpu, name, row, ok)
    assert err == 0
    wrong = [(ops, g, w) for ops, g, w in zip(ok, got, [w for w, t in zip(want, traps) if not t]) if g != w]
    assert not wrong, (name, len(wrong), [tuple(map(hex, ops)) + (hex(g), hex(w)) for ops, g, w in wrong[:5]])
    assert lk.error_word == bool(row.trap)
    bad = [ops for ops, t in zip(operands, traps) if t]
    if bad:
        for batch in (bad[:1], ok[:5] + bad + ok[5:9]):
            _, _, err = run_gpu(gpu, name, row, batch)
            assert err == KernelError.TRAP, name


# ---- i64 through locals, control flow and select (I32 buffers, so watkit's reference applies) --------
from watkit import reference  # noqa: E402

FLOW64 = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                      [BindingConfig(0, E.I32, A.READ), BindingConfig(1, E.I32, A.READ),
                       BindingConfig(2, E.I32, A.WRITE), BindingConfig(3, E.I32, A.WRITE)])
X = "(i64.extend_i32_s (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i)))"
Y = "(i64.extend_i32_u (call $readBufferI32 (call $getBuffer (i32.const 1)) (local.get $i)))"


def out64(value: str) -> str:
    """Both halves of an i64 value to slots 2 (low) and 3 (high)."""
    return (f"(local.set $r {value})"
            "(call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i) (i32.wrap_i64 (local.get $r)))"
            "(call $writeBufferI32 (call $getBuffer (i32.const 3)) (local.get $i)"
            " (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))")


FLOW_BODIES = {
    # a loop carrying an i64 in a local: the 64-bit power x^(y mod 23), wrapping
    "power_loop": out64(f"(local.set $a (i64.const 1)) (local.set $b (i64.rem_u {Y} (i64.const 23)))"
                        " (block $done (loop $next (br_if $done (i64.eqz (local.get $b)))"
                        f" (local.set $a (i64.mul (local.get $a) {X}))"
                        " (local.set $b (i64.sub (local.get $b) (i64.const 1))) (br $next)))"
                        " (local.get $a)"),
    # block and if results of type i64, select of i64
    "results": out64(f"(i64.add (block $r (result i64) (drop (br_if $r (i64.const 9) (i64.gt_s {X} (i64.const 10))))"
                     f" (i64.shl {X} (i64.const 40))) (if (result i64) (i64.lt_s {X} (i64.const 0))"
                     f" (then (select {X} {Y} (i32.wrap_i64 {Y}))) (else (i64.rotl {Y} {X}))))"),
    # a loop with an i64 parameter and result (multi-value block type), counting set bits one by one
    "loop_param": out64(f"{X} (loop $l (param i64) (result i64) (local.set $r)"
                        " (local.set $a (i64.add (local.get $a) (i64.const 1)))"
                        " (local.tee $r (i64.and (local.get $r) (i64.sub (local.get $r) (i64.const 1))))"
                        " (br_if $l (i64.ne (local.get $r) (i64.const 0)))) (drop) (local.get $a)"),
    # br_table carrying an i64 to one of three blocks
    "table": out64(f"(block $a (result i64) (block $b (result i64) (block $c (result i64)"
                   f" (br_table $a $b $c (i64.mul {X} {Y}) (i32.and (i32.wrap_i64 {Y}) (i32.const 3))))"
                   " (i64.const 7) (i64.add)) (i64.const 0x100000000) (i64.xor))"),
}


@pytest.mark.parametrize("name", list(FLOW_BODIES))
def test_i64_values_through_control_flow(gpu, name):
    source = kernel_module(FLOW_BODIES[name], "(local $a i64) (local $b i64) (local $r i64)")
    lk = lower_kernel(decode_module(source), FLOW64)
    rng = np.random.default_rng(5)
    n = 300
    x = np.concatenate([np.array([0, 1, -1, 11, -0x80000000, 0x7FFFFFFF], np.int64),
                        rng.integers(-0x80000000, 0x80000000, n - 6)])
    y = np.concatenate([np.array([0, 5, 63, 64, 0xFFFFFFFF, 3], np.int64), rng.integers(0, 1 << 32, n - 6)])
    slots = {0: (x & 0xFFFFFFFF).astype(np.uint32), 1: y.astype(np.uint32),
             2: np.zeros(n, np.uint32), 3: np.zeros(n, np.uint32)}
    used = [s for s in slots if (lk.reads | lk.writes) >> s & 1]
    out, err = gpu.run_kernel(lk.wgsl, n, {s: slots[s].copy() for s in used}, {2, 3})
    ref = reference(source, "k", n, slots)
    assert err == 0 and not ref.trapped
    assert (out[2] == ref.slots[2]).all() and (out[3] == ref.slots[3]).all(), name
    assert "vec2<u32>" in lk.wgsl
