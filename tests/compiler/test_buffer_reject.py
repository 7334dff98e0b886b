"""compile_buffer_wgsl rejections: B-22, B-28..B-49, the config checks and the rejection list §1.3.8."""
from __future__ import annotations

import pytest

from fixtures import TWICE_BODY, A, E, K, compile_err, compile_ok, config, lowered, raw_kernel_module, read0, tm, write1
from wagogpu.compiler import CompileError, CompileErrorKind, compile_buffer_wgsl
from wagogpu.compiler import reader as lim
from wagogpu.config import BindingConfig, KernelConfig
from wasmgen import (END, F32, FULL, I32, RETURN, TM, ModuleBuilder, call, f32add, f32c, f32mul, i32c, lget, lset,
                     ltee, uleb)

INVALID, UNSUPPORTED, LIMIT = CompileErrorKind.INVALID_CONTRACT, CompileErrorKind.UNSUPPORTED, CompileErrorKind.LIMIT


def expect(err: CompileError, kind: CompileErrorKind, message: str) -> None:
    assert (err.kind, err.message) == (kind, message)


W0_MESSAGE = "intrinsic violates slot access: writeBufferF32 writes slot 0, declared READ"


def read1() -> bytes:
    return TM.read("F32", TM.get(1), lget(0))


# ---- access contract ---------------------------------------------------------------------------
def test_b22_b28_write_to_read_slot():
    expect(compile_err(TM.write("F32", TM.get(1), lget(0), f32c(2.0)), config((1, E.F32, A.READ))),
           INVALID, "intrinsic violates slot access: writeBufferF32 writes slot 1, declared READ")
    expect(compile_err(TM.write("F32", TM.get(0), lget(0), f32c(2.0))), INVALID, "intrinsic violates slot access: writeBufferF32 writes slot 0, declared READ")


def test_b29_read_from_write_slot():
    expect(compile_err(write1(read1())), INVALID, "intrinsic violates slot access: readBufferF32 reads slot 1, "
                                                  "declared WRITE")


def test_b30_undeclared_slot():
    for slot in (2, 8, 0xFFFFFFFF):  # the message names the slot asked for and the declared ones
        expect(compile_err(TM.write("F32", TM.get(slot), lget(0), f32c(1.0))), INVALID,
               f"undeclared slot: getBuffer({slot}), the kernel declares slots 0, 1")


def test_b31_slot_must_be_constant():
    expect(compile_err(write1(TM.read("F32", TM.get(lget(0)), lget(0)))), UNSUPPORTED, "slot must be constant")
    # getBuffer with an empty stack: the constant test comes first, so this is Unsupported too
    expect(compile_err(TM.get(b"") + lset(1), groups=[(1, I32)]), UNSUPPORTED, "slot must be constant")


def test_b32_b33_element_must_be_the_index():
    element = "element must be the original invocation index"
    expect(compile_err(TM.write("F32", TM.get(1), i32c(0), f32c(1.0))), UNSUPPORTED, element)
    expect(compile_err(lset(0, i32c(0)) + TWICE_BODY), UNSUPPORTED, element)
    expect(compile_err(TM.write("F32", TM.get(1), lget(1), f32c(1.0)), groups=[(1, I32)]), UNSUPPORTED, element)
    # a handle or a loaded integer is not the index either
    kernel = config((0, E.I32, A.READ), (1, E.I32, A.WRITE))
    body = FULL.write("I32", FULL.get(1), FULL.read("I32", FULL.get(0), lget(0)), i32c(1))
    expect(compile_err(body, kernel, abi=FULL), UNSUPPORTED, element)
    expect(compile_err(TM.write("F32", TM.get(1), TM.get(0), f32c(1.0))), UNSUPPORTED, element)


def test_handle_must_be_selected_slot():
    handle = "handle is not a selected buffer slot"
    expect(compile_err(TM.write("F32", i32c(1), lget(0), f32c(1.0))), UNSUPPORTED, handle)
    expect(compile_err(TM.write("F32", lget(0), lget(0), f32c(1.0))), UNSUPPORTED, handle)
    # the check order puts handle/element before access, so a non-index write to a READ slot is Unsupported
    expect(compile_err(TM.write("F32", TM.get(0), i32c(0), f32c(1.0))), UNSUPPORTED,
           "element must be the original invocation index")
    # a write with an empty stack reports the handle first
    expect(compile_err(call(TM.index("writeBufferF32"))), UNSUPPORTED, handle)


