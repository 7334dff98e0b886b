"""The guest of the hostile-guest fuzzer: it imports all 34 wago_gpu_v1 imports and exports one
function per import that forwards its arguments, so the fuzzer calls every import through Wasm as
a guest would (the transfers find guest memory through their calling instance).

  * management, dispatch and memory transfers: the import's own signature, forwarded;
  * `read<T>(handle, index) -> i64` and `write<T>(handle, index, bits i64)`: the scalar imports,
    their value carried as raw bits (no float crosses into Python, so NaN payloads survive);
  * `setGC(handle, offset, kind, length, arrayOffset, count, fill i64)` and
    `copyGC(handle, offset, kind, length, arrayOffset, count)`: build the `anyref` of GC_KINDS[kind]
    (null, an i31, a struct, or an array of `length` elements all `fill`), call the import, and
    (copyGC, for arrays) dump the array's elements afterwards into memory 0 at DUMP;
  * the kernels of fuzz/hostile_kernels.py and their CPU runners.

Memories: 0 a 32-bit one, 1 a 64-bit one, 2 a shared 32-bit one; one page each.
"""
from __future__ import annotations

from dataclasses import dataclass

from abitable import IMPORTS, import_decls, kernel_funcs
from hostile_kernels import KERNELS

DUMP = 0xE000  # where copyGC dumps the array (memory 0)


@dataclass(frozen=True)
class GcKind:
    name: str
    storage: str  # "" for null/i31/struct, else the array's element storage (i8, i16, i32, i64, f32, f64)
    mutable: bool = True
    type_name: str = ""  # the WAT type label of the array

    @property
    def width(self) -> int:
        return {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "f32": 4, "f64": 8}.get(self.storage, 0)


GC_KINDS = (GcKind("null", ""), GcKind("i31", ""), GcKind("struct", ""),
            GcKind("i8", "i8", True, "$a_i8"), GcKind("i16", "i16", True, "$a_i16"),
            GcKind("i32", "i32", True, "$a_i32"), GcKind("i64", "i64", True, "$a_i64"),
            GcKind("f32", "f32", True, "$a_f32"), GcKind("f64", "f64", True, "$a_f64"),
            GcKind("i32 immutable", "i32", False, "$c_i32"))
ARRAYS = [k for k in GC_KINDS if k.storage]
FILL = {"i8": "(i32.wrap_i64 (local.get $fill))", "i16": "(i32.wrap_i64 (local.get $fill))",
        "i32": "(i32.wrap_i64 (local.get $fill))", "i64": "(local.get $fill)",
        "f32": "(f32.reinterpret_i32 (i32.wrap_i64 (local.get $fill)))", "f64": "(f64.reinterpret_i64 (local.get $fill))"}
STORE = {"i8": ("i32.store8", "array.get_u"), "i16": ("i32.store16", "array.get_u"), "i32": ("i32.store", "array.get"),
         "i64": ("i64.store", "array.get"), "f32": ("f32.store", "array.get"), "f64": ("f64.store", "array.get")}
TO_BITS = {"i32": ("i64.extend_i32_u", "i32.wrap_i64"), "i64": ("", ""),
           "f32": ("i32.reinterpret_f32 i64.extend_i32_u", "i32.wrap_i64 f32.reinterpret_i32"),
           "f64": ("i64.reinterpret_f64", "f64.reinterpret_i64")}


def _types() -> str:
    arrays = "\n".join(f"  (type {k.type_name} (array {'(mut ' + k.storage + ')' if k.mutable else k.storage}))"
                       for k in ARRAYS)
    return arrays + "\n  (type $s (struct (field i32)))"


