;; The buffers example: two chained F32 kernels, B = 2*A then A = B + 1; the intermediate B never
;; visits guest memory (it stays in the plugin, or on the GPU).
;;
;; examples/start runs the same job inside a start function. Here the host calls one export per
;; step, so it can read buffer_snapshot().last right after each dispatch: the record survives the
;; guest's CPU runner (scalar imports never replace it), while a later bind, transfer or free would.
;;
;; Memory: [0,16) input f32 [1,2,3,4]; [16,32) result; u32 at 32 and 36: dispatch statuses.
;; Every export returns 0 or the status of the first import that failed (never traps on a status).
(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $read (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $write (param i32 i32 f32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\00\00\80\3f\00\00\00\40\00\00\40\40\00\00\80\40")
  (global $a (mut i32) (i32.const 0))
  (global $b (mut i32) (i32.const 0))

  ;; Kernel 1: slot1[i] = slot0[i] * 2. Kernel 2: slot1[i] = slot0[i] + 1. Both inside the GPU subset.
  (func $double (export "wago_gpu.kernel.double") (param $i i32)
    (call $write (call $get (i32.const 1)) (local.get $i)
      (f32.mul (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 2))))
  (func $addOne (export "wago_gpu.kernel.addOne") (param $i i32)
    (call $write (call $get (i32.const 1)) (local.get $i)
      (f32.add (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 1))))
  ;; The CPU runners: the same kernels once per element, through the scalar imports.
  (func $cpu_double (export "wago_gpu.cpu.double") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $double (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
  (func $cpu_addOne (export "wago_gpu.cpu.addOne") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $addOne (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  ;; createBufferPacked: status in the high 32 bits, handle in the low 32.
  (func $new (param $count i32) (param $into i32) (result i32) (local $packed i64)
    (local.set $packed (call $create (i32.const 8) (local.get $count)))
    (i32.store (local.get $into) (i32.wrap_i64 (local.get $packed)))
    (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))

  ;; Two 4-element F32 buffers; A = [1, 2, 3, 4] from memory.
  (func (export "setup") (result i32) (local $status i32)
    (local.set $status (call $new (i32.const 4) (i32.const 40)))
    (if (local.get $status) (then (return (local.get $status))))
    (global.set $a (i32.load (i32.const 40)))
    (local.set $status (call $new (i32.const 4) (i32.const 40)))
    (if (local.get $status) (then (return (local.get $status))))
    (global.set $b (i32.load (i32.const 40)))
    (call $set (global.get $a) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4)))

  ;; Bind (input, output), dispatch, save the status at $at, run the CPU runner on status 1.
  (func $step (param $kernel i32) (param $in i32) (param $out i32) (param $at i32) (result i32)
    (local $status i32)
    (local.set $status (call $bind (i32.const 0) (local.get $in)))
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $bind (i32.const 1) (local.get $out)))
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $dispatch (local.get $kernel) (i32.const 4)))
    (i32.store (local.get $at) (local.get $status))
    (if (i32.eq (local.get $status) (i32.const 1)) (then
      (if (i32.eq (local.get $kernel) (i32.const 1))
        (then (call $cpu_double (i32.const 4)))
        (else (call $cpu_addOne (i32.const 4))))
      (local.set $status (i32.const 0))))
    (local.get $status))

  (func (export "first") (result i32)   ;; B = 2*A
    (call $step (i32.const 1) (global.get $a) (global.get $b) (i32.const 32)))
  (func (export "second") (result i32)  ;; A = B + 1
    (call $step (i32.const 2) (global.get $b) (global.get $a) (i32.const 36)))

  ;; Copy A to bytes 16..31 and free both buffers (both frees run even if the copy failed).
  (func (export "finish") (result i32) (local $status i32) (local $freed i32)
    (local.set $status (call $copy (global.get $a) (i32.const 0) (i32.const 0) (i32.const 16) (i32.const 4)))
    (local.set $freed (call $free (global.get $b)))
    (if (i32.eqz (local.get $status)) (then (local.set $status (local.get $freed))))
    (local.set $freed (call $free (global.get $a)))
    (if (i32.eqz (local.get $status)) (then (local.set $status (local.get $freed))))
    (local.get $status)))