def test_b36_unsupported_opcodes():
    # B-36's f32.div, i32.add, drop and block are in the extended subset now (tests/compiler/test_flow.py),
    # and so are loads, globals and calls to defined functions (tests/compiler/test_calls.py), i64 and f64
    # (tests/compiler/test_int64.py); memory.size and grow, tables and references stay outside it, reached
    # before or after a switch to the extended lowering
    for code, op in [(b"\x3f\x00", 0x3F), (lget(0) + b"\x40\x00", 0x40), (lget(0) + b"\x25\x00", 0x25),
                     (read0() + b"\xd1", 0xd1), (lget(0) + lget(0) + b"\x6a\x3f\x00", 0x3F),
                     (b"\x02\x40\x3f\x00", 0x3F), (b"\x42\x00\x3f\x00", 0x3F)]:
        expect(compile_err(code), UNSUPPORTED, f"unsupported opcode 0x{op:02x}")
    expect(compile_err(b"\x11\x00\x00"), UNSUPPORTED, "call_indirect (its target is known only at run time)")
    # a store outside the stack frame, and a global the module does not have (wasmtime would refuse it)
    expect(compile_err(lget(0) + lget(0) + b"\x36\x02\x00"), UNSUPPORTED,
           "i32.store to guest memory (stores outside the stack frame stay on the CPU)")
    expect(compile_err(b"\x23\x00"), INVALID, "global.get: global index 0 out of range")
    expect(compile_err(b"\xfc\x0b\x00"), UNSUPPORTED, "unsupported opcode 0xfc 0x0b")  # memory.fill


def test_b37_management_calls():
    for name in ("dispatch", "bindBuffer", "createBufferPacked", "setBuffer32", "copyBuffer32"):
        spec_params = len(__import__("wagogpu.abi.table", fromlist=["x"]).IMPORTS_BY_NAME[name].params)
        expect(compile_err(i32c(0) * spec_params + call(TM.index(name))), UNSUPPORTED, "management call in kernel")


def test_b38_return_rules():
    # The reference's restricted return: right before the final end it changes nothing.
    assert compile_ok(TWICE_BODY + RETURN) == compile_ok(TWICE_BODY)
    # The extended subset takes a return anywhere; what follows it is unreachable and emits nothing.
    early = lowered(RETURN + TWICE_BODY)
    assert (early.reads, early.writes) == (0, 0) and "slot" not in early.wgsl and "return;" in early.wgsl
    assert lowered(lget(0) + RETURN + b"\x1a").writes == 0  # return discards the operands left over
    # Bytes after the final end are malformed, a body without one too.
    src = raw_kernel_module(b"\x00" + TWICE_BODY + RETURN + END + END)
    expect(pytest.raises(CompileError, compile_buffer_wgsl, src, K).value, INVALID,
           "nonempty final stack or trailing code")
    src = raw_kernel_module(b"\x00" + RETURN)  # return as the last byte
    expect(pytest.raises(CompileError, compile_buffer_wgsl, src, K).value, INVALID, "missing function end")


def test_b39_64_bit_rules():
    # The reference refuses i64/f64 locals and 64-bit bindings; here they are accepted (two words each) ...
    assert "var<storage, read> slot5: array<vec2<u32>>" not in compile_ok(
        TWICE_BODY, config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (5, E.I64, A.READ)))
    kernel = config((0, E.I64, A.READ), (1, E.I64, A.WRITE))
    body = FULL.write("I64", FULL.get(1), lget(0), FULL.read("I64", FULL.get(0), lget(0)))
    assert "var<storage, read_write> slot1: array<vec2<u32>>" in compile_ok(body, kernel, abi=FULL)
    # ... but a kernel the reference refuses as UNSUPPORTED never becomes INVALID (CPU fallback, not status 10):
    # a 64-bit intrinsic on a 32-bit slot keeps the reference's refusal, and a contract error after an i64
    # local or with a 64-bit binding declared is reported as UNSUPPORTED with its own message
    kernel = config((0, E.F32, A.READ))
    expect(compile_err(FULL.read("F64", FULL.get(0), lget(0)) + b"\x1a", kernel, abi=FULL), UNSUPPORTED,
           "intrinsic type unsupported on GPU")
    write_to_read = TM.write("F32", TM.get(0), lget(0), f32c(2.0))
    expect(compile_err(write_to_read, groups=[(1, 0x7E)]), UNSUPPORTED, W0_MESSAGE)
    expect(compile_err(write_to_read, config((0, E.F32, A.READ), (1, E.F32, A.WRITE), (2, E.F64, A.READ))),
           UNSUPPORTED, W0_MESSAGE)
    expect(compile_err(lget(0) + lget(0) + b"\x6a\x1a" + write_to_read), UNSUPPORTED,  # after i32.add, drop
           W0_MESSAGE)
    expect(compile_err(write_to_read), INVALID, W0_MESSAGE)  # (the reference's answer)
    expect(compile_err(write_to_read + lget(0) + b"\x1a"), INVALID, W0_MESSAGE)


