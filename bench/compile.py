"""Compile-time benchmark: decode + lower + emit (compile_buffer_wgsl) per kernel.

    python -m bench.compile [--iterations 2000] [--out results.jsonl]

Kernels of the reference subset: twice and the 32-step polynomial from a BufferWork-style module
(four kernels with CPU runner loops, as in the reference's benchmark), and a Mandelbrot step
(x*x-y*y+cr, (x+x)*y+ci). Kernels of the extended subset: an integer loop with a block, br_if and
division (sum_loop), and the Zig guest's per-pixel Mandelbrot loop (examples/guests/mandelbrot.wasm).
Each JSONL record: name, median_us, p90_us, iterations, wgsl_bytes, source_bytes, python, plus the
decode-only and lower-only medians; a last record compares the polynomial with its 150 us target.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import wasmtime

from examples.progress import Progress
from wagogpu.abi.table import Access, ElementType
from wagogpu.compiler import compile_buffer_wgsl, compile_wgsl
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.config import BindingConfig, KernelConfig

TARGET_POLYNOMIAL_US = 150.0

_IMPORTS = """
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $read (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $write (param i32 i32 f32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
"""


def _pair(name: str, value: str, locals_: str = "", prelude: str = "") -> str:
    """A kernel `prelude; out[i] = value` plus its CPU runner looping over 0..n-1 ($i, $v in scope)."""
    return f"""
  (func (export "wago_gpu.kernel.{name}") (param $i i32) {locals_} {prelude}
    (call $write (call $get (i32.const 1)) (local.get $i) {value}))
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $i i32) {locals_}
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n))) {prelude}
      (call $write (call $get (i32.const 1)) (local.get $i) {value})
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))"""


_READ = "(call $read (call $get (i32.const 0)) (local.get $i))"
_POLY = "(local.set $v " + _READ + ")" + "".join(
    "(local.set $v (f32.add (f32.mul (local.get $v) (f32.const 0.875)) (f32.const 0.25)))" for _ in range(32))

BUFFERWORK_WAT = "(module" + _IMPORTS + "".join([
    _pair("twice", f"(f32.mul {_READ} (f32.const 2))"),
    _pair("square", f"(f32.add (f32.mul {_READ} {_READ}) (f32.const 1))"),
    _pair("copy", _READ),
    _pair("polynomial", "(local.get $v)", "(local $v f32)", _POLY),
]) + ")"

MANDELBROT_WAT = "(module" + _IMPORTS + """
  (func (export "wago_gpu.kernel.step") (param $i i32) (local $x f32) (local $y f32) (local $cr f32) (local $ci f32)
    (local.set $x (call $read (call $get (i32.const 2)) (local.get $i)))
    (local.set $y (call $read (call $get (i32.const 3)) (local.get $i)))
    (local.set $cr (call $read (call $get (i32.const 0)) (local.get $i)))
    (local.set $ci (call $read (call $get (i32.const 1)) (local.get $i)))
    (call $write (call $get (i32.const 2)) (local.get $i)
      (f32.add (f32.sub (f32.mul (local.get $x) (local.get $x)) (f32.mul (local.get $y) (local.get $y)))
               (local.get $cr)))
    (call $write (call $get (i32.const 3)) (local.get $i)
      (f32.add (f32.mul (f32.add (local.get $x) (local.get $x)) (local.get $y)) (local.get $ci))))
  (func (export "wago_gpu.cpu.step") (param $n i32)))
