;; Mandelbrot tiles: one job renders one rectangle of a width x height image, so the tiles of an
;; image are independent jobs for a pool of hosts.
;;
;; render_tile(x0, y0, tw, th, width, height, max_iter) -> status
;;   Escape counts of the pixels x0 <= x < x0+tw, y0 <= y < y0+th, row-major, as little-endian u32 at
;;   COUNTS (65536) in guest memory. Pixel (x, y) samples the same point with the same f32
;;   arithmetic as examples/guests/mandelbrot.zig: c = (-2 + 3*(x+0.5)/width) + i*(-1.25 +
;;   2.5*(y+0.5)/height), so on the CPU the tiles put together equal that guest's render_direct.
;;   Returns 0, the wago_gpu_v1 status of the first failing import, or 100 for arguments out of range.
;;
;; Kernel 1 "tile": slot 0 U32 READ (parameters [x0, y0, tw, width, height, max_iter]),
;; slot 1 U32 WRITE (counts). CPU runner wago_gpu.cpu.tile calls the kernel for every index.
(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set32 (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy32 (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferU32" (func $rd (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "writeBufferU32" (func $wr (param i32 i32 i32)))
  (memory 80)
  (global $counts i32 (i32.const 65536))
  (global $max_pixels i32 (i32.const 1294336))  ;; (80 - 1) pages of u32 counts
  (global $gpu (mut i32) (i32.const 0))

  (func $tile (export "wago_gpu.kernel.tile") (param $i i32)
    (local $p i32) (local $tw i32) (local $n i32) (local $limit i32)
    (local $cr f32) (local $ci f32) (local $zr f32) (local $zi f32) (local $t f32)
    (local.set $p (call $get (i32.const 0)))
    (local.set $tw (call $rd (local.get $p) (i32.const 2)))
    (local.set $limit (call $rd (local.get $p) (i32.const 5)))
    (local.set $cr (f32.add (f32.const -2)
      (f32.div (f32.mul (f32.const 3) (f32.add (f32.convert_i32_u
                 (i32.add (call $rd (local.get $p) (i32.const 0)) (i32.rem_u (local.get $i) (local.get $tw))))
                 (f32.const 0.5)))
               (f32.convert_i32_u (call $rd (local.get $p) (i32.const 3))))))
    (local.set $ci (f32.add (f32.const -1.25)
      (f32.div (f32.mul (f32.const 2.5) (f32.add (f32.convert_i32_u
                 (i32.add (call $rd (local.get $p) (i32.const 1)) (i32.div_u (local.get $i) (local.get $tw))))
                 (f32.const 0.5)))
               (f32.convert_i32_u (call $rd (local.get $p) (i32.const 4))))))
    (block $done
      (loop $step
        (br_if $done (i32.ge_u (local.get $n) (local.get $limit)))
        (local.set $t (f32.add (f32.sub (f32.mul (local.get $zr) (local.get $zr))
                                        (f32.mul (local.get $zi) (local.get $zi))) (local.get $cr)))
        (local.set $zi (f32.add (f32.mul (f32.add (local.get $zr) (local.get $zr)) (local.get $zi)) (local.get $ci)))
        (local.set $zr (local.get $t))
        (br_if $done (f32.gt (f32.add (f32.mul (local.get $zr) (local.get $zr))
                                      (f32.mul (local.get $zi) (local.get $zi))) (f32.const 4)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $step)))
    (call $wr (call $get (i32.const 1)) (local.get $i) (local.get $n)))

  (func (export "wago_gpu.cpu.tile") (param $count i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (call $tile (local.get $i))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))

  ;; 0 when every argument is in range, else 100.
  (func $check (param $x0 i32) (param $y0 i32) (param $tw i32) (param $th i32)
               (param $w i32) (param $h i32) (param $iter i32) (result i32)
    (if (i32.or (i32.or (i32.lt_s (local.get $x0) (i32.const 0)) (i32.lt_s (local.get $y0) (i32.const 0)))
                (i32.or (i32.lt_s (local.get $tw) (i32.const 1)) (i32.lt_s (local.get $th) (i32.const 1))))
      (then (return (i32.const 100))))
    (if (i32.or (i32.or (i32.gt_s (local.get $tw) (i32.const 4096)) (i32.gt_s (local.get $th) (i32.const 4096)))
                (i32.or (i32.lt_s (local.get $iter) (i32.const 1)) (i32.gt_s (local.get $iter) (i32.const 65535))))
      (then (return (i32.const 100))))
    (if (i32.or (i32.gt_s (i32.add (local.get $x0) (local.get $tw)) (local.get $w))
                (i32.gt_s (i32.add (local.get $y0) (local.get $th)) (local.get $h)))
      (then (return (i32.const 100))))
    (if (i32.gt_u (i32.mul (local.get $tw) (local.get $th)) (global.get $max_pixels))
      (then (return (i32.const 100))))
    (i32.const 0))

  (func (export "render_tile") (param $x0 i32) (param $y0 i32) (param $tw i32) (param $th i32)
                               (param $w i32) (param $h i32) (param $iter i32) (result i32)
    (local $n i32) (local $packed i64) (local $hp i32) (local $hc i32) (local $st i32)
    (local.set $st (call $check (local.get $x0) (local.get $y0) (local.get $tw) (local.get $th)
                                (local.get $w) (local.get $h) (local.get $iter)))
    (if (local.get $st) (then (return (local.get $st))))
    (local.set $n (i32.mul (local.get $tw) (local.get $th)))
    (i32.store offset=0 (i32.const 0) (local.get $x0))
    (i32.store offset=4 (i32.const 0) (local.get $y0))
    (i32.store offset=8 (i32.const 0) (local.get $tw))
    (i32.store offset=12 (i32.const 0) (local.get $w))
    (i32.store offset=16 (i32.const 0) (local.get $h))
    (i32.store offset=20 (i32.const 0) (local.get $iter))
    ;; the parameter buffer must cover the dispatch count, and hold the six parameters
    (local.set $packed (call $create (i32.const 6)
      (select (local.get $n) (i32.const 8) (i32.gt_u (local.get $n) (i32.const 8)))))
    (local.set $st (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))
    (if (local.get $st) (then (return (local.get $st))))
    (local.set $hp (i32.wrap_i64 (local.get $packed)))
    (local.set $packed (call $create (i32.const 6) (local.get $n)))
    (local.set $st (i32.wrap_i64 (i64.shr_u (local.get $packed) (i64.const 32))))
    (if (local.get $st) (then (drop (call $free (local.get $hp))) (return (local.get $st))))
    (local.set $hc (i32.wrap_i64 (local.get $packed)))
    (block $out
      (local.set $st (call $set32 (local.get $hp) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 6)))
      (br_if $out (local.get $st))
      (local.set $st (call $bind (i32.const 0) (local.get $hp)))
      (br_if $out (local.get $st))
      (local.set $st (call $bind (i32.const 1) (local.get $hc)))
      (br_if $out (local.get $st))
      (local.set $st (call $dispatch (i32.const 1) (local.get $n)))
      (if (i32.eqz (local.get $st)) (then (global.set $gpu (i32.add (global.get $gpu) (i32.const 1)))))
      (if (i32.eq (local.get $st) (i32.const 1))
        (then (call $cpu_tile (local.get $n)) (local.set $st (i32.const 0))))
      (br_if $out (local.get $st))
      (local.set $st (call $copy32 (local.get $hc) (i32.const 0) (i32.const 0) (global.get $counts) (local.get $n))))
    (drop (call $free (local.get $hp)))
    (drop (call $free (local.get $hc)))
    (local.get $st))

  (func $cpu_tile (param $count i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (call $tile (local.get $i))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))

  ;; Where render_tile leaves the counts, and how many of its dispatches ran on the GPU so far.
  (func (export "counts_ptr") (result i32) (global.get $counts))
  (func (export "gpu_dispatches") (result i32) (global.get $gpu)))