def test_b40_intrinsic_type_must_match_slot():
    kernel = config((0, E.F32, A.READ), (1, E.I32, A.WRITE))
    expect(compile_err(TWICE_BODY, kernel), INVALID,
           "intrinsic type does not match declared slot: writeBufferF32 uses slot 1 as F32, declared I32")
    kernel = config((0, E.I8, A.READ), (1, E.U8, A.WRITE))
    body = FULL.write("U8", FULL.get(1), lget(0), FULL.read("U8", FULL.get(0), lget(0)))
    expect(compile_err(body, kernel, abi=FULL), INVALID,
           "intrinsic type does not match declared slot: readBufferU8 uses slot 0 as U8, declared I8")


def test_b41_handle_as_data():
    kernel = config((0, E.I32, A.READ), (1, E.I32, A.WRITE))
    body = FULL.write("I32", FULL.get(1), lget(0), FULL.get(0))
    expect(compile_err(body, kernel, abi=FULL), INVALID, "buffer handle cannot be stored as data")
    # even into an f32 slot (the handle test beats the pending type mismatch)
    expect(compile_err(TM.write("F32", TM.get(1), lget(0), TM.get(0))), INVALID,
           "buffer handle cannot be stored as data")


def test_b42_structural_end():
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00" + END + b"\x01"), K).value,
           INVALID, "nonempty final stack or trailing code")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00" + TWICE_BODY), K).value,
           INVALID, "missing function end")
    expect(compile_err(lget(0)), INVALID, "nonempty final stack or trailing code")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00\x41\x80"), K).value,
           INVALID, "truncated Wasm")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00\x43\x00\x00"), K).value,
           INVALID, "truncated Wasm")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00\x41\xff\xff\xff\xff\x4f\x0b"),
                         K).value, INVALID, "signed LEB128 overflow")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00\x20\xff\xff\xff\xff\x1f\x0b"),
                         K).value, INVALID, "invalid u32 LEB128")


def test_value_errors():
    expect(compile_err(f32add(f32c(1.0), b"") + lset(1), groups=[(1, F32)]), INVALID, "operand stack underflow")
    expect(compile_err(f32add(lget(0), f32c(1.0)) + lset(1), groups=[(1, F32)]), INVALID, "operand type mismatch")
    expect(compile_err(lset(1, f32c(1.0)), groups=[(1, I32)]), INVALID, "operand type mismatch")
    expect(compile_err(lset(0)), INVALID, "operand stack underflow")
    expect(compile_err(lget(2) + lset(1), groups=[(1, I32)]), INVALID, "local index out of range")
    expect(compile_err(lset(5, lget(0))), INVALID, "local index out of range")
    expect(compile_err(ltee(1, lget(0)) + lset(1), groups=[(1, F32)]), INVALID, "operand type mismatch")
    expect(compile_err(write1(lget(0))), INVALID, "operand type mismatch")  # the index is not f32 data
    kernel = config((0, E.I32, A.READ), (1, E.I32, A.WRITE))
    expect(compile_err(FULL.write("I32", FULL.get(1), lget(0), f32c(1.0)), kernel, abi=FULL), INVALID,
           "operand type mismatch")
    # a multi-byte local index that is in range
    assert compile_ok(b"\x20\x80\x00\x21\x80\x00")  # local.get 0; local.set 0 with 2-byte LEBs


