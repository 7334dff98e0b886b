"""compile_buffer_wgsl: accepted kernels, B-1..B-27 of docs/design/compiler.md §6 and docs/design/abi.md §9.2 cases 18-22."""
from __future__ import annotations

import re

import pytest
import wasmtime

from fixtures import (BUFFERWORK_KERNELS, COPY_BODY, MANDEL_CONFIG, POLY_BODY, SQUARE_BODY, TWICE_BODY, A, E,
                      K, bufferwork_config, bufferwork_wasm, buffers_wasm, compile_err, compile_ok, config,
                      kernel_config, lowered, mandelbrot_wasm, raw_kernel_module, read0, spec_size, tm, write1)
from wagogpu.abi.table import ABI_MODULE
from wagogpu.compiler import CompileError, CompileErrorKind, compile_buffer_wgsl, inspect_module
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.compiler.wgsl import INDEX_LINE_1D, INDEX_LINE_2D
from wasmgen import (END, F32, FULL, I32, RETURN, TM, ModuleBuilder, f32add, f32bits, f32c, f32mul, f32sub,
                     i32c, lget, lset, ltee, uleb)

INVALID, UNSUPPORTED, LIMIT = CompileErrorKind.INVALID_CONTRACT, CompileErrorKind.UNSUPPORTED, CompileErrorKind.LIMIT
TWICE_WGSL = """struct Params { count: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> slot0: array<u32>;
@group(0) @binding(2) var<storage, read_write> slot1: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x+id.y*16776960u;
  if (index >= params.count) { return; }
  let v0: u32 = slot0[index];
  let v1: f32 = bitcast<f32>(v0) * bitcast<f32>(0x40000000u);
  slot1[index] = bitcast<u32>(v1);
}
"""


def bindings_of(wgsl: str) -> list[tuple[int, str, int]]:
    return [(int(b), acc, int(s)) for b, acc, s in
            re.findall(r"@binding\((\d+)\) var<storage, (read|read_write)> slot(\d+)", wgsl)]


# ---- B-1 / §9.2 case 18 ------------------------------------------------------------------------
def test_b1_buffers_fixture():
    for kernel in (K, kernel_config("addOne", kid=2)):
        w = compile_buffer_wgsl(buffers_wasm(), kernel)
        for s in ("slot0[index]", "slot1[index] =", "binding(0) var<uniform>"):
            assert s in w
    assert compile_buffer_wgsl(buffers_wasm(), K) == TWICE_WGSL


# ---- B-2 / case 19: stack snapshots ------------------------------------------------------------
B2_BODY = lset(1, f32c(1.0)) + write1(f32add(lget(1), ltee(1, f32c(2.0))))


def test_b2_saved_local_snapshot():
    w = compile_ok(B2_BODY, groups=[(1, F32)])
    assert "bitcast<f32>(0x3f800000u) + bitcast<f32>(0x40000000u)" in w


# ---- B-3, B-5 / case 21: local-declaration bounds before allocation ---------------------------
def test_b3_expanded_local_limit_before_allocation():
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(raw_kernel_module(bytes.fromhex("01 ff ff ff ff 0f 7f 0b")), K)
    assert (e.value.kind, e.value.message) == (LIMIT, "expanded local limit")


def test_b5_local_group_count_limit():
    m = ModuleBuilder()
    m.memory(1)
    m.func([I32], [], END, export="wago_gpu.kernel.double")
    m.bodies[-1] = uleb(len(uleb(16385) + END)) + uleb(16385) + END
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    kernel = config((0, E.F32, A.READ))
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(m.build(), kernel)
    assert (e.value.kind, e.value.message) == (LIMIT, "section entry limit exceeded")
    try:  # the kind survives wrapping (the Python form of errors.As through %w)
        try:
            compile_buffer_wgsl(m.build(), kernel)
        except CompileError as inner:
            raise RuntimeError("compile failed") from inner
    except RuntimeError as outer:
        assert isinstance(outer.__cause__, CompileError) and outer.__cause__.kind == LIMIT


def test_local_limit_boundary():
    # 4,095 declared locals + param 0 = 4,096 is allowed; one more is not
    assert compile_ok(b"", groups=[(4000, I32), (95, F32)])
    assert compile_err(b"", groups=[(4000, I32), (96, F32)]).message == "expanded local limit"


