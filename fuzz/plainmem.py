"""The third way to run a kernel: plain wasmtime, no wagogpu at all.

The guest's own kernel function is called once per element from Python, as its CPU runner would,
with `wago_gpu_v1` provided by a small Wasm module written here (ACCESSOR_WAT) that keeps each
slot's elements in stored format in its own linear memory. Its checks follow docs/design/abi.md §2.5 and
§2.13-2.14 (getBuffer: slot >= 8 or empty traps 5; read/write: bad handle 2, wrong type 4, index
out of range 3), its F16 conversions are §5.3's, written again in Wasm, and a failing check calls
the Python import `fuzz.trap`, which raises the same trap message wagogpu uses. Imports a kernel
may not call (create, bind, dispatch, the transfers) are `unreachable`.

Layout of the accessor memory: types at 0 (8 i32, 0 = empty slot), lengths at 32, slot s's
elements at DATA + s * SLOT_BYTES. getBuffer(s) returns the handle s + 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import wasmtime

from abitable import ABI_MODULE, ELEMENTS, IMPORTS, SLOTS, scalar_trap, trap_text

DATA = 64
SLOT_BYTES = 8192
PAGES = (DATA + SLOTS * SLOT_BYTES + 65535) // 65536

# per element name: (load instruction, store instruction, log2 of stored bytes, value type)
ACCESS = {"I8": ("i32.load8_s", "i32.store8", 0), "U8": ("i32.load8_u", "i32.store8", 0),
          "I16": ("i32.load16_s", "i32.store16", 1), "U16": ("i32.load16_u", "i32.store16", 1),
          "I32": ("i32.load", "i32.store", 2), "U32": ("i32.load", "i32.store", 2),
          "F16": ("i32.load16_u", "i32.store16", 1), "F32": ("f32.load", "f32.store", 2),
          "I64": ("i64.load", "i64.store", 3), "U64": ("i64.load", "i64.store", 3),
          "F64": ("f64.load", "f64.store", 3)}

HALF_WAT = """
  (func $h2f (param $h i32) (result f32) (local $s i32) (local $e i32) (local $m i32) (local $x i32)
    (local.set $s (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16)))
    (local.set $e (i32.and (i32.shr_u (local.get $h) (i32.const 10)) (i32.const 31)))
    (local.set $m (i32.and (local.get $h) (i32.const 0x3FF)))
    (block $done
      (if (i32.eq (local.get $e) (i32.const 31)) (then
        (local.set $x (select (i32.const 0x7FC00000) (i32.or (local.get $s) (i32.const 0x7F800000))
                              (local.get $m))) (br $done)))
      (if (i32.eqz (local.get $e)) (then
        (if (i32.eqz (local.get $m)) (then (local.set $x (local.get $s)) (br $done)))
        (local.set $e (i32.const 113))
        (block $norm (loop $shift
          (br_if $norm (i32.and (local.get $m) (i32.const 0x400)))
          (local.set $m (i32.shl (local.get $m) (i32.const 1)))
          (local.set $e (i32.sub (local.get $e) (i32.const 1)))
          (br $shift)))
        (local.set $x (i32.or (i32.or (local.get $s) (i32.shl (local.get $e) (i32.const 23)))
                              (i32.shl (i32.and (local.get $m) (i32.const 0x3FF)) (i32.const 13))))
        (br $done)))
      (local.set $x (i32.or (i32.or (local.get $s) (i32.shl (i32.add (local.get $e) (i32.const 112)) (i32.const 23)))
                            (i32.shl (local.get $m) (i32.const 13)))))
    (f32.reinterpret_i32 (local.get $x)))
  ;; f32 -> binary16 bits, nearest-even, from a guard bit and a sticky flag (the rule of §5.3)
  (func $f2h (param $f f32) (result i32) (local $x i32) (local $sign i32) (local $exp i32) (local $frac i32)
    (local $drop i32) (local $kept i32) (local $guard i32) (local $sticky i32)
    (local.set $x (i32.reinterpret_f32 (local.get $f)))
    (local.set $sign (i32.and (i32.shr_u (local.get $x) (i32.const 16)) (i32.const 0x8000)))
    (local.set $exp (i32.sub (i32.and (i32.shr_u (local.get $x) (i32.const 23)) (i32.const 0xFF)) (i32.const 112)))
    (local.set $frac (i32.and (local.get $x) (i32.const 0x7FFFFF)))
    (if (i32.eq (local.get $exp) (i32.const 143))  ;; infinity or NaN
      (then (return (if (result i32) (local.get $frac) (then (i32.const 0x7E00))
                                     (else (i32.or (local.get $sign) (i32.const 0x7C00)))))))
    (if (i32.gt_s (local.get $exp) (i32.const 30)) (then (return (i32.or (local.get $sign) (i32.const 0x7C00)))))
    (if (i32.lt_s (local.get $exp) (i32.const -10)) (then (return (local.get $sign))))
    ;; bits of the 24-bit significand below the half's last place: 13 when normal, more when subnormal
    (local.set $drop (i32.const 13))
    (if (i32.lt_s (local.get $exp) (i32.const 1)) (then
      (local.set $frac (i32.or (local.get $frac) (i32.const 0x800000)))
      (local.set $drop (i32.sub (i32.const 14) (local.get $exp)))
      (local.set $exp (i32.const 0))))
    (local.set $kept (i32.or (i32.shl (local.get $exp) (i32.const 10)) (i32.shr_u (local.get $frac) (local.get $drop))))
    (local.set $guard (i32.and (i32.shr_u (local.get $frac) (i32.sub (local.get $drop) (i32.const 1))) (i32.const 1)))
    (local.set $sticky (i32.ne (i32.and (local.get $frac)
      (i32.sub (i32.shl (i32.const 1) (i32.sub (local.get $drop) (i32.const 1))) (i32.const 1))) (i32.const 0)))
    (i32.or (local.get $sign) (i32.add (local.get $kept)
      (i32.and (local.get $guard) (i32.or (local.get $sticky) (i32.and (local.get $kept) (i32.const 1)))))))
