;; F16 storage: one binary16 element, incremented in place by kernel 1 on the GPU or by the guest's
;; CPU runner. The kernel reads and writes F16 through f32 values (readBufferF16 widens,
;; writeBufferF16 rounds to nearest even), so 1.0 (0x3C00) becomes 2.0 (0x4000).
;;
;; Memory: u16 0x3C00 at 0. run() creates the buffer, uploads it and dispatches; the dispatch stays
;; the host's last recorded operation until free() (value() reads through a scalar import, which
;; is not recorded). The exported global `status` holds the dispatch status (-1 before).
(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF16" (func $read (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF16" (func $write (param i32 i32 f32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\00\3c")
  (global $h (mut i32) (i32.const 0))
  (global $status (export "status") (mut i32) (i32.const -1))

  ;; Kernel 1: slot0[i] = slot0[i] + 1 (slot 0 is F16, READ_WRITE).
  (func $inc (export "wago_gpu.kernel.inc") (param $i i32)
    (call $write (call $get (i32.const 0)) (local.get $i)
      (f32.add (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 1))))
  (func $cpu_inc (export "wago_gpu.cpu.inc") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $inc (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  ;; 0 when the element was incremented (on the GPU or by the CPU runner), else the failing status.
  (func (export "run") (result i32) (local $packed i64) (local $s i32)
    (local.set $packed (call $create (i32.const 7) (i32.const 1)))  ;; type 7 = F16
    (local.set $s (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))
    (if (local.get $s) (then (return (local.get $s))))
    (global.set $h (i32.wrap_i64 (local.get $packed)))
    (local.set $s (call $set (global.get $h) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1)))
    (if (local.get $s) (then (return (local.get $s))))
    (local.set $s (call $bind (i32.const 0) (global.get $h)))
    (if (local.get $s) (then (return (local.get $s))))
    (global.set $status (call $dispatch (i32.const 1) (i32.const 1)))
    (if (i32.eq (global.get $status) (i32.const 1)) (then (call $cpu_inc (i32.const 1)) (return (i32.const 0))))
    (global.get $status))

  ;; The element, widened to f32 by the scalar import.
  (func (export "value") (result f32)
    (call $read (global.get $h) (i32.const 0)))

  (func (export "free") (result i32)
    (call $free (global.get $h))))