# ---- B-4 / case 20 -----------------------------------------------------------------------------
def test_b4_public_compile_error_kinds():
    missing = kernel_config("missing")
    cases = []
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(buffers_wasm(), missing)
    cases.append((e.value, INVALID))
    source = bytearray(buffers_wasm())
    at = source.find(b"\x94\x10")
    source[at] = 0x95  # f32.div: the reference refused it, the extended subset accepts it
    assert "bitcast<f32>(v0) / " in compile_buffer_wgsl(bytes(source), K)
    source[at] = 0xD1  # ref.is_null: outside both
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(bytes(source), K)
    assert e.value.message == "unsupported opcode 0xd1"
    cases.append((e.value, UNSUPPORTED))
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(bytes(4 * 1024 * 1024 + 1), K)
    assert e.value.message == "module exceeds decoder byte limit"
    cases.append((e.value, LIMIT))
    for err, kind in cases:
        assert err.kind == kind and isinstance(err, Exception) and str(err) == err.message
        wrapped = RuntimeError(f"context: {err}")
        wrapped.__cause__ = err
        assert wrapped.__cause__.kind == kind


# ---- B-6 / case 22: import classification ------------------------------------------------------
def _b6_module(module: str, name: str, result: int, extra_bad_read: bool = False) -> bytes:
    m = ModuleBuilder()
    get = m.import_func(module, name, [I32], [result])
    if extra_bad_read:
        m.import_func(ABI_MODULE, "readBufferF32", [I32, I32], [0x7E])
    m.memory(1)
    body = lset(1, i32c(0) + b"\x10" + uleb(get))
    m.func([I32], [], body + END, [(1, result)], export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    return m.build()


def test_b6_import_classification():
    w = compile_buffer_wgsl(_b6_module(ABI_MODULE, "getBuffer", I32), K)
    assert "var<storage" not in w
    assert spec_size(_b6_module(ABI_MODULE, "getBuffer", I32), K) == 262
    assert compile_buffer_wgsl(_b6_module(ABI_MODULE, "getBuffer", I32, extra_bad_read=True), K) == w
    for module, name, result, kind, message in [
        ("host", "getBuffer", I32, UNSUPPORTED, "call is not a buffer intrinsic"),
        ("wago_gpu_V1", "getBuffer", I32, UNSUPPORTED, "call is not a buffer intrinsic"),
        (ABI_MODULE, "unknownBuffer", I32, UNSUPPORTED, "unknown intrinsic"),
        (ABI_MODULE, "getbuffer", I32, UNSUPPORTED, "unknown intrinsic"),
        (ABI_MODULE, "getBuffer", F32, INVALID,
         "intrinsic signature mismatch: getBuffer is declared (i32) -> (f32), the ABI's is (i32) -> (i32)"),
    ]:
        with pytest.raises(CompileError) as e:
            compile_buffer_wgsl(_b6_module(module, name, result), K)
        assert (e.value.kind, e.value.message) == (kind, message), (module, name)


def test_b6_type_index_out_of_range_is_bad_signature():
    m = ModuleBuilder()
    m.type([I32], [I32])
    m.import_raw(uleb(len(ABI_MODULE)) + ABI_MODULE.encode() + b"\x09getBuffer\x00\x7f")  # type 127
    m.n_func_imports = 1
    m.func([I32], [], i32c(0) + b"\x10\x00" + lset(1) + END, [(1, I32)], export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(m.build(), K)
    assert (e.value.kind, e.value.message) == (INVALID, "intrinsic signature mismatch: getBuffer is declared with "
                                                        "type 127, not a function type of the module, the ABI's is "
                                                        "(i32) -> (i32)")


# ---- B-7: nothing is shared between compilations ------------------------------------------------
def test_b7_repeatable_and_independent():
    src = bufferwork_wasm()
    standalone = {n: compile_buffer_wgsl(src, bufferwork_config(n)) for n in BUFFERWORK_KERNELS}
    module = decode_module(src)
    kept = []
    for _ in range(3):
        for n in BUFFERWORK_KERNELS:
            w = lower_kernel(module, bufferwork_config(n)).wgsl
            assert w == standalone[n]
            kept.append((n, w))
    for n, w in kept:
        assert w == standalone[n]


# ---- B-8: shared values stay linear ------------------------------------------------------------
def test_b8_shared_values_stay_linear():
    body = lset(1, read0()) + b"".join(lset(1, f32add(lget(1), lget(1))) for _ in range(256)) + write1(lget(1))
    src = tm(body, [(1, F32)])
    w = compile_buffer_wgsl(src, K)
    assert w.count(" + ") == 256 and len(w) <= 16384
    assert spec_size(src, K) == 8091


# ---- B-9 / B-10 / B-11 --------------------------------------------------------------------------
def test_b9_fuzz_seed():
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(bytes.fromhex("00 61 73 6d 01 00 00 00 01 ff"), K)
    assert e.value.kind == INVALID and e.value.message == "truncated Wasm"


def test_b10_mandelbrot_step():
    src = mandelbrot_wasm()
    w = compile_buffer_wgsl(src, MANDEL_CONFIG)
    assert "slot2[index] =" in w and "slot3[index] =" in w
    assert bindings_of(w) == [(1, "read", 0), (2, "read", 1), (3, "read_write", 2), (4, "read_write", 3)]
    assert spec_size(src, MANDEL_CONFIG) == 1007
    lk = lower_kernel(decode_module(src), MANDEL_CONFIG)
    assert lk.read_before_write == 0b1100 and lk.writes == 0b1100 and lk.reads == 0b1111


@pytest.mark.parametrize("name, size", [("twice", 515), ("square", 584), ("copy", 439), ("polynomial", 3649)])
def test_b11_bufferwork_sizes(name, size):
    src = bufferwork_wasm()
    assert spec_size(src, bufferwork_config(name)) == size
    w = compile_buffer_wgsl(src, bufferwork_config(name))
    if name == "copy":
        assert "  slot1[index] = v0;\n" in w and "bitcast" not in w
    if name == "polynomial":
        assert w.count("0x3f600000u") == 32 and w.count("0x3e800000u") == 32


def test_spec_sizes_standalone_modules():
    assert spec_size(tm(TWICE_BODY), K) == 515
    assert spec_size(tm(SQUARE_BODY), K) == 584
    assert spec_size(tm(COPY_BODY), K) == 439
    assert spec_size(tm(POLY_BODY, [(1, F32)]), K) == 3649
    assert spec_size(tm(b""), K) == 262


def test_index_line_is_the_only_difference():
    src = tm(POLY_BODY, [(1, F32)])
    one_d = lower_kernel(decode_module(src), K, grid_2d=False).wgsl
    assert compile_buffer_wgsl(src, K) == one_d.replace(INDEX_LINE_1D, INDEX_LINE_2D)


# ---- B-12 / B-13: seeds and deferred values -----------------------------------------------------
RW1 = config((0, E.F32, A.READ), (1, E.F32, A.READ_WRITE))


def read1() -> bytes:
    return TM.read("F32", TM.get(1), lget(0))


def test_b12_seed_rules():
    assert lowered(TWICE_BODY, RW1).read_before_write == 0
    assert lowered(write1(f32add(read1(), f32c(1.0))), RW1).read_before_write == 0b10
    store_first = write1(f32c(3.0)) + write1(f32add(read1(), f32c(1.0)))
    lk = lowered(store_first, RW1)
    assert lk.read_before_write == 0
    assert lk.wgsl.index("slot1[index] = 0x40400000u;") < lk.wgsl.index("let v0: u32 = slot1[index];")
    saved = lset(1, read1()) + write1(f32c(3.0)) + write1(f32add(lget(1), f32c(1.0)))
    assert lowered(saved, RW1, groups=[(1, F32)]).read_before_write == 0b10


def test_b13_deferred_values():
    body = lset(1, f32add(read1(), f32c(1.0))) + write1(f32c(3.0)) + write1(lget(1))
    w = compile_ok(body, RW1, groups=[(1, F32)])
    assert w.index("let v0: u32 = slot1[index];") < w.index("slot1[index] = 0x40400000u;") < w.index("let v1: f32")
    w = compile_ok(write1(f32sub(lget(1), f32c(1.0))), RW1, groups=[(1, F32)])
    assert "bitcast<f32>(0x00000000u) - bitcast<f32>(0x3f800000u)" in w


# ---- B-14 .. B-16 --------------------------------------------------------------------------------
def test_b14_saved_float_bits_are_exact():
    kernel = config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (2, E.F32, A.WRITE))
    body = lset(1, read0()) + write1(f32add(lget(1), f32c(1.0))) + TM.write("F32", TM.get(2), lget(0), lget(1))
    w = compile_ok(body, kernel, groups=[(1, F32)])
    assert "  slot2[index] = v0;\n" in w


INT_TYPES = ["I8", "U8", "I16", "U16", "I32", "U32"]


def b15_body(t: str) -> bytes:
    restore = lset(1, lget(0)) + lset(0, i32c(0)) + lset(0, lget(1))
    return (restore + FULL.write(t, FULL.get(0), lget(0), i32c(-1))
            + FULL.write(t, FULL.get(1), lget(0), lget(1)))


@pytest.mark.parametrize("t", INT_TYPES)
def test_b15_integer_stores(t):
    kernel = config((0, E[t], A.WRITE), (1, E[t], A.WRITE))
    w = compile_ok(b15_body(t), kernel, groups=[(1, I32)], abi=FULL)
    mask = {"I8": "255u", "U8": "255u", "I16": "65535u", "U16": "65535u"}.get(t)
    if mask:
        assert f"slot0[index] = (0xffffffffu & {mask});" in w and f"slot1[index] = (index & {mask});" in w
    else:
        assert "slot0[index] = 0xffffffffu;" in w and "slot1[index] = index;" in w
    assert not lowered(b15_body(t), kernel, groups=[(1, I32)], abi=FULL).is_float


@pytest.mark.parametrize("t, expr", [
    ("I8", "bitcast<u32>(bitcast<i32>(slot0[index] << 24u) >> 24u)"),
    ("I16", "bitcast<u32>(bitcast<i32>(slot0[index] << 16u) >> 16u)"),
    ("U8", "(slot0[index] & 255u)"), ("U16", "(slot0[index] & 65535u)"),
    ("I32", "slot0[index]"), ("U32", "slot0[index]")])
def test_integer_loads(t, expr):
    kernel = config((0, E[t], A.READ), (1, E.U32, A.WRITE))
    body = FULL.write("U32", FULL.get(1), lget(0), FULL.read(t, FULL.get(0), lget(0)))
    w = compile_ok(body, kernel, abi=FULL)
    assert f"  let v0: u32 = {expr};\n  slot1[index] = v0;\n" in w


def test_b16_f16_patterns():
    f16 = config((0, E.F16, A.READ), (1, E.F16, A.WRITE))
    w = compile_ok(FULL.write("F16", FULL.get(1), lget(0), FULL.read("F16", FULL.get(0), lget(0))), f16, abi=FULL)
    assert "half_to_f32(" in w and "f32_to_half(" in w and "fn half_to_f32" in w and "fn f32_to_half" in w
    widen = config((0, E.F16, A.READ), (1, E.F32, A.WRITE))
    w = compile_ok(FULL.write("F32", FULL.get(1), lget(0), FULL.read("F16", FULL.get(0), lget(0))), widen, abi=FULL)
    assert "  let v0: u32 = half_to_f32(slot0[index]);\n  slot1[index] = v0;\n" in w
    narrow = config((0, E.F32, A.READ), (1, E.F16, A.WRITE))
    w = compile_ok(FULL.write("F16", FULL.get(1), lget(0), FULL.read("F32", FULL.get(0), lget(0))), narrow, abi=FULL)
    assert "slot1[index] = f32_to_half(v0);" in w
    # the helper is there for any declared F16 binding, even an unused one, and never has float literals
    unused = config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (2, E.F16, A.READ))
    w = compile_ok(TWICE_BODY, unused)
    assert "fn half_to_f32" in w and "slot2" not in w
    helper = w[w.index("\nfn half_to_f32"):w.index("@compute")]
    assert not re.search(r"\d\.\d|\bf16\b|inf|nan", helper, re.I)
    assert "fn half_to_f32" not in compile_ok(TWICE_BODY)


