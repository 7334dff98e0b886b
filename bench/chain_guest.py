"""The chain benchmark's guest (WAT, generated): two F32 buffers a (slot 0) and b (slot 1), kernel
1 "fwd" (b = a + 1) and kernel 2 "back" (a = b + 1), so a chain alternates them with no rebinding;
chain(n, steps) dispatches them in turn from Wasm, direct(n, steps) is the same chain as a plain
Wasm loop over guest memory. After `steps` steps the last output holds input + steps."""
from __future__ import annotations

from bench.work_guest import IMPORT_DECLS
from wagogpu import Access, BindingConfig, ElementType, KernelConfig

FWD, BACK = 1, 2


def kernel_configs() -> list[KernelConfig]:
    f32 = ElementType.F32
    fwd = [BindingConfig(0, f32, Access.READ), BindingConfig(1, f32, Access.WRITE)]
    back = [BindingConfig(0, f32, Access.WRITE), BindingConfig(1, f32, Access.READ)]
    return [KernelConfig(FWD, "wago_gpu.kernel.fwd", "wago_gpu.cpu.fwd", fwd, relaxed_float=True),
            KernelConfig(BACK, "wago_gpu.kernel.back", "wago_gpu.cpu.back", back, relaxed_float=True)]


def _step(name: str, src: int, dst: int) -> str:
    return f"""
  (func $k_{name} (export "wago_gpu.kernel.{name}") (param i32)
    (call $write (call $get (i32.const {dst})) (local.get 0)
      (f32.add (call $read (call $get (i32.const {src})) (local.get 0)) (f32.const 1))))
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $k_{name} (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))"""


def wat() -> str:
    """Guest memory: input at 0, the direct chain's two arrays at 4n and 8n, copy-backs at 12n."""
    return f"""(module
{IMPORT_DECLS}
  (memory (export "memory") 1)
  (global $a (mut i32) (i32.const 0))
  (global $b (mut i32) (i32.const 0))
  (func (export "grow_to") (param $pages i32) (result i32)
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then (drop (memory.grow (i32.sub (local.get $pages) (memory.size))))))
    (memory.size))
  (func (export "setup") (param $n i32) (result i32) (local $p i64)
    (local.set $p (call $create (i32.const 8) (local.get $n)))
    (global.set $a (i32.wrap_i64 (local.get $p)))
    (local.set $p (call $create (i32.const 8) (local.get $n)))
    (global.set $b (i32.wrap_i64 (local.get $p)))
    (drop (call $bind (i32.const 0) (global.get $a)))
    (drop (call $bind (i32.const 1) (global.get $b)))
    (call $set (global.get $a) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
  (func (export "chain") (param $n i32) (param $steps i32) (result i32) (local $i i32) (local $s i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $steps)))
      (local.set $s (call $dispatch (i32.add (i32.and (local.get $i) (i32.const 1)) (i32.const 1)) (local.get $n)))
      (if (local.get $s) (then (return (i32.or (local.get $s) (i32.shl (local.get $i) (i32.const 8))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (i32.const 0))
  ;; The copy-back that ends a chain: the last output (b after an odd number of steps) to 12n.
  (func (export "finish") (param $n i32) (param $steps i32) (result i32)
    (call $copy (select (global.get $b) (global.get $a) (i32.and (local.get $steps) (i32.const 1)))
      (i32.const 0) (i32.const 0) (i32.mul (local.get $n) (i32.const 12)) (local.get $n)))
  ;; The same chain over guest memory: input at 0, then back and forth between 4n and 8n; returns
  ;; where the last step wrote.
  (func (export "direct") (param $n i32) (param $steps i32) (result i32) (local $i i32) (local $j i32)
    (local $src i32) (local $dst i32)
    (local.set $dst (i32.shl (local.get $n) (i32.const 2)))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $steps)))
      (local.set $j (i32.const 0))
      (block $row (loop $el
        (br_if $row (i32.ge_u (local.get $j) (local.get $n)))
        (f32.store (i32.add (local.get $dst) (i32.shl (local.get $j) (i32.const 2)))
          (f32.add (f32.load (i32.add (local.get $src) (i32.shl (local.get $j) (i32.const 2)))) (f32.const 1)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $el)))
      (local.set $src (local.get $dst))
      (local.set $dst (select (i32.shl (local.get $n) (i32.const 3)) (i32.shl (local.get $n) (i32.const 2))
                              (i32.eq (local.get $dst) (i32.shl (local.get $n) (i32.const 2)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (local.get $src))
{_step("fwd", 0, 1)}
{_step("back", 1, 0)}
)"""
