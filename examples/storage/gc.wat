;; GC-array transfers: setBufferGC copies a mutable (array (mut f32)) [7.0] into a 1-element F32
;; buffer; the guest then zeroes the array and copyBufferGC copies the buffer back into it.
;; No dispatch: transfers only. (copyBufferGC into an immutable array would answer 11.)
(module
  (type $floats (array (mut f32)))
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "setBufferGC" (func $setGC (param i32 i32 anyref i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBufferGC" (func $copyGC (param i32 i32 anyref i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $array (mut (ref null $floats)) (ref.null $floats))

  ;; 0 when the value made the round trip, else the status of the first failing import.
  (func (export "run") (result i32) (local $packed i64) (local $h i32) (local $s i32) (local $freed i32)
    (global.set $array (array.new_fixed $floats 1 (f32.const 7)))
    (local.set $packed (call $create (i32.const 8) (i32.const 1)))  ;; type 8 = F32
    (local.set $s (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))
    (if (local.get $s) (then (return (local.get $s))))
    (local.set $h (i32.wrap_i64 (local.get $packed)))
    ;; (handle, bufferOffset, array, arrayOffset, count)
    (local.set $s (call $setGC (local.get $h) (i32.const 0) (global.get $array) (i32.const 0) (i32.const 1)))
    (if (i32.eqz (local.get $s)) (then
      (array.set $floats (global.get $array) (i32.const 0) (f32.const 0))
      (local.set $s (call $copyGC (local.get $h) (i32.const 0) (global.get $array) (i32.const 0) (i32.const 1)))))
    (local.set $freed (call $free (local.get $h)))
    (if (local.get $s) (then (return (local.get $s))))
    (local.get $freed))

  ;; The array's element after the round trip.
  (func (export "value") (result f32)
    (array.get $floats (global.get $array) (i32.const 0))))
