"""A strict_float kernel through real Hosts: it runs on the GPU without relaxed_float consent and gives the
CPU runner's bits exactly (subnormals, NaNs, cancellation, division and square root included), while the
same kernel without the flag still needs consent."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig

from ..gpu_support import Guest, gpu_host
from ..guests import looped_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access


def rd(slot: int) -> str:
    return f"(call $readBufferF32 (call $getBuffer (i32.const {slot})) (local.get $i))"


# out = sqrt(|x * y - x|) / (y + 1e-30) + floor(x) - (x - x), with a comparison feeding a select
BODY = (f"(call $writeBufferF32 (call $getBuffer (i32.const 2)) (local.get $i)"
        f" (select (f32.sub (f32.add (f32.div (f32.sqrt (f32.abs (f32.sub (f32.mul {rd(0)} {rd(1)}) {rd(0)})))"
        f" (f32.add {rd(1)} (f32.const 1e-30))) (f32.floor {rd(0)})) (f32.sub {rd(0)} {rd(0)}))"
        f" (f32.nearest {rd(1)}) (f32.lt {rd(0)} {rd(1)})))")
BINDS = [BindingConfig(0, E.F32, A.READ), BindingConfig(1, E.F32, A.READ), BindingConfig(2, E.F32, A.WRITE)]
STRICT = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", BINDS, strict_float=True)
NATIVE = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", BINDS)


def run(host: Host, x: np.ndarray, y: np.ndarray) -> tuple[int, np.ndarray, str]:
    g = Guest(host, kernels=looped_kernel("k", BODY))
    n = x.size
    handles = [g.create(E.F32, n) for _ in range(3)]
    assert g.set_raw(handles[0], x.tobytes(), n) == 0
    assert g.set_raw(handles[1], y.tobytes(), n, guest=4 * n) == 0
    g.bind(*handles)
    status = g.dispatch(1, n)
    if status == 1:
        g.inst.call("wago_gpu.cpu.k", n)
    assert g.inst.call("copyBuffer32", handles[2], 0, 0, 0, n) == 0
    out = np.frombuffer(g.inst.read_memory(0, 4 * n), dtype=np.uint32).copy()
    return status, out, str(host.buffer_snapshot().last_dispatch.reason_code)


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    n = 4000
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x[: n // 4] = rng.integers(0, 1 << 23, n // 4, dtype=np.uint32)  # subnormals
    y = rng.integers(0x3E000000, 0x41000000, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << 31)
    return x, y


def test_strict_kernel_needs_no_consent_and_is_exact(inputs):
    x, y = inputs
    cpu = Host(Config(kernels=[STRICT], disabled=True))
    gpu = gpu_host(kernels=[STRICT])
    try:
        want_status, want, _ = run(cpu, x, y)
        got_status, got, _ = run(gpu, x, y)
        assert (want_status, got_status) == (1, 0)
        assert gpu.buffer_snapshot().last_dispatch.outcome == "GPU"
        nan = ((want & 0x7FFFFFFF) > 0x7F800000) & ((got & 0x7FFFFFFF) > 0x7F800000)
        assert np.array_equal(got[~nan], want[~nan]) and nan.sum() < x.size // 2
    finally:
        cpu.close()
        gpu.close()


def test_the_same_kernel_without_the_flag_still_needs_consent(inputs):
    x, y = inputs
    gpu = gpu_host(kernels=[NATIVE])
    try:
        status, _, reason = run(gpu, x[:64], y[:64])
        assert (status, reason) == (1, "FLOAT_MODE")
    finally:
        gpu.close()
