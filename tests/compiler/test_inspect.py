"""inspect_module: the host's one call at compile time (docs/design/abi.md §6.2-6.3)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import (MANDEL_CONFIG, TWICE_BODY, A, E, K, buffers_wasm, bufferwork_config, bufferwork_wasm, config,
                      kernel_config, legacy_twice, mandelbrot_wasm, read0, tm, write1)
from wagogpu.compiler import CompileErrorKind, KernelClass, ModuleContract, compile_buffer_wgsl, inspect_module
from wagogpu.compiler import reader as lim
from wagogpu.compiler.contract import MemoryDecl
from wasmgen import FULL, TM, f32add, f32c, i32c, lget

INVALID, UNSUPPORTED, LIMIT = CompileErrorKind.INVALID_CONTRACT, CompileErrorKind.UNSUPPORTED, CompileErrorKind.LIMIT


def test_classification_of_each_kernel():
    src = tm(TWICE_BODY, extra_kernels=[
        ("div", write1(read0() + f32c(2.0) + b"\x95"), ()),  # f32.div: the extended subset
        ("ref", write1(read0() + b"\xd1"), ()),  # ref.is_null: outside it
        ("bad", TM.write("F32", TM.get(0), lget(0), f32c(1.0)), ()),
    ])
    f64 = config((0, E.F64, A.READ))
    kernels = [K, kernel_config("div", kid=2), kernel_config("bad", kid=3), kernel_config("absent", kid=4),
               kernel_config("twice", kid=5), type(K)(6, K.export, K.cpu_export, f64.bindings),
               kernel_config("ref", kid=7)]
    contract = inspect_module(src, kernels)
    assert contract.verified and contract.reason == ""
    assert contract.memories == (MemoryDecl(False, False, False),)
    p = contract.kernels
    assert p[1].cls is KernelClass.ELIGIBLE and p[1].wgsl == compile_buffer_wgsl(src, K)
    assert p[1].read_slots == {0} and p[1].write_slots == {1} and p[1].read_before_write == frozenset()
    assert p[1].is_float and p[1].used_slots == (0, 1) and p[1].translate_seconds > 0
    assert p[2].cls is KernelClass.ELIGIBLE and p[2].is_float and not p[2].error_word and p[2].loop_budget == 0
    assert (p[7].cls, p[7].error_kind, p[7].reason) == (KernelClass.REJECTED, UNSUPPORTED, "unsupported opcode 0xd1")
    assert (p[3].cls, p[3].reason) == (KernelClass.INVALID, "intrinsic violates slot access: writeBufferF32 writes "
                                                            "slot 0, declared READ")
    assert (p[4].cls, p[4].reason) == (KernelClass.INVALID, "wago_gpu.kernel.absent must be a defined (i32) -> () export")
    assert p[5].cls is KernelClass.INVALID
    assert (p[6].cls, p[6].error_kind) == (KernelClass.REJECTED, UNSUPPORTED)
    assert all(p[k].wgsl is None for k in (3, 4, 5, 6, 7))
    assert contract.legacy_wgsl is None and contract.legacy_reason == ""


def test_read_before_write_and_float_facts():
    rw = config((0, E.F32, A.READ), (1, E.F32, A.READ_WRITE))
    body = write1(f32add(TM.read("F32", TM.get(1), lget(0)), read0()))
    plan = inspect_module(tm(body), [rw]).kernels[1]
    assert plan.read_slots == {0, 1} and plan.write_slots == {1} and plan.read_before_write == {1}
    ints = config((0, E.I32, A.READ), (1, E.I32, A.WRITE))
    body = FULL.write("I32", FULL.get(1), lget(0), FULL.read("I32", FULL.get(0), lget(0)))
    plan = inspect_module(tm(body, abi=FULL), [ints]).kernels[1]
    assert plan.cls is KernelClass.ELIGIBLE and not plan.is_float
    plan = inspect_module(tm(body + FULL.write("I32", FULL.get(1), lget(0), i32c(0)), abi=FULL), [ints]).kernels[1]
    assert not plan.is_float
    # an unused F16 binding makes the kernel float (docs/design/abi.md §5.5, conservative)
    plan = inspect_module(tm(body, abi=FULL), [config((0, E.I32, A.READ), (1, E.I32, A.WRITE),
                                                      (2, E.F16, A.READ))]).kernels[1]
    assert plan.is_float


def test_fixtures_inspect():
    contract = inspect_module(buffers_wasm(), [K, kernel_config("addOne", kid=2)])
    assert [p.cls for p in contract.kernels.values()] == [KernelClass.ELIGIBLE] * 2
    plan = inspect_module(mandelbrot_wasm(), [MANDEL_CONFIG]).kernels[1]
    assert plan.read_before_write == {2, 3} and plan.write_slots == {2, 3} and plan.read_slots == {0, 1, 2, 3}
    names = ("twice", "square", "copy", "polynomial")
    contract = inspect_module(bufferwork_wasm(), [bufferwork_config(n, i + 1) for i, n in enumerate(names)])
    assert all(p.cls is KernelClass.ELIGIBLE for p in contract.kernels.values())


def test_unverified_modules():
    for source, reason in [(b"", "invalid Wasm header"), (b"\x00asm\x01\x00\x00\x00\x01\xff", "truncated Wasm"),
                           (tm(TWICE_BODY) + b"\x0c\x01\x00", "unsupported section order"),
                           (bytes(lim.MAX_MODULE_BYTES + 1), "module exceeds decoder byte limit")]:
        contract = inspect_module(source, [K])
        assert contract == ModuleContract(verified=False, reason=reason)


def test_legacy_fields():
    contract = inspect_module(legacy_twice(), [], kernel_export="kernel")
    assert contract.verified and contract.legacy_wgsl and "fn kernel(x: f32) -> f32" in contract.legacy_wgsl
    contract = inspect_module(legacy_twice(), [K], kernel_export="cpu")
    assert contract.legacy_wgsl is None and contract.legacy_reason == "kernel must have type (f32) -> f32"
    assert contract.kernels[1].cls is KernelClass.INVALID
    # the buffer decoder may refuse a module the legacy compiler accepts, and the reverse
    contract = inspect_module(b"junk", [K], kernel_export="kernel")
    assert not contract.verified and contract.legacy_reason == "invalid module header, size, or kernel name"


def test_per_compilation_wgsl_limit(monkeypatch):
    src = bufferwork_wasm()
    kernels = [bufferwork_config("twice", 1), bufferwork_config("polynomial", 2), bufferwork_config("copy", 3)]
    sizes = [len(compile_buffer_wgsl(src, k)) for k in kernels]
    monkeypatch.setattr(lim, "MAX_COMPILATION_WGSL", sizes[0] + sizes[1] - 1)
    plans = inspect_module(src, kernels).kernels
    assert plans[1].cls is KernelClass.ELIGIBLE
    assert (plans[2].cls, plans[2].error_kind, plans[2].reason) == (KernelClass.REJECTED, LIMIT,
                                                                   "per-compilation WGSL limit")
    assert plans[3].cls is KernelClass.ELIGIBLE  # the budget left still covers a small one


def test_never_raises_on_odd_inputs():
    assert not inspect_module(None, [K]).verified  # type: ignore[arg-type]
    assert not inspect_module(12345, [K]).verified  # type: ignore[arg-type]
    contract = inspect_module(bytearray(tm(TWICE_BODY)), [K, "not a kernel"])  # type: ignore[list-item]
    assert contract.verified and contract.kernels[1].cls is KernelClass.ELIGIBLE
    assert contract.kernels[0].cls is KernelClass.INVALID
    assert inspect_module(memoryview(tm(TWICE_BODY)), None).kernels == {}  # type: ignore[arg-type]


@settings(max_examples=60)
@given(st.binary(max_size=300))
def test_inspect_never_raises(data):
    contract = inspect_module(b"\x00asm\x01\x00\x00\x00" + data, [K], kernel_export="kernel")
    assert isinstance(contract, ModuleContract)
    for plan in contract.kernels.values():
        assert (plan.wgsl is not None) == (plan.cls is KernelClass.ELIGIBLE)