def _make() -> str:
    """$make(kind, length, fill) -> anyref."""
    cases = ["    (if (i32.eq (local.get $kind) (i32.const 0)) (then (return (ref.null any))))",
             "    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (ref.i31 (i32.wrap_i64 (local.get $fill))))))",
             "    (if (i32.eq (local.get $kind) (i32.const 2))"
             " (then (return (struct.new $s (i32.wrap_i64 (local.get $fill))))))"]
    for index, k in enumerate(GC_KINDS):
        if k.storage:
            cases.append(f"    (if (i32.eq (local.get $kind) (i32.const {index})) (then (return "
                         f"(array.new {k.type_name} {FILL[k.storage]} (local.get $n)))))")
    return ("  (func $make (param $kind i32) (param $n i32) (param $fill i64) (result anyref)\n"
            + "\n".join(cases) + "\n    (ref.null any))")


def _dump() -> str:
    """$dump(ref, kind): a mutable array's elements to memory 0 at DUMP, element after element."""
    cases = []
    for index, k in enumerate(GC_KINDS):
        if not (k.storage and k.mutable):
            continue
        store, get = STORE[k.storage]
        arr = f"(ref.cast (ref {k.type_name}) (local.get $r))"
        cases.append(f"""    (if (i32.eq (local.get $kind) (i32.const {index})) (then
      (local.set $n (array.len {arr}))
      (block $done (loop $next (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        ({store} (i32.add (i32.const {DUMP}) (i32.mul (local.get $i) (i32.const {k.width})))
          ({get} {k.type_name} {arr} (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $next)))))""")
    return ("  (func $dump (param $r anyref) (param $kind i32) (local $i i32) (local $n i32)\n"
            + "\n".join(cases) + ")")


def _forwarders() -> str:
    out = []
    for spec in IMPORTS:
        name = spec.name
        if spec.gc:
            continue
        if name.startswith(("readBuffer", "writeBuffer")):
            scalar = spec.results[0] if name.startswith("read") else spec.params[2]
            to_bits, from_bits = TO_BITS[scalar]
            t = name[len("readBuffer"):] if name.startswith("read") else name[len("writeBuffer"):]
            if name.startswith("read"):
                out.append(f'  (func (export "read{t}") (param i32 i32) (result i64)'
                           f' (call ${name} (local.get 0) (local.get 1)) {to_bits})')
            else:
                out.append(f'  (func (export "write{t}") (param i32 i32 i64)'
                           f' (call ${name} (local.get 0) (local.get 1) (local.get 2) {from_bits}))')
            continue
        args = " ".join(f"(local.get {i})" for i in range(len(spec.params)))
        results = f" (result {' '.join(spec.results)})" if spec.results else ""
        out.append(f'  (func (export "{name}") (param {" ".join(spec.params)}){results} (call ${name} {args}))')
    return "\n".join(out)


GC_WRAPPERS = """
  (func (export "setGC") (param $h i32) (param $off i32) (param $kind i32) (param $n i32) (param $aoff i32)
    (param $count i32) (param $fill i64) (result i32)
    (call $setBufferGC (local.get $h) (local.get $off) (call $make (local.get $kind) (local.get $n) (local.get $fill))
      (local.get $aoff) (local.get $count)))
  (func (export "copyGC") (param $h i32) (param $off i32) (param $kind i32) (param $n i32) (param $aoff i32)
    (param $count i32) (result i32) (local $r anyref) (local $status i32)
    (local.set $r (call $make (local.get $kind) (local.get $n) (i64.const 0)))
    (local.set $status (call $copyBufferGC (local.get $h) (local.get $off) (local.get $r) (local.get $aoff)
      (local.get $count)))
    (call $dump (local.get $r) (local.get $kind))
    (local.get $status))"""


def guest_wat() -> str:
    kernels = "".join(kernel_funcs(k.body, "", k.name) for k in KERNELS.values() if k.exported)
    return f"""(module
{_types()}
{import_decls(include_gc=True)}
  (memory $m0 1)
  (memory $m1 i64 1)
  (memory $m2 1 1 shared)
{_make()}
{_dump()}
{_forwarders()}
{GC_WRAPPERS}
{kernels})"""
