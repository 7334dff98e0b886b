"""WAT guests the tests build: every import re-exported, plus bit-exact scalar wrappers."""
from __future__ import annotations

from wagogpu.abi.table import IMPORTS, TYPE_INFO, ElementType

_BITS = {"i32": ("i64.extend_i32_u", "i32.wrap_i64"), "i64": ("", ""),
         "f32": ("i32.reinterpret_f32 i64.extend_i32_u", "i32.wrap_i64 f32.reinterpret_i32"),
         "f64": ("i64.reinterpret_f64", "f64.reinterpret_i64")}


def import_decls(names=None) -> str:
    """(import ...) lines for the ABI imports, each exported again under its own name."""
    out: list[str] = []
    wrappers: list[str] = []
    for spec in IMPORTS:
        if names is not None and spec.name not in names:
            continue
        params = " ".join(spec.params)
        results = " ".join(spec.results)
        out.append("  " + spec.wat_import())
        if spec.name.startswith(("setBuffer", "copyBuffer")) and "anyref" not in spec.params:
            # Memory transfers find guest memory through the calling instance: wrap them in Wasm.
            args = " ".join(f"(local.get {i})" for i in range(len(spec.params)))
            wrappers.append(f'  (func (export "{spec.name}") (param {params}) (result {results})'
                            f' (call ${spec.name} {args}))')
        else:
            out.append(f'  (export "{spec.name}" (func ${spec.name}))')
    return "\n".join(out + wrappers)


def scalar_bit_wrappers() -> str:
    """readbits<T>(h, i) -> i64 and writebits<T>(h, i, bits i64): scalar access without floats in Python."""
    out = []
    for t in ElementType:
        scalar = TYPE_INFO[t].scalar
        to_bits, from_bits = _BITS[scalar]
        out.append(f'  (func (export "readbits{t.name}") (param i32 i32) (result i64)'
                   f' (call $readBuffer{t.name} (local.get 0) (local.get 1)) {to_bits})')
        out.append(f'  (func (export "writebits{t.name}") (param i32 i32 i64)'
                   f' (call $writeBuffer{t.name} (local.get 0) (local.get 1) (local.get 2) {from_bits}))')
    return "\n".join(out)


def abi_module(extra: str = "", memory: str = "(memory (export \"memory\") 1)", kernels: str = "") -> str:
    """A guest importing all of wago_gpu_v1 with a 1-page memory, optional kernels and extra text."""
    return f"""(module
{import_decls()}
  {memory}
  (func (export "firstWord") (result i32) (i32.load ({"i64" if " i64 " in memory else "i32"}.const 0)))
{scalar_bit_wrappers()}
{kernels}
{extra}
)"""


def copy_kernel(name: str = "double", body: str | None = None) -> str:
    """A kernel whose body defaults to out[i] = in[i] (slot 0 -> slot 1), with an empty CPU runner
    and scalarLoop = write(get(1), 0, read(get(0), 0))."""
    body = body or ("(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0)"
                    " (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get 0)))")
    return f"""
  (func (export "wago_gpu.kernel.{name}") (param i32) {body})
  (func (export "wago_gpu.cpu.{name}") (param i32))
  (func (export "scalarLoop")
    (call $writeBufferF32 (call $getBuffer (i32.const 1)) (i32.const 0)
      (call $readBufferF32 (call $getBuffer (i32.const 0)) (i32.const 0))))"""


def runner_kernel(name: str, slot_in: int, slot_out: int, expr: str) -> str:
    """A kernel out[i] = expr(in[i]) over F32 with a real CPU runner; expr uses $x."""
    e = expr.replace("$x", f"(call $readBufferF32 (call $getBuffer (i32.const {slot_in})) (local.get 0))")
    return looped_kernel(name, f"(call $writeBufferF32 (call $getBuffer (i32.const {slot_out})) (local.get 0) {e})")


def looped_kernel(name: str, body: str) -> str:
    """A kernel `body` over its index $i, with a CPU runner that calls it for every index below the count."""
    return f"""
  (func $k_{name} (export "wago_gpu.kernel.{name}") (param $i i32)
    {body})
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $j i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
      (call $k_{name} (local.get $j))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $next))))"""