def test_b43_defined_function_call():
    # The reference refuses B-43's call to a defined function; wagogpu inlines it (inline.py), so
    # the empty callee leaves the kernel's own (empty) shader. A target beyond the module's functions
    # is still the reference's refusal.
    m = TM.builder()
    m.func([I32], [], call(len(TM.names) + 2) + END, export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    m.func([], [], END)
    assert compile_buffer_wgsl(m.build(), K).endswith("if (index >= params.count) { return; }\n}\n")
    expect(compile_err(call(1000)), UNSUPPORTED, "only buffer intrinsic calls are supported")


@pytest.mark.parametrize("kernel, message", [
    (KernelConfig(0, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 8, 1)]),
     "invalid kernel ID or export names"),
    (KernelConfig(1, "double", "wago_gpu.cpu.double", [BindingConfig(0, 8, 1)]), "invalid kernel ID or export names"),
    (KernelConfig(1, "wago_gpu.kernel.", "wago_gpu.cpu.", [BindingConfig(0, 8, 1)]), "invalid kernel ID or export names"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.twice", [BindingConfig(0, 8, 1)]),
     "invalid kernel ID or export names"),
    (KernelConfig(1, "wago_gpu.kernel." + "x" * 241, "wago_gpu.cpu." + "x" * 241, [BindingConfig(0, 8, 1)]),
     "invalid kernel binding or name limit"),
    (KernelConfig(1, "wago_gpu.kernel." + "x" * 242, "wago_gpu.cpu." + "x" * 242, [BindingConfig(0, 8, 1)]),
     "invalid kernel binding or name limit"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", []), "invalid kernel binding or name limit"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(s, 8, 1) for s in range(9)]),
     "invalid kernel binding or name limit"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 8, 1), BindingConfig(0, 8, 2)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(8, 8, 1)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 0, 1)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 12, 1)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 8, 0)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double", [BindingConfig(0, 8, 4)]),
     "invalid slot, type, or access"),
    (KernelConfig(1, "wago_gpu.kernel.d\udc80", "wago_gpu.cpu.d\udc80", [BindingConfig(0, 8, 1)]),
     "invalid kernel ID or export names"),
])
def test_b44_config_checks(kernel, message):
    # the config is checked before the module is even decoded
    for source in (tm(TWICE_BODY), b"garbage"):
        with pytest.raises(CompileError) as e:
            compile_buffer_wgsl(source, kernel)
        expect(e.value, INVALID, message)


def test_b44_name_limit_boundary():
    # exactly 256 bytes is fine (the module simply lacks the export)
    k = KernelConfig(1, "wago_gpu.kernel." + "x" * 240, "wago_gpu.cpu." + "x" * 240, [BindingConfig(0, 8, 1)])
    assert len(k.export) == 256
    with pytest.raises(CompileError) as e:
        compile_buffer_wgsl(tm(TWICE_BODY), k)
    assert e.value.message == f"{k.export} must be a defined (i32) -> () export"


def _exports_module(kernel_type=([I32], []), cpu_type=([I32], []), import_kernel=False, gc_kernel=False,
                    duplicate=False, cpu=True) -> bytes:
    m = ModuleBuilder()
    if import_kernel:
        imp = m.import_func("env", "k", [I32], [])
        m.export("wago_gpu.kernel.double", 0, imp)
    m.memory(1)
    if gc_kernel:
        m.types.append(b"\x5e\x7d\x01")  # (array (mut f32)) as type 0
    k = m.func(*kernel_type, END, export=None if import_kernel else "wago_gpu.kernel.double")
    if gc_kernel:
        m.functions[-1] = 0
    if cpu:
        c = m.func(*cpu_type, END, export="wago_gpu.cpu.double")
        if duplicate:
            m.export("wago_gpu.cpu.double", 0, k)
    return m.build()


def test_b45_export_selection():
    def msg(name: str) -> str:
        return f"{name} must be a defined (i32) -> () export"

    kernel_msg, cpu_msg = msg("wago_gpu.kernel.double"), msg("wago_gpu.cpu.double")
    assert compile_buffer_wgsl(_exports_module(), K)
    for source, message in [
        (_exports_module(cpu=False), cpu_msg),
        (_exports_module(kernel_type=([I32], [I32])), kernel_msg),
        (_exports_module(kernel_type=([F32], [])), kernel_msg),
        (_exports_module(kernel_type=([I32, I32], [])), kernel_msg),
        (_exports_module(cpu_type=([], [])), cpu_msg),
        (_exports_module(import_kernel=True), kernel_msg),
        (_exports_module(gc_kernel=True), kernel_msg),
        (_exports_module(duplicate=True), "bounded module decoder: duplicate export"),
    ]:
        with pytest.raises(CompileError) as e:
            compile_buffer_wgsl(source, K)
        expect(e.value, INVALID, message)
    # a non-function export may share the name; it is ignored
    m = ModuleBuilder()
    m.memory(1)
    m.export("wago_gpu.kernel.double", 2, 0)
    m.func([I32], [], END, export="wago_gpu.kernel.double")
    m.func([I32], [], END, export="wago_gpu.cpu.double")
    assert compile_buffer_wgsl(m.build(), K)