"""


def _address_wat() -> str:
    """$addr(handle, index, type, shift): the element's byte address, or a trap with §2.13's status."""
    return f"""
  (func $addr (param $h i32) (param $i i32) (param $t i32) (param $shift i32) (result i32) (local $s i32)
    (local.set $s (i32.sub (local.get $h) (i32.const 1)))
    (if (i32.ge_u (local.get $s) (i32.const {SLOTS})) (then (call $trap (i32.const 2)) unreachable))
    (if (i32.eqz (i32.load (i32.shl (local.get $s) (i32.const 2)))) (then (call $trap (i32.const 2)) unreachable))
    (if (i32.ne (i32.load (i32.shl (local.get $s) (i32.const 2))) (local.get $t))
      (then (call $trap (i32.const 4)) unreachable))
    (if (i32.ge_u (local.get $i) (i32.load offset=32 (i32.shl (local.get $s) (i32.const 2))))
      (then (call $trap (i32.const 3)) unreachable))
    (i32.add (i32.add (i32.const {DATA}) (i32.mul (local.get $s) (i32.const {SLOT_BYTES})))
             (i32.shl (local.get $i) (local.get $shift))))
  (func (export "getBuffer") (param $slot i32) (result i32)
    (if (i32.ge_u (local.get $slot) (i32.const {SLOTS})) (then (call $trap (i32.const 5)) unreachable))
    (if (i32.eqz (i32.load (i32.shl (local.get $slot) (i32.const 2)))) (then (call $trap (i32.const 5)) unreachable))
    (i32.add (local.get $slot) (i32.const 1)))"""


def _scalar_wat() -> str:
    out = []
    for e in ELEMENTS:
        load, store, shift = ACCESS[e.name]
        addr = f"(call $addr (local.get 0) (local.get 1) (i32.const {e.id}) (i32.const {shift}))"
        value = "(call $f2h (local.get 2))" if e.name == "F16" else "(local.get 2)"
        loaded = f"(call $h2f ({load} {addr}))" if e.name == "F16" else f"({load} {addr})"
        out.append(f'  (func (export "readBuffer{e.name}") (param i32 i32) (result {e.scalar}) {loaded})')
        out.append(f'  (func (export "writeBuffer{e.name}") (param i32 i32 {e.scalar}) ({store} {addr} {value}))')
    return "\n".join(out)


def _other_wat() -> str:
    """Imports a kernel must never reach here: unreachable, with the table's signature."""
    out = []
    for i in IMPORTS:
        if i.gc or i.name == "getBuffer" or i.name.startswith(("readBuffer", "writeBuffer")):
            continue
        results = f" (result {' '.join(i.results)})" if i.results else ""
        out.append(f'  (func (export "{i.name}") (param {" ".join(i.params)}){results} unreachable)')
    return "\n".join(out)


