"""One numeric row on the test adapter against wasmtime's answer for the same instruction.

Operands and results are unsigned bit patterns (floats as their bits, so NaN payloads survive the
trip through Python). The GPU kernel reads its operands from slots 0 and 1 (the row's operand type)
and writes slot 2 (the result type); 64-bit types are two words per element there.
"""
from __future__ import annotations

import numpy as np
import wasmtime

from fixtures import A, E
from wagogpu.compiler.buffer import LoweredKernel, lower_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.config import BindingConfig, KernelConfig
from watkit import kernel_module

I32, I64, F32, F64 = 0x7F, 0x7E, 0x7D, 0x7C
WAT_TYPE = {I32: "i32", I64: "i64", F32: "f32", F64: "f64"}
BITS_TYPE = {I32: "i32", I64: "i64", F32: "i32", F64: "i64"}  # a float's bits travel as this integer type
TYPE_NAME = {I32: "I32", I64: "I64", F32: "F32", F64: "F64"}
WIDE = {I64, F64}


def width(wtype: int) -> int:
    return 64 if wtype in WIDE else 32


def reference(name: str, row):
    """`name` in wasmtime over bit-pattern parameters, returning bits (or raising wasmtime.Trap)."""
    params = " ".join(BITS_TYPE[t] for t in row.params)
    args = " ".join(f"({WAT_TYPE[t]}.reinterpret_{BITS_TYPE[t]} (local.get {i}))" if t in (F32, F64)
                    else f"(local.get {i})" for i, t in enumerate(row.params))
    body = f"({name} {args})"
    if row.result in (F32, F64):
        body = f"({BITS_TYPE[row.result]}.reinterpret_{WAT_TYPE[row.result]} {body})"
    wat = f'(module (func (export "f") (param {params}) (result {BITS_TYPE[row.result]}) {body}))'
    store = wasmtime.Store()
    func = wasmtime.Instance(store, wasmtime.Module(store.engine, wat), []).exports(store)["f"]
    return lambda *xs: func(store, *xs)


def _signed(value: int, wtype: int) -> int:
    bits = width(wtype)
    return value - (1 << bits) if value >> (bits - 1) else value


def wasm_answers(name: str, row, operands) -> tuple[list[int], list[bool]]:
    """Wasm's result bits per operand tuple (0 where it traps) and whether it trapped."""
    f = reference(name, row)
    mask = (1 << width(row.result)) - 1
    results, traps = [], []
    for ops in operands:
        try:
            results.append(f(*(_signed(v, t) for v, t in zip(ops, row.params))) & mask)
            traps.append(False)
        except wasmtime.Trap:
            results.append(0)
            traps.append(True)
    return results, traps


def kernel_of(name: str, row, strict: bool = False) -> tuple[bytes, KernelConfig]:
    """A kernel slot2[i] = name(slot0[i], slot1[i]) (every row's operands share one type)."""
    assert len(set(row.params)) == 1
    t, out = TYPE_NAME[row.params[0]], TYPE_NAME[row.result]
    args = " ".join(f"(call $readBuffer{t} (call $getBuffer (i32.const {s})) (local.get $i))"
                    for s in range(len(row.params)))
    body = f"(call $writeBuffer{out} (call $getBuffer (i32.const 2)) (local.get $i) ({name} {args}))"
    binds = [BindingConfig(s, E[t], A.READ) for s in range(len(row.params))] + [BindingConfig(2, E[out], A.WRITE)]
    return kernel_module(body), KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", binds, relaxed_float=True,
                                             strict_float=strict)


def to_words(values: list[int], wtype: int) -> np.ndarray:
    if wtype in WIDE:
        return np.asarray(values, dtype=np.uint64).view(np.uint32)
    return np.asarray(values, dtype=np.uint32)


def run_gpu(gpu, name: str, row, operands) -> tuple[LoweredKernel, list[int], int]:
    """(lowered kernel, result bits per operand tuple, error word) of the row on the adapter."""
    source, kernel = kernel_of(name, row)
    lk = lower_kernel(decode_module(source), kernel)
    slots = {s: to_words([ops[s] for ops in operands], t) for s, t in enumerate(row.params)}
    slots[2] = np.zeros(len(operands) * width(row.result) // 32, np.uint32)
    outputs, err = gpu.run_kernel(lk.wgsl, len(operands), slots, {2})
    got = outputs[2]
    return lk, (got.view(np.uint64) if row.result in WIDE else got).tolist(), err
