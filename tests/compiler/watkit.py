"""Kernels written as WAT for the extended-subset tests, and a reference runner for them.

`kernel_module(body, locals_)` builds a guest whose kernel `wago_gpu.kernel.<name>` is `body`
(folded WAT; the index is `$i`, buffer intrinsics are `$getBuffer`, `$readBufferF32`, ...) and whose
CPU runner calls the kernel for every index. `reference(...)` runs that kernel in wasmtime over
numpy words, one element after the other as the CPU runner would: the Wasm answer, traps
included, to compare the GPU with.

No wagogpu imports beyond the ABI table, so tests outside tests/compiler can use it too.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import wasmtime

from wagogpu.abi.table import ABI_MODULE, IMPORTS

HANDLE_BASE = 100  # getBuffer(slot) returns slot + HANDLE_BASE in the reference runner


def import_decls() -> str:
    lines = []
    for spec in IMPORTS:
        if "anyref" in spec.params:
            continue  # the GC transfers: never callable from a kernel, and wasmtime-py cannot define them
        params = " ".join(spec.params)
        results = " ".join(spec.results)
        lines.append(f'  (import "{ABI_MODULE}" "{spec.name}" (func ${spec.name} (param {params})'
                     + (f" (result {results})" if results else "") + "))")
    return "\n".join(lines)


def kernel_wat(body: str, locals_: str = "", name: str = "k") -> str:
    return f"""(module
{import_decls()}
  (memory (export "memory") 1)
  (func $kernel (export "wago_gpu.kernel.{name}") (param $i i32) {locals_}
{body})
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $j i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
      (call $kernel (local.get $j))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $next)))))
"""


def kernel_module(body: str, locals_: str = "", name: str = "k") -> bytes:
    return bytes(wasmtime.wat2wasm(kernel_wat(body, locals_, name)))


def _signed(word: int) -> int:
    return word - (1 << 32) if word >= 1 << 31 else word


def _from_word(tname: str, word: int):
    word &= 0xFFFFFFFF
    if tname == "F32":
        return struct.unpack("<f", struct.pack("<I", word))[0]
    if tname == "I8":
        return (word & 0xFF) - ((word & 0x80) << 1)
    if tname == "U8":
        return word & 0xFF
    if tname == "I16":
        return (word & 0xFFFF) - ((word & 0x8000) << 1)
    if tname == "U16":
        return word & 0xFFFF
    return _signed(word)


def _to_word(tname: str, value) -> int:
    if tname == "F32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    mask = {"I8": 0xFF, "U8": 0xFF, "I16": 0xFFFF, "U16": 0xFFFF}.get(tname, 0xFFFFFFFF)
    return value & mask


@dataclass
class RefResult:
    slots: dict[int, np.ndarray]  # every slot's words after the run (as far as it got)
    trapped: bool
    trap_index: int  # the element whose kernel trapped (-1: none)


class _Trap(Exception):
    pass


def reference(source: bytes, name: str, count: int, slots: dict[int, np.ndarray]) -> RefResult:
    """Run kernel `name` for indices 0..count-1 in wasmtime; buffers are u32 words per slot."""
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module(engine, source)
    words = {s: np.array(w, dtype=np.uint32) for s, w in slots.items()}
    linker = wasmtime.Linker(engine)

    def buffer(handle: int) -> np.ndarray:
        buf = words.get(handle - HANDLE_BASE)
        if buf is None:
            raise _Trap("no buffer")
        return buf

    def get(slot: int) -> int:
        return slot + HANDLE_BASE

    def reader(tname: str):
        def read(handle: int, index: int):
            buf = buffer(handle)
            if not 0 <= index < len(buf):
                raise _Trap("read out of range")
            return _from_word(tname, int(buf[index]))
        return read

    def writer(tname: str):
        def write(handle: int, index: int, value) -> None:
            buf = buffer(handle)
            if not 0 <= index < len(buf):
                raise _Trap("write out of range")
            buf[index] = _to_word(tname, value)
        return write

    vt = {"i32": wasmtime.ValType.i32(), "i64": wasmtime.ValType.i64(), "f32": wasmtime.ValType.f32(),
          "f64": wasmtime.ValType.f64()}
    for spec in IMPORTS:
        if "anyref" in spec.params:
            continue
        ftype = wasmtime.FuncType([vt[p] for p in spec.params], [vt[r] for r in spec.results])
        if spec.name == "getBuffer":
            fn = get
        elif spec.name.startswith("readBuffer"):
            fn = reader(spec.name[len("readBuffer"):])
        elif spec.name.startswith("writeBuffer"):
            fn = writer(spec.name[len("writeBuffer"):])
        else:
            def fn(*_args, _name=spec.name):
                raise _Trap(f"{_name} is not available to a kernel")
        linker.define_func(ABI_MODULE, spec.name, ftype, fn)
    instance = linker.instantiate(store, module)
    kernel = instance.exports(store)[f"wago_gpu.kernel.{name}"]
    for i in range(count):
        try:
            kernel(store, i)
        except Exception:  # a Wasm trap or a trap raised by an import
            return RefResult(words, True, i)
    return RefResult(words, False, -1)
