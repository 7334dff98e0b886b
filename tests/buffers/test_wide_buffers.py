"""I64, U64 and F64 buffers on the GPU: two u32 words per element, raw bits both ways. The same guest
runs through a disabled Host (its CPU runner) and through the adapter: every dispatch must run on the
GPU and give the CPU's bits, for whole and partial counts, after scalar writes (dirty ranges uploaded
at their offset), through parked readbacks, and a trapping i64 division falls back with nothing
published."""
from __future__ import annotations

import numpy as np
import pytest
import wasmtime

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.buffers import TransferTuning

from ..gpu_support import Guest, gpu_host
from ..guests import looped_kernel as kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access
R = "(call $getBuffer (i32.const {}))"


def rd(t: str, slot: int) -> str:
    return f"(call $readBuffer{t} {R.format(slot)} (local.get $i))"


def wr(t: str, slot: int, value: str) -> str:
    return f"(call $writeBuffer{t} {R.format(slot)} (local.get $i) {value})"


KERNELS = (
    # slot 1 = slot 0 * golden ^ (slot 0 >>u 29) + i, in i64
    kernel("mix", wr("I64", 1, f"(i64.add (i64.xor (i64.mul {rd('I64', 0)} (i64.const 0x9E3779B97F4A7C15))"
                               f" (i64.shr_u {rd('I64', 0)} (i64.const 29))) (i64.extend_i32_u (local.get $i)))"))
    # F64 bits out as U64, and negated by its sign bit (no f64 arithmetic: no shader-f64 needed)
    + kernel("flip", wr("U64", 3, f"(i64.reinterpret_f64 {rd('F64', 2)})")
             + wr("F64", 4, f"(f64.reinterpret_i64 (i64.xor (i64.reinterpret_f64 {rd('F64', 2)})"
                             " (i64.const 0x8000000000000000)))"))
    + kernel("div", wr("I64", 1, f"(i64.div_s (i64.const 1000000007) {rd('I64', 0)})"))
)
KERNEL_CONFIGS = [
    KernelConfig(1, "wago_gpu.kernel.mix", "wago_gpu.cpu.mix", [BindingConfig(0, E.I64, A.READ),
                                                                BindingConfig(1, E.I64, A.READ_WRITE)]),
    KernelConfig(2, "wago_gpu.kernel.flip", "wago_gpu.cpu.flip",
                 [BindingConfig(2, E.F64, A.READ), BindingConfig(3, E.U64, A.WRITE), BindingConfig(4, E.F64, A.WRITE)],
                 relaxed_float=True),
    KernelConfig(3, "wago_gpu.kernel.div", "wago_gpu.cpu.div", [BindingConfig(0, E.I64, A.READ),
                                                               BindingConfig(1, E.I64, A.READ_WRITE)]),
]
CPU_RUNNER = {1: "wago_gpu.cpu.mix", 2: "wago_gpu.cpu.flip", 3: "wago_gpu.cpu.div"}


@pytest.fixture(scope="module")
def hosts():
    cpu = Host(Config(kernels=KERNEL_CONFIGS, disabled=True))
    gpu = gpu_host(kernels=KERNEL_CONFIGS, tuning=TransferTuning(park_min_bytes=4096))
    yield cpu, gpu
    cpu.close()
    gpu.close()


class Wide(Guest):
    def put(self, handle: int, words64: np.ndarray) -> None:
        assert self.set_raw(handle, words64.astype("<u8").tobytes(), words64.size) == 0

    def take(self, handle: int, count: int) -> np.ndarray:
        assert self.inst.call("copyBuffer32", handle, 0, 0, 0, count) == 0
        return np.frombuffer(self.inst.read_memory(0, 8 * count), dtype="<u8").copy()

    def run(self, kernel_id: int, count: int) -> int:
        status = self.dispatch(kernel_id, count)
        if status == 1:
            self.inst.call(CPU_RUNNER[kernel_id], count)
        return status


def trunc_div(a: int, b: int) -> int:
    """Wasm's i64.div_s: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def make(host: Host) -> Wide:
    return Wide(host, kernels=KERNELS)


def values64(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 1 << 63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    v[:6] = [0, 1, 0xFFFFFFFFFFFFFFFF, 0x8000000000000000, 0x7FFFFFFFFFFFFFFF, 0x00000000FFFFFFFF][:min(6, n)]
    return v >> rng.integers(0, 64, n, dtype=np.uint64)


def mix_run(host: Host, n: int, count: int, pokes: list[tuple[int, int]]) -> tuple[list[int], np.ndarray]:
    g = make(host)
    src, dst = g.create(E.I64, n), g.create(E.I64, n)
    g.put(src, values64(n, n))
    g.put(dst, np.full(n, 0x0123456789ABCDEF, np.uint64))
    g.bind(src, dst)
    statuses = [g.run(1, count)]
    for index, value in pokes:  # scalar writes between dispatches: a dirty range of the input
        g.inst.call("writebitsI64", src, index, value)
    statuses.append(g.run(1, count))
    return statuses, g.take(dst, n)


@pytest.mark.parametrize("n, count", [(1, 1), (300, 300), (300, 257), (1100, 1100)])
def test_i64_kernel_matches_the_cpu_runner(hosts, n, count):
    cpu, gpu = hosts
    pokes = [(n // 3, -5), (n // 2, 1 << 40), (n - 2, -(1 << 63))] if n > 2 else [(0, -5)]
    want_status, want = mix_run(cpu, n, count, pokes)
    got_status, got = mix_run(gpu, n, count, pokes)
    assert want_status == [1, 1] and got_status == [0, 0]
    assert gpu.buffer_snapshot().last_dispatch.outcome == "GPU"
    assert np.array_equal(got, want)
    assert (got[count:] == 0x0123456789ABCDEF).all()  # elements past the count keep their contents


def flip_run(host: Host, n: int) -> tuple[int, np.ndarray, np.ndarray]:
    g = make(host)
    src, bits, neg = g.create(E.F64, n), g.create(E.U64, n), g.create(E.F64, n)
    patterns = values64(n, 7)
    patterns[:4] = [0x7FF8000000000001, 0xFFF0000000000000, 0x0000000000000001, 0x8000000000000000][:min(4, n)]
    g.put(src, patterns)
    g.bind(src, bits, neg, slots=[2, 3, 4])
    status = g.run(2, n)
    return status, g.take(bits, n), g.take(neg, n)


def test_f64_and_u64_bits_travel_unchanged(hosts):
    cpu, gpu = hosts
    want = flip_run(cpu, 700)
    got = flip_run(gpu, 700)
    assert (want[0], got[0]) == (1, 0)
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])
    assert np.array_equal(got[2], got[1] ^ np.uint64(1 << 63))  # NaN payloads and signs kept


def test_trapping_i64_division_falls_back_with_nothing_published(hosts):
    _, gpu = hosts
    g = make(gpu)
    n = 600
    src, dst = g.create(E.I64, n), g.create(E.I64, n)
    data = values64(n, 3) | np.uint64(1)
    g.put(src, data)
    g.bind(src, dst)
    assert g.run(3, n) == 0
    first = g.take(dst, n)
    assert first.view(np.int64).tolist() == [trunc_div(1000000007, x) for x in data.view(np.int64).tolist()]
    data[n // 3] = 0
    g.put(src, data)
    assert g.dispatch(3, n) == 1  # the kernel raised the trap: nothing committed
    assert np.array_equal(g.take(dst, n), first)
    with pytest.raises(wasmtime.Trap):
        g.inst.call(CPU_RUNNER[3], n)