ACCESSOR_WAT = f"""(module
  (import "fuzz" "trap" (func $trap (param i32)))
  (memory (export "memory") {PAGES})
{HALF_WAT}
{_address_wat()}
{_scalar_wat()}
{_other_wat()})"""


@dataclass
class PlainRun:
    """Every slot's stored values after the run, and the trap (None when every element ran)."""

    slots: dict[int, np.ndarray]
    trap: str | None
    trap_index: int


class PlainRunner:
    """One engine and a compiled accessor, reused across kernels."""

    def __init__(self) -> None:
        self.engine = wasmtime.Engine()
        self.accessor = wasmtime.Module(self.engine, ACCESSOR_WAT)

    def run(self, guest: bytes, kernel_export: str, count: int, types: dict[int, int],
            inputs: dict[int, np.ndarray]) -> PlainRun:
        """Call the guest's kernel for indices 0..count-1 over `inputs` (stored values per slot)."""
        store = wasmtime.Store(self.engine)

        def trap(status: int) -> None:
            raise wasmtime.Trap(scalar_trap(status))

        trap_fn = wasmtime.Func(store, wasmtime.FuncType([wasmtime.ValType.i32()], []), trap)
        accessor = wasmtime.Instance(store, self.accessor, [trap_fn])
        exports = accessor.exports(store)
        memory = exports["memory"]
        self._fill(store, memory, types, inputs)
        linker = wasmtime.Linker(self.engine)
        for i in IMPORTS:
            if not i.gc:
                linker.define(store, ABI_MODULE, i.name, exports[i.name])
        instance = linker.instantiate(store, wasmtime.Module(self.engine, guest))
        kernel = instance.exports(store)[kernel_export]
        trapped, where = None, -1
        for index in range(count):
            try:
                kernel(store, index)
            except wasmtime.Trap as exc:
                trapped, where = trap_text(exc), index
                break
        return PlainRun(self._read(store, memory, types, inputs), trapped, where)

    @staticmethod
    def _fill(store: wasmtime.Store, memory: wasmtime.Memory, types: dict[int, int],
              inputs: dict[int, np.ndarray]) -> None:
        header = np.zeros(16, dtype="<u4")
        for slot, t in types.items():
            header[slot], header[8 + slot] = t, len(inputs[slot])
            data = np.ascontiguousarray(inputs[slot]).tobytes()
            memory.write(store, data, DATA + slot * SLOT_BYTES)
        memory.write(store, header.tobytes(), 0)

    @staticmethod
    def _read(store: wasmtime.Store, memory: wasmtime.Memory, types: dict[int, int],
              inputs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        out = {}
        for slot in types:
            size = inputs[slot].nbytes
            raw = memory.read(store, DATA + slot * SLOT_BYTES, DATA + slot * SLOT_BYTES + size)
            out[slot] = np.frombuffer(bytes(raw), dtype=inputs[slot].dtype).copy()
        return out
