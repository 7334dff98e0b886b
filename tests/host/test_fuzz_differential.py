"""The differential fuzzer (fuzz/differential.py): a short seeded run, its plain-memory oracle's
F16 rules, its float classes, and that it reports a wrong GPU answer."""
from __future__ import annotations

import numpy as np
import pytest

from .. import fuzz_support  # noqa: F401 (sys.path)
import differential  # noqa: E402
from floatcmp import FloatClass, classify_f16, classify_f32  # noqa: E402
from hostile_model import f32_to_half, half_to_f32  # noqa: E402


@pytest.mark.slow
def test_a_short_seeded_run_agrees_three_ways():
    stats = differential.fuzz(seconds=60, examples=5, seed=3, long_loops=False)
    assert stats.examples == 5
    assert stats.gpu_ran >= 1 and stats.gpu_ran + stats.traps + sum(stats.fallbacks.values()) == 5


def _accessor_f16():
    import wasmtime

    from plainmem import ACCESSOR_WAT

    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    wat = ACCESSOR_WAT.replace("(func $f2h", '(func $f2h (export "f2h")').replace("(func $h2f", '(func $h2f (export "h2f")')
    trap = wasmtime.Func(store, wasmtime.FuncType([wasmtime.ValType.i32()], []), lambda status: None)
    exports = wasmtime.Instance(store, wasmtime.Module(engine, wat), [trap]).exports(store)
    return store, exports["f2h"], exports["h2f"]


def test_the_plain_oracle_converts_f16_by_the_spec_rules():
    store, f2h, h2f = _accessor_f16()
    vectors = {0x33000000: 0x0000, 0x33000001: 0x0001, 0x3F801000: 0x3C00, 0x3F803000: 0x3C02, 0x477FF000: 0x7C00,
               0xFFC12345: 0x7E00}  # docs/design/abi.md §5.3
    for bits, half in vectors.items():
        assert f32_to_half(bits) == half
        assert f2h(store, float(np.array([bits], "<u4").view("<f4")[0])) == half
    rng = np.random.default_rng(7)
    for bits in rng.integers(0, 1 << 32, 3000):
        value = float(np.array([bits], "<u4").view("<f4")[0])
        assert f2h(store, value) == f32_to_half(int(bits))
    for half in range(0, 65536, 7):
        got = h2f(store, half)
        got_bits = 0x7FC00000 if got != got else int(np.array([got], "<f4").view("<u4")[0])
        assert got_bits == half_to_f32(half)
        is_nan = (half & 0x7C00) == 0x7C00 and half & 0x3FF
        assert f32_to_half(half_to_f32(half)) == (0x7E00 if is_nan else half)


def test_float_classes():
    one, big = 0x3F800000, 0x4B000000
    assert classify_f32(one, one) is FloatClass.EXACT
    assert classify_f32(0x7FC00000, 0xFFC00000) is FloatClass.NAN_QUIETING
    assert classify_f32(0x00000000, 0x7F800000) is FloatClass.CONSTANT_FOLDING  # inf - inf folded to 0
    assert classify_f32(0x00000000, 0x80000000) is FloatClass.CONSTANT_FOLDING
    assert classify_f32(0xBF800000, one) is FloatClass.SIGN_OF_NAN
    assert classify_f32(one + 2, one) is FloatClass.ROUNDING_ULPS
    assert classify_f32(big + 100, big) is FloatClass.REASSOCIATION
    assert classify_f32(0x40000000, one) is FloatClass.OTHER  # 2 for 1
    assert classify_f32(0x7F800000, one) is FloatClass.OTHER  # inf where Wasm is finite
    assert classify_f16(0x3C01, 0x3C00) is FloatClass.ROUNDING_ULPS
    assert classify_f16(0x4000, 0x3C00) is FloatClass.OTHER


def _run(status: int, slots: dict[int, np.ndarray], trap=None) -> differential.HostRun:
    return differential.HostRun(status, "GPU" if status == 0 else "CPU_FALLBACK_READY", "NONE", trap, slots)


def test_a_wrong_gpu_answer_or_a_published_trap_is_reported():
    case = differential.Case("", False, 1, 1, {s: [0] for s in range(8)})
    want = {2: np.array([5], "<u4"), 3: np.array([0x3F800000], "<u4")}
    plain = differential.PlainRun(want, None, -1)
    stats = differential.Stats()
    differential.check_gpu(_run(0, {k: v.copy() for k, v in want.items()}), plain, case, stats)
    with pytest.raises(differential.Mismatch, match="slot 2 element 0"):
        differential.check_gpu(_run(0, {2: np.array([6], "<u4"), 3: want[3]}), plain, case, stats)
    cancelled = differential.Case("", False, 1, 1, {s: [0] for s in range(8)})
    differential.check_gpu(_run(9, {s: a.copy() for s, a in cancelled.arrays().items()}), plain, cancelled, stats)
    assert stats.timeouts == 1  # past run_timeout, nothing published: the spec's answer
    published = {s: a.copy() for s, a in cancelled.arrays().items()}
    published[2][0] = 5
    with pytest.raises(differential.Mismatch, match="CANCELLED dispatch changed slots"):
        differential.check_gpu(_run(9, published), plain, cancelled, stats)
    trapping = differential.PlainRun(want, "wasm trap: UNREACHABLE", 0)
    with pytest.raises(differential.Mismatch, match="where Wasm traps"):
        differential.check_gpu(_run(0, want), trapping, case, stats)
    with pytest.raises(differential.Mismatch, match="runner trapped"):
        differential.check_gpu(_run(1, want, "wasm trap: INTEGER_OVERFLOW"), trapping, case, stats)


def test_an_opaque_kernel_on_a_software_adapter_is_held_to_wasms_floats():
    """Outside the reference subset a software adapter must give Wasm's floats (NaNs aside): a
    folded value there is a compiler bug, not relaxed_float's freedom."""
    case = differential.Case("", True, 1, 1, {s: [0] for s in range(8)})
    plain = differential.PlainRun({3: np.array([0x80000000], "<u4")}, None, -1)  # Wasm: -0
    folded = _run(0, {3: np.array([0x00000000], "<u4")})  # +0: a fold of 0 / -4
    stats = differential.Stats()
    differential.check_gpu(folded, plain, case, stats)  # relaxed_float allows it in the reference subset
    with pytest.raises(differential.Mismatch, match="constant-folding in a kernel whose float operands are opaque"):
        differential.check_gpu(folded, plain, case, stats, exact_floats=True)
    nans = differential.PlainRun({3: np.array([0x7FC00000], "<u4")}, None, -1)
    differential.check_gpu(_run(0, {3: np.array([0xFFC00000], "<u4")}), nans, case, stats, exact_floats=True)
    assert stats.exact_floats == 2 and stats.floats["constant-folding"] == 2


def test_opaque_floats_tells_the_reference_subset_from_the_rest():
    import wasmtime

    write = ("(call $writeBufferF32 (call $getBuffer (i32.const 3)) (local.get $i) (f32.mul "
             "(call $readBufferF32 (call $getBuffer (i32.const 1)) (local.get $i)) (f32.const 0)))")
    straight, blocked = (wasmtime.wat2wasm(differential.guest_wat(body)) for body in (write, f"(block $b {write})"))
    assert not differential.opaque_floats(straight) and differential.opaque_floats(blocked)
    assert not differential.opaque_floats(b"\0asm\1\0\0\0")  # does not compile: no GPU run to hold
