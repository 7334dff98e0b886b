"""What exactness costs on the GPU: the 32-step f32 polynomial with native floats (relaxed_float) against
strict_float (exact integer-coded IEEE arithmetic), and an i64 hash (murmur3's fmix64, two-word
emulation) over U64 buffers; warm dispatches of resident buffers, median of --repeats.

python3 -m bench.float_modes [--sizes 1000000] [--repeats 9] [--software]
One JSONL record per (kernel, mode, size), naming the adapter; results are checked outside the timers
(strict and i64 bit for bit against numpy, native within 8e-6 relative). Exit 1 when a check fails or a
dispatch did not run on the GPU. --software allows lavapipe (where shaders run on the CPU, so the
strict/native ratio is an instruction-count ratio, not a GPU's).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench.common import emit, environment, poly32_numpy, summary, timed
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

GUEST = Path(__file__).parent / "guests" / "cpu_fallback.wat"
F32_BINDINGS = [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)]
MODES = {"native": {"relaxed_float": True}, "strict": {"strict_float": True}}
FMIX64 = """(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferU64" (func $read (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "writeBufferU64" (func $write (param i32 i32 i64)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $out (mut i32) (i32.const 0))
  (func (export "reserve") (param $n i32)
    (drop (memory.grow (i32.shr_u (i32.shl (local.get $n) (i32.const 4)) (i32.const 16)))))
  (func (export "setup") (param $n i32) (result i32) (local $in i32)
    (local.set $in (i32.wrap_i64 (call $create (i32.const 10) (local.get $n))))
    (global.set $out (i32.wrap_i64 (call $create (i32.const 10) (local.get $n))))
    (drop (call $bind (i32.const 0) (local.get $in)))
    (drop (call $bind (i32.const 1) (global.get $out)))
    (call $set (local.get $in) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
  (func (export "fetch") (param $n i32) (result i32)
    (call $copy (global.get $out) (i32.const 0) (i32.const 0) (i32.shl (local.get $n) (i32.const 3)) (local.get $n)))
  (func (export "dispatch") (param $k i32) (param $n i32) (result i32) (call $dispatch (local.get $k) (local.get $n)))
  (func $fmix (export "wago_gpu.kernel.fmix64") (param $i i32) (local $h i64)
    (local.set $h (call $read (call $get (i32.const 0)) (local.get $i)))
    (local.set $h (i64.mul (i64.xor (local.get $h) (i64.shr_u (local.get $h) (i64.const 33)))
                           (i64.const 0xff51afd7ed558ccd)))
    (local.set $h (i64.mul (i64.xor (local.get $h) (i64.shr_u (local.get $h) (i64.const 33)))
                           (i64.const 0xc4ceb9fe1a85ec53)))
    (call $write (call $get (i32.const 1)) (local.get $i)
      (i64.xor (local.get $h) (i64.shr_u (local.get $h) (i64.const 33)))))
  (func (export "wago_gpu.cpu.fmix64") (param $n i32) (local $i i32)
    (block $done (loop $next (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $fmix (local.get $i)) (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $next)))))
"""


def fmix64_numpy(h: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(33))) * np.uint64(0xFF51AFD7ED558CCD)
        h = (h ^ (h >> np.uint64(33))) * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))

# Five copies of the U64 data count against the 256 MiB instance buffer budget
# (Config.max_instance_buffer_bytes, the reference's maximum): the two buffers' host records, their
# GPU buffers and the readback staging. 10M elements (400 MB) would exceed it, so the hash runs at
# most this many elements (240 MiB; the record's `elements` says how many).
FMIX64_MAX_ELEMENTS = 6 << 20


def measure(config: Config, guest: str, kernel_id: int, x: np.ndarray, repeats: int) -> tuple[dict, np.ndarray, str]:
    """Warm dispatch times of one kernel over resident buffers (with the adapter's name), the
    output, and the last dispatch's outcome."""
    n = x.size
    with Host(config) as host:
        inst = host.instantiate(host.compile(guest))
        inst.call("reserve", n)
        inst.memory_view()[:x.nbytes] = x.view(np.uint8)
        if inst.call("setup", n) != 0:
            raise SystemExit(f"setup failed at n={n}")
        inst.call("dispatch", kernel_id, n)  # cold: upload, pipeline's first use
        times = timed(lambda: inst.call("dispatch", kernel_id, n), repeats)
        snapshot = host.buffer_snapshot()
        outcome = str(snapshot.last_dispatch.outcome)
        if outcome != "GPU":
            print(f"float_modes: n={n}: {outcome}: {snapshot.last_dispatch.reason}", file=sys.stderr)
        assert inst.call("fetch", n) == 0
        out = inst.memory_view()[x.nbytes:2 * x.nbytes].view(x.dtype).copy()
        return {**summary(times), "adapter": snapshot.device}, out, outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--software", action="store_true", help="allow a software adapter (lavapipe)")
    args = parser.parse_args(argv)
    env = environment()
    device = {"allow_software_adapter": args.software, "require_gpu": not args.software}
    failures = 0
    for n in (int(s) for s in args.sizes.split(",")):
        x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
        want = poly32_numpy(x)
        medians = {}
        for mode, flags in MODES.items():
            kernel = KernelConfig(2, "wago_gpu.kernel.poly32", "wago_gpu.cpu.poly32", F32_BINDINGS, **flags)
            times, got, outcome = measure(Config(kernels=[kernel], **device), GUEST.read_text(), 2, x, args.repeats)
            exact = mode == "strict"
            ok = outcome == "GPU" and (np.array_equal(got, want) if exact else
                                       bool(np.all(np.abs(got - want) <= 8e-6 * np.maximum(1, np.abs(want)))))
            failures += not ok
            medians[mode] = times["median_ms"]
            emit({"bench": "float_modes", "kernel": "poly32", "mode": mode, "elements": n, "outcome": outcome,
                  "checked": ok, "dispatch_ms": times["median_ms"], "min_ms": times["min_ms"],
                  "adapter": times["adapter"], **env})
        emit({"bench": "float_modes", "kernel": "poly32", "elements": n,
              "ratio_strict_over_native": medians["strict"] / medians["native"]})
        n = min(n, FMIX64_MAX_ELEMENTS)
        h = np.random.default_rng(n + 1).integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        kernel = KernelConfig(1, "wago_gpu.kernel.fmix64", "wago_gpu.cpu.fmix64",
                              [BindingConfig(0, ElementType.U64, Access.READ),
                               BindingConfig(1, ElementType.U64, Access.WRITE)])
        times, got, outcome = measure(Config(kernels=[kernel], **device), FMIX64, 1, h, args.repeats)
        ok = outcome == "GPU" and np.array_equal(got, fmix64_numpy(h))
        failures += not ok
        emit({"bench": "float_modes", "kernel": "fmix64", "mode": "i64", "elements": n, "outcome": outcome,
              "checked": ok, "dispatch_ms": times["median_ms"], "min_ms": times["min_ms"], "adapter": times["adapter"],
              **env})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
