;; SAXPY guest (WAT): y := A*x + y over n f32 elements, A = 2.5, on the GPU when the host can.
;;
;; Exports: run(n) -> i32, result_ptr() -> i32, the kernel wago_gpu.kernel.saxpy, its CPU runner
;; wago_gpu.cpu.saxpy, memory. run(n) fills x[i] = i and y[i] = n - i, creates two F32 buffers,
;; sets them, binds x to slot 0 and y to slot 1, dispatches kernel 1 over n elements, runs the CPU
;; runner when dispatch answers 1, copies y back to result_ptr() and checks y[i] = 2.5*i + (n - i).
;; It returns 0 (GPU), 1 (CPU runner), the status of the first import that failed (2..12),
;; 99 (a wrong element) or 100 (n outside 1..4096). It frees both buffers on every path.
(module
  (import "wago_gpu_v1" "createBuffer" (func $createBuffer (param i32 i32) (result i32 i32)))
  (import "wago_gpu_v1" "freeBuffer" (func $freeBuffer (param i32) (result i32)))
  (import "wago_gpu_v1" "bindBuffer" (func $bindBuffer (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $getBuffer (param i32) (result i32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $setBuffer32 (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copyBuffer32 (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $readBufferF32 (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $writeBufferF32 (param i32 i32 f32)))

  ;; One page: x at [0, 16384), y at [16384, 32768): room for 4096 elements each.
  (memory (export "memory") 1)
  (global $X i32 (i32.const 0))
  (global $Y i32 (i32.const 16384))

  ;; The kernel: one element, y[i] = 2.5*x[i] + y[i]. Inside the GPU subset: constant slots, the
  ;; index straight from the parameter, f32 arithmetic only.
  (func $kernel (export "wago_gpu.kernel.saxpy") (param $i i32)
    (call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get $i)
      (f32.add
        (f32.mul (f32.const 2.5) (call $readBufferF32 (call $getBuffer (i32.const 0)) (local.get $i)))
        (call $readBufferF32 (call $getBuffer (i32.const 1)) (local.get $i)))))

  ;; The CPU runner: the kernel for every index below n, through the same scalar imports.
  (func $cpu (export "wago_gpu.cpu.saxpy") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $kernel (local.get $i))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  (func (export "result_ptr") (result i32) (global.get $Y))

  ;; x[i] = i, y[i] = n - i in guest memory.
  (func $fill (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (f32.store (i32.add (global.get $X) (i32.shl (local.get $i) (i32.const 2)))
        (f32.convert_i32_u (local.get $i)))
      (f32.store (i32.add (global.get $Y) (i32.shl (local.get $i) (i32.const 2)))
        (f32.convert_i32_u (i32.sub (local.get $n) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))

  ;; 0 when y[i] = 2.5*i + (n - i) for every i below n, else 99.
  (func $check (param $n i32) (result i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (if (f32.ne
            (f32.load (i32.add (global.get $Y) (i32.shl (local.get $i) (i32.const 2))))
            (f32.add (f32.mul (f32.const 2.5) (f32.convert_i32_u (local.get $i)))
                     (f32.convert_i32_u (i32.sub (local.get $n) (local.get $i)))))
        (then (return (i32.const 99))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (i32.const 0))

  ;; Everything between creating and freeing the buffers; returns the first failing status.
  (func $job (param $x i32) (param $y i32) (param $n i32) (result i32) (local $status i32) (local $ran i32)
    (local.set $status (call $setBuffer32 (local.get $x) (i32.const 0) (i32.const 0) (global.get $X) (local.get $n)))
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $setBuffer32 (local.get $y) (i32.const 0) (i32.const 0) (global.get $Y) (local.get $n)))
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $bindBuffer (i32.const 0) (local.get $x)))
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $bindBuffer (i32.const 1) (local.get $y)))
    (if (local.get $status) (then (return (local.get $status))))
    ;; 0: the GPU ran the kernel; 1: nothing was committed and the guest runs its CPU runner.
    (local.set $ran (call $dispatch (i32.const 1) (local.get $n)))
    (if (i32.eq (local.get $ran) (i32.const 1)) (then (call $cpu (local.get $n))))
    (if (i32.gt_u (local.get $ran) (i32.const 1)) (then (return (local.get $ran))))
    (local.set $status (call $copyBuffer32 (local.get $y) (i32.const 0) (i32.const 0) (global.get $Y) (local.get $n)))
    (if (local.get $status) (then (return (local.get $status))))
    (if (call $check (local.get $n)) (then (return (i32.const 99))))
    (local.get $ran))

  (func (export "run") (param $n i32) (result i32) (local $x i32) (local $y i32) (local $status i32)
    (if (i32.or (i32.eqz (local.get $n)) (i32.gt_u (local.get $n) (i32.const 4096)))
      (then (return (i32.const 100))))
    (call $fill (local.get $n))
    ;; createBuffer has two results: the handle, then the status on top of the stack.
    (local.set $status (call $createBuffer (i32.const 8) (local.get $n)))
    (local.set $x)
    (if (local.get $status) (then (return (local.get $status))))
    (local.set $status (call $createBuffer (i32.const 8) (local.get $n)))
    (local.set $y)
    (if (local.get $status) (then (drop (call $freeBuffer (local.get $x))) (return (local.get $status))))
    (local.set $status (call $job (local.get $x) (local.get $y) (local.get $n)))
    (drop (call $freeBuffer (local.get $x)))
    (drop (call $freeBuffer (local.get $y)))
    (local.get $status)))