"""

SUM_LOOP_WAT = """(module
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferI32" (func $read (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "writeBufferI32" (func $write (param i32 i32 i32)))
  (func (export "wago_gpu.kernel.sum") (param $i i32) (local $n i32) (local $acc i32)
    (local.set $n (call $read (call $get (i32.const 0)) (local.get $i)))
    (block $done (loop $next
      (br_if $done (i32.le_s (local.get $n) (i32.const 0)))
      (local.set $acc (i32.add (local.get $acc) (i32.div_u (i32.mul (local.get $n) (local.get $n)) (i32.const 3))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $next)))
    (call $write (call $get (i32.const 1)) (local.get $i) (local.get $acc)))
  (func (export "wago_gpu.cpu.sum") (param $n i32)))
"""
MANDELBROT_GUEST = Path(__file__).resolve().parents[1] / "examples" / "guests" / "mandelbrot.wasm"

LEGACY_HEAVY_WAT = "(module (func (export \"kernel\") (param $x f32) (result f32) " + (
    "(f32.add (f32.mul " * 32) + "(local.get $x)" + " (f32.const 0.9990234375)) (f32.const 0.0009765625))" * 32 + "))"


def _kernel(name: str, bindings: list[tuple[int, ElementType, Access]]) -> KernelConfig:
    return KernelConfig(1, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(*b) for b in bindings], relaxed_float=True)


F32_IO = [(0, ElementType.F32, Access.READ), (1, ElementType.F32, Access.WRITE)]
I32_IO = [(0, ElementType.I32, Access.READ), (1, ElementType.I32, Access.WRITE)]
U32_IO = [(0, ElementType.U32, Access.READ), (1, ElementType.U32, Access.WRITE)]
MANDEL_IO = [(0, ElementType.F32, Access.READ), (1, ElementType.F32, Access.READ),
             (2, ElementType.F32, Access.READ_WRITE), (3, ElementType.F32, Access.READ_WRITE)]


def _times_us(fn, iterations: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    clock = time.perf_counter_ns
    out = []
    for _ in range(iterations):
        t0 = clock()
        fn()
        out.append((clock() - t0) / 1e3)
    return out


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def cases() -> list[tuple[str, bytes, KernelConfig]]:
    work = bytes(wasmtime.wat2wasm(BUFFERWORK_WAT))
    mandel = bytes(wasmtime.wat2wasm(MANDELBROT_WAT))
    return [("twice", work, _kernel("twice", F32_IO)),
            ("polynomial", work, _kernel("polynomial", F32_IO)),
            ("mandelbrot_step", mandel, _kernel("step", MANDEL_IO)),
            ("sum_loop", bytes(wasmtime.wat2wasm(SUM_LOOP_WAT)), _kernel("sum", I32_IO)),
            ("mandelbrot_loop", MANDELBROT_GUEST.read_bytes(), _kernel("mandel", U32_IO))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--out", help="also append the records to this JSONL file")
    args = parser.parse_args(argv)
    records = []
    common = {"bench": "compile", "python": platform.python_version(), "implementation":
              platform.python_implementation(), "machine": platform.machine()}
    medians = {}
    chosen = cases()
    progress = Progress(len(chosen) + 1, "compile")
    for name, source, kernel in chosen:
        progress.step(name)
        wgsl = compile_buffer_wgsl(source, kernel)
        total = _times_us(lambda: compile_buffer_wgsl(source, kernel), args.iterations, args.warmup)
        module = decode_module(source)
        decode = _times_us(lambda: decode_module(source), args.iterations // 2, args.warmup)
        lower = _times_us(lambda: lower_kernel(module, kernel), args.iterations // 2, args.warmup)
        medians[name] = statistics.median(total)
        records.append({**common, "name": name, "median_us": round(medians[name], 2),
                        "p90_us": round(_p90(total), 2), "iterations": args.iterations, "wgsl_bytes": len(wgsl),
                        "source_bytes": len(source), "decode_median_us": round(statistics.median(decode), 2),
                        "lower_emit_median_us": round(statistics.median(lower), 2)})
    progress.step("legacy_heavy")
    heavy = bytes(wasmtime.wat2wasm(LEGACY_HEAVY_WAT))
    legacy = _times_us(lambda: compile_wgsl(heavy, "kernel"), args.iterations, args.warmup)
    records.append({**common, "name": "legacy_heavy", "median_us": round(statistics.median(legacy), 2),
                    "p90_us": round(_p90(legacy), 2), "iterations": args.iterations,
                    "wgsl_bytes": len(compile_wgsl(heavy, "kernel")), "source_bytes": len(heavy)})
    records.append({**common, "name": "polynomial_vs_target", "median_us": round(medians["polynomial"], 2),
                    "target_us": TARGET_POLYNOMIAL_US,
                    "ratio": round(medians["polynomial"] / TARGET_POLYNOMIAL_US, 3),
                    "meets_target": medians["polynomial"] <= TARGET_POLYNOMIAL_US})
    progress.close()
    lines = [json.dumps(r, sort_keys=True) for r in records]
    print("\n".join(lines), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