# ---- B-17 .. B-21 --------------------------------------------------------------------------------
def test_b17_in_place():
    kernel = config((0, E.F32, A.READ_WRITE))
    w = compile_ok(TM.write("F32", TM.get(0), lget(0), f32add(read0(), f32c(1.0))), kernel)
    assert bindings_of(w) == [(1, "read_write", 0)]


def test_b18_unused_declared_alias():
    kernel = config((0, E.F32, A.READ_WRITE), (7, E.F32, A.WRITE))
    w = compile_ok(TM.write("F32", TM.get(0), lget(0), f32c(7.0)), kernel)
    assert bindings_of(w) == [(1, "read_write", 0)] and "slot7" not in w


def test_b19_unused_permissions_do_not_publish():
    kernel = config((0, E.F32, A.READ_WRITE), (1, E.F32, A.WRITE), (7, E.F32, A.WRITE))
    w = compile_ok(write1(read0()), kernel)
    assert bindings_of(w) == [(1, "read", 0), (2, "read_write", 1)] and "slot7" not in w


def test_b20_b21_outputs():
    kernel = config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (2, E.F32, A.WRITE))
    w = compile_ok(write1(f32c(2.0)) + TM.write("F32", TM.get(2), lget(0), f32c(3.0)), kernel)
    assert bindings_of(w) == [(1, "read_write", 1), (2, "read_write", 2)]
    assert compile_ok(write1(f32c(1.0))) and compile_ok(write1(read0()))


