"""The benchmark guest (WAT, generated): kernels copy, twice, square and polynomial, each with a
bulk CPU runner (copyBuffer32 in, plain Wasm loop, setBuffer32 out, as the reference's runners do)
and a direct loop over guest memory. Input at byte 0, direct output at 4n, GPU output at 8n."""
from __future__ import annotations

import numpy as np

from wagogpu.abi.table import IMPORTS_BY_NAME

# kernel name -> (WAT expression over $x, numpy reference, exact?)
POLY_STEPS = 32
EXPRESSIONS = {
    "copy": "$x",
    "twice": "(f32.mul $x (f32.const 2))",
    "square": "(f32.add (f32.mul $x $x) (f32.const 1))",
    "polynomial": None,  # 32 x (v = v*0.875 + 0.25), below
}
KERNEL_IDS = {name: i for i, name in enumerate(EXPRESSIONS, start=1)}
EXACT = {"copy", "twice", "square"}


def _poly(expr: str) -> str:
    for _ in range(POLY_STEPS):
        expr = f"(f32.add (f32.mul {expr} (f32.const 0.875)) (f32.const 0.25))"
    return expr


def expression(name: str, x: str) -> str:
    e = EXPRESSIONS[name]
    return _poly(x) if e is None else e.replace("$x", x)


def reference(name: str, x: np.ndarray) -> np.ndarray:
    if name == "copy":
        return x.copy()
    if name == "twice":
        return x * np.float32(2)
    if name == "square":
        return x * x + np.float32(1)
    v = x.copy()
    for _ in range(POLY_STEPS):
        v = v * np.float32(0.875) + np.float32(0.25)
    return v


def input_values(n: int) -> np.ndarray:
    """The reference's fill: ((i % 2049) - 1024) / 32."""
    return ((np.arange(n) % 2049 - 1024) / 32).astype(np.float32)


# The imports this guest uses, under the local names its code calls; signatures from the ABI table.
IMPORT_DECLS = "\n".join("  " + IMPORTS_BY_NAME[name].wat_import(local) for name, local in (
    ("createBufferPacked", "create"), ("freeBuffer", "free"), ("bindBuffer", "bind"), ("getBuffer", "get"),
    ("setBuffer32", "set"), ("copyBuffer32", "copy"), ("readBufferF32", "read"), ("writeBufferF32", "write"),
    ("dispatch", "dispatch")))


def wat() -> str:
    funcs = []
    for name in EXPRESSIONS:
        k = expression(name, "(call $read (call $get (i32.const 0)) (local.get 0))")
        d = expression(name, "(f32.load (i32.shl (local.get $i) (i32.const 2)))")
        funcs.append(f"""
  (func (export "wago_gpu.kernel.{name}") (param i32)
    (call $write (call $get (i32.const 1)) (local.get 0) {k}))
  (func $direct_{name} (export "direct.{name}") (param $n i32) (local $i i32) (local $o i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (local.set $o (i32.shl (local.get $n) (i32.const 2)))
    (loop $l
      (f32.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 2))) {d})
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n)))))
  (func (export "wago_gpu.cpu.{name}") (param $n i32)
    (drop (call $copy (call $get (i32.const 0)) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
    (call $direct_{name} (local.get $n))
    (drop (call $set (call $get (i32.const 1)) (i32.const 0) (i32.const 0)
                     (i32.shl (local.get $n) (i32.const 2)) (local.get $n))))""")
    return f"""(module
{IMPORT_DECLS}
  (memory (export "memory") 1)
  (global $in (mut i32) (i32.const 0))
  (global $out (mut i32) (i32.const 0))
  (func (export "grow_to") (param $pages i32) (result i32)
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then (drop (memory.grow (i32.sub (local.get $pages) (memory.size))))))
    (memory.size))
  (func (export "setup") (param $n i32) (result i32) (local $p i64)
    (local.set $p (call $create (i32.const 8) (local.get $n)))
    (if (i32.wrap_i64 (i64.shr_u (local.get $p) (i64.const 32))) (then (return (i32.const -1))))
    (global.set $in (i32.wrap_i64 (local.get $p)))
    (local.set $p (call $create (i32.const 8) (local.get $n)))
    (if (i32.wrap_i64 (i64.shr_u (local.get $p) (i64.const 32))) (then (return (i32.const -2))))
    (global.set $out (i32.wrap_i64 (local.get $p)))
    (i32.or (call $bind (i32.const 0) (global.get $in)) (call $bind (i32.const 1) (global.get $out))))
  (func (export "upload") (param $n i32) (result i32)
    (call $set (global.get $in) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
  (func (export "download") (param $n i32) (param $at i32) (result i32)
    (call $copy (global.get $out) (i32.const 0) (i32.const 0) (local.get $at) (local.get $n)))
  (func (export "dispatch") (param $k i32) (param $n i32) (result i32) (call $dispatch (local.get $k) (local.get $n)))
  ;; One GPU sample in one call from the host: set input, dispatch, copy the output to 8n.
  (func (export "sample") (param $k i32) (param $n i32) (result i32) (local $s i32)
    (local.set $s (call $set (global.get $in) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
    (if (local.get $s) (then (return (i32.or (local.get $s) (i32.const 0x100)))))
    (local.set $s (call $dispatch (local.get $k) (local.get $n)))
    (if (local.get $s) (then (return (local.get $s))))
    (call $copy (global.get $out) (i32.const 0) (i32.const 0) (i32.shl (local.get $n) (i32.const 3)) (local.get $n)))
  (func (export "teardown") (result i32) (i32.or (call $free (global.get $in)) (call $free (global.get $out))))
{"".join(funcs)}
)"""