def test_b46_section_order():
    base = TM.builder()
    base.func([I32], [], TWICE_BODY + END, export="wago_gpu.kernel.double")
    base.func([I32], [], END, export="wago_gpu.cpu.double")
    assert compile_buffer_wgsl(base.build({12: uleb(2)}), K)  # data count between element and code
    assert compile_buffer_wgsl(base.build({13: b"\x00", 4: b"\x00", 6: b"\x00", 9: b"\x00", 11: b"\x00"}), K)
    src = base.build()
    after_code = src + bytes([12, 1, 2])
    repeated_code = src + bytes([10, 1, 0])
    for bad in (after_code, repeated_code, src + bytes([14, 0]), src + bytes([255, 0]), src + bytes([1, 1, 0]),
                src[:8] + bytes([3, 1, 0]) + src[8:]):
        with pytest.raises(CompileError) as e:
            compile_buffer_wgsl(bad, K)
        expect(e.value, UNSUPPORTED, "unsupported section order")
    custom = bytes([0, 3, 1, ord("x"), 0])
    assert compile_buffer_wgsl(src[:8] + custom + src[8:] + custom, K)


def test_b47_limits(monkeypatch):
    expect(compile_err(b"\x20\x00\x21\x00" * 2048), LIMIT, "kernel workspace limit")
    expect(compile_err(b"", groups=[(4096, I32)]), LIMIT, "expanded local limit")
    expect(pytest.raises(CompileError, compile_buffer_wgsl, raw_kernel_module(b"\x00" + b"\x01" * 16384 + END),
                         K).value, LIMIT, "kernel byte limit")
    monkeypatch.setattr(lim, "MAX_WGSL_BYTES", 500)
    expect(compile_err(TWICE_BODY), LIMIT, "WGSL byte limit")


def test_instruction_limit_boundary():
    pair = lget(0) + lset(0)
    triple = lget(0) + ltee(0) + lset(0)
    # 4,095 instructions, then end as the 4,096th: allowed
    assert compile_ok(pair * 2046 + triple)
    # the 4,096th instruction is still decoded (and here rejected as unsupported)
    expect(compile_err(pair * 2046 + triple + b"\x3f"), UNSUPPORTED, "unsupported opcode 0x3f")
    # 4,096 instructions before end: the end would be the 4,097th
    expect(compile_err(pair * 2048), LIMIT, "kernel workspace limit")


@pytest.mark.parametrize("limit, value", [("MAX_NODES", 3), ("MAX_STACK", 2), ("MAX_BODY_CODE", 40),
                                          ("MAX_INSTRUCTIONS", 10)])
def test_workspace_limits_lowered(monkeypatch, limit, value):
    """Every per-iteration workspace limit fires when lowered (the checked loop)."""
    monkeypatch.setattr(lim, limit, value)
    body = write1(f32add(f32add(read0(), read0()), read0()))
    expect(compile_err(body), LIMIT, "kernel workspace limit")


def test_b48_dead_arithmetic_not_emitted():
    body = lset(1, f32add(read0(), f32c(5.0))) + write1(f32c(1.0))
    w = compile_ok(body, groups=[(1, F32)])
    assert "let v1" not in w and "0x40a00000u" not in w and "let v0: u32 = slot0[index];" in w
    assert lowered(body, groups=[(1, F32)]).is_float


def test_b49_depth_rule_order():
    expr = read0()
    for _ in range(8):
        expr = f32add(expr, f32c(1.0))
    w = compile_ok(write1(expr))
    lets = [line.split(":")[0].strip() for line in w.splitlines() if line.startswith("  let v")]
    assert lets == [f"let v{i}" for i in range(9)]
    assert w.index("let v6") < w.index("let v7") < w.index("slot1[index] = bitcast<u32>(v8);")


def test_depth_rule_emits_in_runs_of_six():
    from fixtures import POLY_BODY
    w = compile_ok(POLY_BODY, groups=[(1, F32)])
    lets = [int(line.split(":")[0].split("v")[1]) for line in w.splitlines() if line.startswith("  let v")]
    assert lets == list(range(65))