# ---- B-23 / B-24: storage examples ----------------------------------------------------------------
def test_b23_empty_kernel_and_shared_memory():
    assert spec_size(tm(b""), K) == 262
    m = TM.builder(memory=False)
    m.import_raw(b"\x03env\x06memory\x02\x03\x01\x01")  # (memory 1 1 shared)
    m.func([I32], [], END, export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    src = m.build()
    assert compile_buffer_wgsl(src, K)
    contract = inspect_module(src, [K])
    assert contract.verified and contract.memories[0].shared and contract.memories[0].imported


F16_WAT = """
(module
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF16" (func $read (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF16" (func $write (param i32 i32 f32)))
  (memory 1)
  (func (export "wago_gpu.kernel.inc") (param $i i32)
    (call $write (call $get (i32.const 0)) (local.get $i)
      (f32.add (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 1))))
  (func (export "wago_gpu.cpu.inc") (param $n i32)))
"""
MEMORY64_WAT = """
(module
  (memory i64 1)
  (func (export "wago_gpu.kernel.empty") (param i32))
  (func (export "wago_gpu.cpu.empty") (param i32)))
"""
GC_WAT = """
(module
  (type $array (array (mut f32)))
  (memory 1)
  (func (export "wago_gpu.kernel.empty") (param i32))
  (func (export "wago_gpu.cpu.empty") (param i32))
  (func $other (local (ref null $array))))
"""


def test_b24_storage_examples():
    f16 = kernel_config("inc", ((0, E.F16, A.READ_WRITE),))
    w = compile_buffer_wgsl(wasmtime.wat2wasm(F16_WAT), f16)
    assert "fn f32_to_half" in w and bindings_of(w) == [(1, "read_write", 0)]
    empty = kernel_config("empty", ((0, E.F32, A.READ),))
    mem64 = wasmtime.wat2wasm(MEMORY64_WAT)
    assert compile_buffer_wgsl(mem64, empty)
    assert inspect_module(mem64, [empty]).memories[0].is64
    assert compile_buffer_wgsl(wasmtime.wat2wasm(GC_WAT), empty)


# ---- B-25 .. B-27 ----------------------------------------------------------------------------------
def test_b25_tinygo_tee():
    body = write1(f32add(ltee(1, read0()), lget(1)))
    w = compile_ok(body, groups=[(1, F32)])
    assert "  let v1: f32 = bitcast<f32>(v0) + bitcast<f32>(v0);\n" in w


def test_b26_copy_and_double():
    assert "slot1[index] = v0;" in compile_ok(COPY_BODY)
    assert compile_ok(TWICE_BODY) == TWICE_WGSL


def test_b27_index_restored_through_locals():
    restore = lset(1, lget(0)) + lset(0, i32c(0)) + lset(0, lget(1))
    w = compile_ok(restore + TWICE_BODY, groups=[(1, I32)])
    assert w == TWICE_WGSL
    # and the saved copy itself is the index too
    via_copy = lset(1, lget(0)) + TM.write("F32", TM.get(1), lget(1), f32mul(TM.read("F32", TM.get(0), lget(1)),
                                                                           f32c(2.0)))
    assert compile_ok(via_copy, groups=[(1, I32)]) == TWICE_WGSL


def test_b34_b35_handles_and_zero_locals():
    body = lset(1, TM.get(1)) + TM.write("F32", lget(1), lget(0), f32c(2.0))
    assert "  slot1[index] = 0x40000000u;\n" in compile_ok(body, groups=[(1, I32)])
    # a never-assigned i32 local is the constant 0, usable as a getBuffer slot
    body = write1(TM.read("F32", TM.get(lget(1)), lget(0)))
    assert "slot1[index] = v0;" in compile_ok(body, groups=[(1, I32)])


def test_b38_void_return_before_end():
    with_return = TWICE_BODY + RETURN
    assert compile_ok(with_return) == compile_ok(TWICE_BODY)


def test_constants_are_bit_exact():
    for bits in (0x7FC12345, 0x80000000, 0x00000001, 0x7F800000, 0xFF800000, 0):
        w = compile_ok(write1(f32bits(bits)))
        assert f"  slot1[index] = 0x{bits:08x}u;\n" in w
        w = compile_ok(write1(f32mul(read0(), f32bits(bits))))
        assert f"bitcast<f32>(0x{bits:08x}u)" in w


def test_no_guest_name_reaches_wgsl():
    name = "x}\n@compute fn evil() {"
    kernel = kernel_config(name)
    m = TM.builder()
    m.func([I32], [], TWICE_BODY + END, export=f"wago_gpu.kernel.{name}")
    m.func([I32], [], END, export=f"wago_gpu.cpu.{name}")
    m.export("evil_memory_name", 2, 0)
    w = compile_buffer_wgsl(m.build(), kernel)
    assert "evil" not in w and name not in w
    assert w == TWICE_WGSL
