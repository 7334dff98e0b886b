"""CPU kernels (Config.cpu_kernels): one dispatch on 1, 2 and all threads beside the guest's own
runner over plugin buffers, the same loop over guest memory in plain Wasm ("direct") and numpy.

python -m bench.cpu_kernels [--sizes 1000,100000,1000000,10000000] [--repeats 5]
                            [--mandelbrot 1280x720,2560x1440] [--iterations 64] [--threads N] > FILE.jsonl

Kernels twice, poly32 (32 Horner steps) and hash (an integer hash of the float's bits, 4 rounds)
run on bench/guests/cpu_fallback.wat plus a hash kernel added here; Mandelbrot is
examples/guests/mandelbrot.wasm's render_loop (one dispatch of its loop kernel, CPU runner on
status 1) against its render_direct. One JSONL record per (kernel, size, path): cold_ms is the
path's first call (the CPU module's compilation and instantiation included), median_ms/min_ms the
warm repeats; ratio_over_direct divides by the direct loop's median. Every result is checked
outside the timers (bit for bit against the direct loop; numpy for twice and poly32), and a CPU
kernel path whose dispatch did not answer 0 with outcome CPU is an error (exit 1).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment, poly32_numpy, summary, timed
from bench.cpu_fallback import GUEST as FALLBACK_GUEST
from bench.mandelbrot import GUEST as MANDEL_GUEST, MANDEL, STEP
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.host.cputhreads import cpu_thread_count

ROUNDS = 4
_HASH_ROUND = ("(local.set $h (i32.mul (i32.xor (local.get $h) (i32.shr_u (local.get $h) (i32.const 16)))"
               " (i32.const 0x7feb352d)))"
               "(local.set $h (i32.mul (i32.xor (local.get $h) (i32.shr_u (local.get $h) (i32.const 15)))"
               " (i32.const 0x846ca68b)))")
HASH_WAT = f"""
  (func $hash (export "wago_gpu.kernel.hash") (param $i i32) (local $h i32)
    (local.set $h (i32.reinterpret_f32 (call $read (call $get (i32.const 0)) (local.get $i))))
    {_HASH_ROUND * ROUNDS}
    (call $write (call $get (i32.const 1)) (local.get $i) (f32.reinterpret_i32 (local.get $h))))
  (func (export "wago_gpu.cpu.hash") (param $n i32) (local $i i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (loop $next
      (call $hash (local.get $i))
      (br_if $next (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n)))))
  (func (export "direct_hash") (param $n i32) (local $i i32) (local $o i32) (local $h i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (local.set $o (i32.shl (local.get $n) (i32.const 2)))
    (loop $next
      (local.set $h (i32.load (i32.shl (local.get $i) (i32.const 2))))
      {_HASH_ROUND * ROUNDS}
      (i32.store (i32.add (local.get $o) (i32.shl (local.get $i) (i32.const 2))) (local.get $h))
      (br_if $next (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n)))))
"""


def hash_numpy(x: np.ndarray) -> np.ndarray:
    h = x.view(np.uint32).copy()
    for _ in range(ROUNDS):
        h = (h ^ (h >> np.uint32(16))) * np.uint32(0x7FEB352D)
        h = (h ^ (h >> np.uint32(15))) * np.uint32(0x846CA68B)
    return h.view(np.float32)


KERNELS: dict[str, tuple[int, Callable[[np.ndarray], np.ndarray]]] = {
    "twice": (1, lambda x: x * np.float32(2)), "poly32": (2, poly32_numpy), "hash": (3, hash_numpy)}


def guest_wat() -> str:
    text = FALLBACK_GUEST.read_text().rstrip()
    assert text.endswith(")")
    return text[:-1] + HASH_WAT + ")\n"


def kernel_config(kernel_id: int, name: str) -> KernelConfig:
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)],
                        relaxed_float=True)


def path_hosts(threads: list[int], kernels: list[KernelConfig]) -> dict[str, Host]:
    """The guest's runner (cpu_kernels off) and CPU kernels at each thread count, all CPU-only."""
    hosts = {"runner": Host(Config(kernels=kernels, disabled=True))}
    for t in threads:
        hosts[f"cpu_kernels_{t}t"] = Host(Config(kernels=kernels, disabled=True, cpu_kernels=True, cpu_threads=t))
    return hosts


def record(base: dict[str, Any], path: str, cold: float, warm: list[float], direct_ms: float, ok: bool) -> dict[str, Any]:
    s = summary(warm)
    return {**base, "path": path, "cold_ms": cold * 1e3, "median_ms": s["median_ms"], "min_ms": s["min_ms"],
            "runs": s["runs"], "ratio_over_direct": s["median_ms"] / direct_ms if direct_ms else None, "checked": ok}


