;; memory64 transfers: a 64-bit memory holds f32 7.0 at address 0; setBuffer64 moves it into a
;; 1-element F32 buffer, copyBuffer64 moves it back to address 4. No dispatch: transfers only
;; (setBuffer32/copyBuffer32 would answer 11, UNSUPPORTED_STORAGE, on a 64-bit memory).
(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer64" (func $set64 (param i32 i32 i32 i64 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer64" (func $copy64 (param i32 i32 i32 i64 i32) (result i32)))
  (memory (export "memory") i64 1)
  (data (i64.const 0) "\00\00\e0\40")  ;; f32 7.0

  ;; 0 when the value made the round trip, else the status of the first failing import.
  (func (export "run") (result i32) (local $packed i64) (local $h i32) (local $s i32) (local $freed i32)
    (local.set $packed (call $create (i32.const 8) (i32.const 1)))  ;; type 8 = F32
    (local.set $s (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))
    (if (local.get $s) (then (return (local.get $s))))
    (local.set $h (i32.wrap_i64 (local.get $packed)))
    ;; (handle, bufferOffset, memoryIndex, guestByteOffset: i64, count)
    (local.set $s (call $set64 (local.get $h) (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 1)))
    (if (i32.eqz (local.get $s)) (then
      (local.set $s (call $copy64 (local.get $h) (i32.const 0) (i32.const 0) (i64.const 4) (i32.const 1)))))
    (local.set $freed (call $free (local.get $h)))
    (if (local.get $s) (then (return (local.get $s))))
    (local.get $freed))

  ;; The f32 the copy wrote at address 4.
  (func (export "value") (result f32)
    (f32.load (i64.const 4))))