def elementwise(sizes: list[int], threads: list[int], repeats: int, env: dict[str, Any]) -> int:
    configs = [kernel_config(i, n) for n, (i, _) in KERNELS.items()]
    hosts = path_hosts(threads, configs)
    failures = 0
    try:
        wat = guest_wat()
        insts = {p: h.instantiate(h.compile(wat)) for p, h in hosts.items()}
        for n in sizes:
            x = np.random.default_rng(n).uniform(-1, 1, n).astype(np.float32)
            for inst in insts.values():
                inst.call("reserve", n)
                inst.memory_view()[:4 * n].view(np.float32)[:] = x
                if inst.call("setup", n) != 0:
                    raise SystemExit(f"setup failed at n={n}")
            for name, (kernel_id, reference) in KERNELS.items():
                failures += one_kernel(insts, hosts, name, kernel_id, reference, x, repeats, env)
            for inst in insts.values():
                assert inst.call("teardown") == 0
    finally:
        for h in hosts.values():
            h.close()
    return failures


def one_kernel(insts: dict[str, Any], hosts: dict[str, Host], name: str, kernel_id: int,
               reference: Callable[[np.ndarray], np.ndarray], x: np.ndarray, repeats: int, env: dict[str, Any]) -> int:
    n = x.size
    reps = max(1, min(repeats, int(2e7 // max(n, 1))))
    base = {"bench": "cpu_kernels", "kernel": name, "elements": n, "warm": True, "adapter": "none (CPU only)", **env}
    direct_inst = insts["runner"]
    cold = _once(lambda: direct_inst.call(f"direct_{name}", n))
    direct = timed(lambda: direct_inst.call(f"direct_{name}", n), reps)
    want = direct_inst.memory_view()[4 * n:8 * n].copy()
    direct_ms = summary(direct)["median_ms"]
    numpy_times = timed(lambda: reference(x), reps)
    ok_direct = name == "hash" or bool(np.array_equal(want.view(np.float32), reference(x)))
    emit(record(base, "direct", cold, direct, direct_ms, ok_direct))
    emit(record(base, "numpy", 0.0, numpy_times, direct_ms, bool(np.array_equal(reference(x).view(np.uint8), want))))
    failures = not ok_direct
    for path, inst in insts.items():
        call: Callable[[], Any] = (lambda: inst.call(f"wago_gpu.cpu.{name}", n)) if path == "runner" else \
            (lambda: inst.call("dispatch", kernel_id, n))
        cold = _once(call)
        warm = timed(call, reps)
        last = hosts[path].buffer_snapshot().last_dispatch
        on_cpu = path == "runner" or (last.status == 0 and str(last.outcome) == "CPU")
        assert inst.call("fetch", n) == 0
        ok = on_cpu and bool(np.array_equal(inst.memory_view()[4 * n:8 * n], want))
        failures += not ok
        emit(record(base, path, cold, warm, direct_ms, ok))
    return failures


def _once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def mandelbrot(sizes: list[tuple[int, int]], threads: list[int], iterations: int, repeats: int,
               env: dict[str, Any]) -> int:
    hosts = path_hosts(threads, [STEP, MANDEL])
    failures = 0
    try:
        wasm = MANDEL_GUEST.read_bytes()
        for width, height in sizes:
            n = width * height
            base = {"bench": "cpu_kernels", "kernel": "mandelbrot", "elements": n, "width": width, "height": height,
                    "iterations": iterations, "warm": True, "adapter": "none (CPU only)", **env}
            ref_inst = hosts["runner"].instantiate(hosts["runner"].compile(wasm))
            direct_call = lambda: ref_inst.call("render_direct", width, height, iterations)  # noqa: E731
            cold = _once(direct_call)
            direct = timed(direct_call, repeats)
            want = np.frombuffer(ref_inst.read_memory(ref_inst.call("counts_ptr"), 4 * n), "<u4").copy()
            direct_ms = summary(direct)["median_ms"]
            emit(record(base, "direct", cold, direct, direct_ms, True))
            for path, host in hosts.items():
                inst = host.instantiate(host.compile(wasm))
                call = lambda: inst.call("render_loop", width, height, iterations)  # noqa: E731
                cold = _once(call)
                warm = timed(call, repeats)
                last = host.buffer_snapshot().last_dispatch
                got = np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * n), "<u4")
                on_cpu = path == "runner" or (last.status == 0 and str(last.outcome) == "CPU")
                ok = on_cpu and bool(np.array_equal(got, want))
                failures += not ok
                emit(record(base, path, cold, warm, direct_ms, ok))
                inst.close()
            ref_inst.close()
    finally:
        for h in hosts.values():
            h.close()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000,10000000")
    parser.add_argument("--mandelbrot", default="1280x720,2560x1440", help="WxH,...; empty: skip")
    parser.add_argument("--iterations", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="the 'all' thread count (0: one per core)")
    args = parser.parse_args(argv)
    every = cpu_thread_count(args.threads)
    threads = sorted({1, min(2, every), every})
    env = {**environment(), "cpu_threads_all": every}
    failures = elementwise([int(s) for s in args.sizes.split(",") if s], threads, args.repeats, env)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.mandelbrot.split(",") if s]
    failures += mandelbrot([(w, h) for w, h in sizes], threads, args.iterations, args.repeats, env)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
