"""The wago_gpu_v1 imports on the CPU path: check orders, statuses, traps and limits (docs/design/abi.md §2, §9.1)."""
from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest
import wasmtime

from wagogpu import Access, ElementType, Status
from wagogpu.abi import IMPORTS, TYPE_INFO, pack_result, unpack_result
from wagogpu.abi.f16 import f32_bits_to_half, half_to_f32_bits
from wagogpu.host.memexports import uleb128

from ..conftest import kernel
from ..guests import abi_module, copy_kernel, runner_kernel

ROOT = Path(__file__).resolve().parents[2]
START_WAT = (ROOT / "examples" / "start" / "start.wat").read_text()
F32 = ElementType.F32


def create(inst, etype=F32, count=4):
    status, handle = unpack_result(inst.call("createBufferPacked", etype, count))
    return status, handle


def trap_status(excinfo) -> int:
    text = str(excinfo.value)
    marker = "wago_gpu_v1 scalar access: status "
    assert marker in text, text
    return int(text.split(marker)[1].split()[0])


@pytest.fixture
def f2(make_host):
    """The F2 fixture: kernel 1 = double with out[i] = in[i], GPU disabled."""
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(kernels=copy_kernel())))
    return host, inst


def test_abi_table_matches_reference_shape():
    assert len(IMPORTS) == 34
    assert [i.name for i in IMPORTS[:12]] == [
        "createBuffer", "createBufferPacked", "freeBuffer", "bindBuffer", "getBuffer", "dispatch",
        "setBuffer32", "setBuffer64", "setBufferGC", "copyBuffer32", "copyBuffer64", "copyBufferGC"]
    assert [TYPE_INFO[t].stored_bytes for t in ElementType] == [1, 1, 2, 2, 4, 4, 2, 4, 8, 8, 8]
    assert list(Status)[-1] == Status.INVALID_STATE == 12


def test_start_example_cpu_only(make_host):
    host = make_host(kernels=[kernel(1, "double"), kernel(2, "addOne")])
    inst = host.instantiate(host.compile(START_WAT))
    assert struct.unpack("<4f", inst.read_memory(16, 16)) == (3.0, 5.0, 7.0, 9.0)
    assert struct.unpack("<2I", inst.read_memory(32, 8)) == (1, 1)
    snap = host.buffer_snapshot()
    assert snap.runtime_buffer_bytes == 0
    assert snap.totals.guest_set_bytes == 16 and snap.totals.guest_copy_bytes == 16
    assert snap.state == "DISABLED" and snap.reason == "GPU disabled"


def test_module_from_other_host_is_refused(make_host):
    a, b = make_host(), make_host()
    module = a.compile(abi_module())
    with pytest.raises(ValueError, match="different host"):
        b.instantiate(module)


def test_min_elements_forces_cpu_but_result_holds(make_host):
    host = make_host(kernels=[kernel(1, "double", min_elements=5), kernel(2, "addOne")], disabled=False,
                     allow_software_adapter=True)
    inst = host.instantiate(host.compile(START_WAT))
    assert struct.unpack("<4f", inst.read_memory(16, 16)) == (3.0, 5.0, 7.0, 9.0)
    first, second = struct.unpack("<2I", inst.read_memory(32, 8))
    assert first == 1 and second in (0, 1)


def test_handles_are_runtime_wide_and_never_reused(make_host):
    host = make_host()
    module = host.compile(abi_module())
    a, b = host.instantiate(module), host.instantiate(module)
    assert create(a) == (0, 1)
    assert create(b) == (0, 2)
    assert a.call("freeBuffer", 2) == Status.INVALID_HANDLE  # other instance's handle
    assert a.call("freeBuffer", 1) == Status.OK
    assert a.call("freeBuffer", 1) == Status.INVALID_HANDLE  # second free
    assert create(a) == (0, 3)
    assert a.call("freeBuffer", 0) == Status.INVALID_HANDLE


def test_create_checks_in_order(make_host):
    host = make_host(max_elements=100, max_buffers_per_instance=2, max_instance_buffer_bytes=64)
    inst = host.instantiate(host.compile(abi_module()))
    assert inst.call("createBuffer", 0, 1) == [0, Status.TYPE_MISMATCH]
    assert inst.call("createBuffer", 12, 1) == [0, Status.TYPE_MISMATCH]
    assert inst.call("createBuffer", -1, 1)[1] == Status.TYPE_MISMATCH
    assert inst.call("createBuffer", 8, 101) == [0, Status.LIMIT_EXCEEDED]
    assert inst.call("createBuffer", 8, -1) == [0, Status.LIMIT_EXCEEDED]  # u32: huge
    assert inst.call("createBuffer", 8, 17) == [0, Status.LIMIT_EXCEEDED]  # 68 bytes > 64 budget
    assert inst.call("createBuffer", 8, 16) == [1, Status.OK]
    assert inst.call("createBuffer", 8, 0) == [2, Status.OK]  # zero-length is legal
    assert inst.call("createBuffer", 8, 0) == [0, Status.LIMIT_EXCEEDED]  # third live buffer
    last = host.buffer_snapshot().last
    assert (last.import_name, last.status, last.outcome, last.reason_code) == (
        "createBuffer", 6, "ERROR", "RESOURCE_LIMIT")


def test_max_elements_exactly_allowed(make_host):
    host = make_host(max_elements=10_000_000)
    inst = host.instantiate(host.compile(abi_module()))
    assert create(inst, ElementType.U8, 10_000_000) == (0, 1)
    assert create(inst, ElementType.U8, 10_000_001)[0] == Status.LIMIT_EXCEEDED


def test_packed_handle_is_not_sign_extended(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    host.context.budget.next_handle = 0x80000001
    packed = inst.call("createBufferPacked", 8, 1)
    assert packed == pack_result(0, 0x80000001) == 0x80000001
    assert inst.call("freeBuffer", 0x80000001 - (1 << 32)) == Status.OK
    host.context.budget.next_handle = 0xFFFFFFFF
    assert unpack_result(inst.call("createBufferPacked", 8, 1)) == (0, 0xFFFFFFFF)
    assert unpack_result(inst.call("createBufferPacked", 8, 1)) == (Status.LIMIT_EXCEEDED, 0)


def test_bind_checks(f2):
    host, inst = f2
    _, h = create(inst)
    assert inst.call("bindBuffer", 8, h) == Status.INVALID_BINDING
    assert inst.call("bindBuffer", -1, h) == Status.INVALID_BINDING
    assert inst.call("bindBuffer", 0, 99) == Status.INVALID_HANDLE
    assert inst.call("bindBuffer", 0, 0) == Status.OK  # clearing an empty slot
    assert inst.call("bindBuffer", 0, h) == Status.OK
    assert inst.call("bindBuffer", 3, h) == Status.OK  # aliasing allowed between calls
    assert inst.call("getBuffer", 3) == h
    assert inst.call("freeBuffer", h) == Status.OK  # clears every slot holding it
    for slot in (0, 3):
        with pytest.raises(wasmtime.Trap) as e:
            inst.call("getBuffer", slot)
        assert trap_status(e) == Status.INVALID_BINDING


def test_get_buffer_traps(f2):
    _, inst = f2
    for slot in (8, -1, 0):
        with pytest.raises(wasmtime.Trap) as e:
            inst.call("getBuffer", slot)
        assert trap_status(e) == Status.INVALID_BINDING
        assert "wago_gpu_v1 scalar access: status 5" in str(e.value)


def test_fallback_keeps_last_range_and_alias(f2):
    host, inst = f2
    inst.write_memory(0, struct.pack("<4f", 1, 2, 3, 4))
    _, a = create(inst)
    _, b = create(inst)
    assert inst.call("bindBuffer", 0, a) == 0 and inst.call("bindBuffer", 1, b) == 0
    assert inst.call("dispatch", 1, 4) == Status.CPU_FALLBACK
    last = host.buffer_snapshot().last
    assert (last.outcome, last.reason_code, last.kernel_id) == ("CPU_FALLBACK_READY", "DISABLED", 1)
    inst.call("scalarLoop")
    assert host.buffer_snapshot().last == last  # scalar imports never touch Last
    assert inst.call("setBuffer32", a, 0, 0, 65535, 4) == Status.INVALID_RANGE
    assert inst.call("bindBuffer", 1, a) == 0
    assert inst.call("dispatch", 1, 0) == Status.INVALID_BINDING
    assert inst.call("dispatch", 1, 4) == Status.INVALID_BINDING
    inst.close()
    assert host.buffer_snapshot().runtime_buffer_bytes == 0


def test_dispatch_check_order(make_host):
    k = kernel(bindings=[(0, F32, Access.READ), (1, ElementType.I32, Access.WRITE)],
               name="double")
    host = make_host(kernels=[k])
    body = ("(call $writeBufferI32 (call $getBuffer (i32.const 1)) (local.get 0) (i32.const 7))")
    inst = host.instantiate(host.compile(abi_module(kernels=copy_kernel(body=body))))
    assert inst.call("dispatch", 2, 0) == Status.INVALID_KERNEL  # unknown ID, even count 0
    assert host.buffer_snapshot().last.reason_code == "CONTRACT_ERROR"
    assert inst.call("dispatch", 1, 0) == Status.INVALID_BINDING  # slots empty
    _, a = create(inst, F32, 4)
    _, b = create(inst, F32, 4)
    _, c = create(inst, ElementType.I32, 2)
    inst.call("bindBuffer", 0, a)
    inst.call("bindBuffer", 1, b)
    assert inst.call("dispatch", 1, 1) == Status.TYPE_MISMATCH
    inst.call("bindBuffer", 1, c)
    assert inst.call("dispatch", 1, 3) == Status.INVALID_RANGE
    assert inst.call("dispatch", 1, 0) == Status.OK
    assert host.buffer_snapshot().last.outcome == "NOOP"
    assert inst.call("dispatch", 1, 2) == Status.CPU_FALLBACK
    inst.call("freeBuffer", a)
    assert inst.call("dispatch", 1, 2) == Status.INVALID_BINDING


def test_unused_declared_alias_is_refused(make_host):
    k = kernel(bindings=[(0, F32, Access.READ_WRITE), (7, F32, Access.WRITE)])
    body = "(call $writeBufferF32 (call $getBuffer (i32.const 0)) (local.get 0) (f32.const 7))"
    for disabled in (True, False):
        host = make_host(kernels=[k], disabled=disabled, allow_software_adapter=True)
        inst = host.instantiate(host.compile(abi_module(kernels=copy_kernel(body=body))))
        _, h = create(inst)
        inst.call("bindBuffer", 0, h)
        inst.call("bindBuffer", 7, h)
        assert inst.call("dispatch", 1, 0) == Status.INVALID_BINDING
        assert inst.call("dispatch", 1, 4) == Status.INVALID_BINDING


def test_durable_invalid_contract(make_host):
    body = "(call $writeBufferF32 (call $getBuffer (i32.const 1)) (local.get 0) (f32.const 2))"
    k = kernel(bindings=[(0, F32, Access.READ), (1, F32, Access.READ)])
    host = make_host(kernels=[k])
    source = abi_module(kernels=copy_kernel(body=body))
    for _ in range(20):
        host.compile(source).close()
    inst = host.instantiate(host.compile(source))
    assert inst.call("dispatch", 1, 0) == Status.INVALID_KERNEL
    assert host.buffer_snapshot().last.reason_code == "CONTRACT_ERROR"
    kd = [d for d in host.buffer_snapshot().kernels if d.state == "INVALID_CONTRACT"]
    assert kd, host.buffer_snapshot().kernels


def test_unverified_module_gives_10_and_11_but_buffers_work(make_host):
    host = make_host(kernels=[kernel()])
    # The bounded decoder refuses modules over 4 MiB; wasmtime takes one padded by a custom section.
    wasm = wasmtime.wat2wasm(abi_module(kernels=copy_kernel()))
    name = b"pad"
    payload = bytes([len(name)]) + name + bytes(4 * 1024 * 1024)
    inst = host.instantiate(host.compile(wasm + b"\x00" + uleb128(len(payload)) + payload))
    _, h = create(inst)
    assert h == 1
    assert inst.call("dispatch", 1, 0) == Status.INVALID_KERNEL
    assert host.buffer_snapshot().last.reason_code == "CONTRACT_UNVERIFIED"
    assert inst.call("setBuffer32", h, 0, 0, 0, 4) == Status.UNSUPPORTED_STORAGE
    assert inst.call("writebitsF32", h, 0, 0x40000000) is None
    assert inst.call("readbitsF32", h, 0) == 0x40000000


def test_legacy_only_config_leaves_memory_transfers_unverified(make_host):
    host = make_host(kernels=[], kernel_export="kernel")
    inst = host.instantiate(host.compile(abi_module(extra='(func (export "kernel") (param f32) (result f32) local.get 0)')))
    _, h = create(inst)
    assert inst.call("setBuffer32", h, 0, 0, 0, 4) == Status.UNSUPPORTED_STORAGE


def test_start_trap_cleans_up(make_host):
    host = make_host(kernels=[kernel(1, "double"), kernel(2, "addOne")])
    source = START_WAT.replace("(call $must (call $free (local.get $b)))", "unreachable")
    with pytest.raises(wasmtime.Trap):
        host.instantiate(host.compile(source))
    snap = host.buffer_snapshot()
    assert snap.instances == [] and snap.runtime_buffer_bytes == 0


def test_memory64_transfers(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(memory='(memory (export "memory") i64 1)')))
    _, h = create(inst, F32, 1)
    inst.write_memory(0, struct.pack("<f", 7.0))
    assert inst.call("setBuffer64", h, 0, 0, 0, 1) == Status.OK
    assert inst.call("copyBuffer64", h, 0, 0, 4, 1) == Status.OK
    assert struct.unpack("<f", inst.read_memory(4, 4)) == (7.0,)
    assert inst.call("setBuffer32", h, 0, 0, 0, 1) == Status.UNSUPPORTED_STORAGE
    assert inst.call("setBuffer64", h, 0, 0, 65533, 1) == Status.INVALID_RANGE
    assert inst.call("setBuffer64", h, 0, 0, -1, 1) == Status.INVALID_RANGE  # u64 overflow
    assert inst.call("setBuffer64", h, 0, 0, 65536, 0) == Status.OK  # at the end is fine
    assert inst.call("setBuffer64", h, 0, 0, 65537, 0) == Status.INVALID_RANGE


def test_multi_memory_index(make_host):
    host = make_host()
    mem = '(memory (export "memory") 1) (memory $second 1) (data (memory $second) (i32.const 8) "\\00\\00\\80\\3f")'
    inst = host.instantiate(host.compile(abi_module(memory=mem)))
    _, h = create(inst, F32, 1)
    assert inst.call("setBuffer32", h, 0, 1, 8, 1) == Status.OK
    assert inst.call("readbitsF32", h, 0) == 0x3F800000
    assert inst.call("setBuffer32", h, 0, 2, 0, 1) == Status.INVALID_RANGE
    assert inst.read_memory(8, 4, memory=1) == struct.pack("<f", 1.0)


GC_EXTRA = """
  (type $af32 (array (mut f32)))
  (type $af32c (array f32))
  (type $ai16 (array (mut i16)))
  (type $s (struct (field i32)))
  (global $arr (mut (ref null $af32)) (ref.null $af32))
  (func (export "gc_set") (param $h i32) (result i32)
    (global.set $arr (array.new_fixed $af32 1 (f32.const 7)))
    (call $setBufferGC (local.get $h) (i32.const 0) (global.get $arr) (i32.const 0) (i32.const 1)))
  (func (export "gc_zero") (array.set $af32 (global.get $arr) (i32.const 0) (f32.const 0)))
  (func (export "gc_copy") (param $h i32) (result i32)
    (call $copyBufferGC (local.get $h) (i32.const 0) (global.get $arr) (i32.const 0) (i32.const 1)))
  (func (export "gc_get") (result f32) (array.get $af32 (global.get $arr) (i32.const 0)))
  (func (export "gc_null") (param $h i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (ref.null any) (i32.const 0) (i32.const 1)))
  (func (export "gc_struct") (param $h i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (struct.new $s (i32.const 1)) (i32.const 0) (i32.const 1)))
  (func (export "gc_kind") (param $h i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (array.new $ai16 (i32.const 0) (i32.const 1)) (i32.const 0) (i32.const 1)))
  (func (export "gc_range") (param $h i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (array.new $af32 (f32.const 1) (i32.const 1)) (i32.const 1) (i32.const 1)))
  (func (export "gc_copy_immutable") (param $h i32) (result i32)
    (call $copyBufferGC (local.get $h) (i32.const 0) (array.new $af32c (f32.const 1) (i32.const 1)) (i32.const 0) (i32.const 1)))
  (func (export "gc_big_immutable") (param $h i32) (param $n i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (array.new $af32c (f32.const 7) (i32.const 1000000)) (i32.const 0) (local.get $n)))
"""


def test_gc_mutable_array_round_trip(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(extra=GC_EXTRA)))
    _, h = create(inst, F32, 1)
    assert inst.call("gc_set", h) == Status.OK
    inst.call("gc_zero")
    assert inst.call("gc_get") == 0.0
    assert inst.call("gc_copy", h) == Status.OK
    assert inst.call("gc_get") == 7.0
    assert host.buffer_snapshot().last.import_name == "copyBufferGC"


def test_gc_statuses(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(extra=GC_EXTRA)))
    _, h = create(inst, F32, 1)
    assert inst.call("gc_null", h) == Status.UNSUPPORTED_STORAGE
    assert inst.call("gc_struct", h) == Status.UNSUPPORTED_STORAGE
    assert inst.call("gc_kind", h) == Status.TYPE_MISMATCH
    assert inst.call("gc_range", h) == Status.INVALID_RANGE
    assert inst.call("gc_copy_immutable", h) == Status.UNSUPPORTED_STORAGE
    assert inst.call("gc_null", 99) == Status.INVALID_HANDLE


def test_gc_immutable_source_reserves_whole_array(make_host):
    host = make_host(max_instance_buffer_bytes=64)
    inst = host.instantiate(host.compile(abi_module(extra=GC_EXTRA)))
    _, h1 = create(inst, F32, 1)
    assert inst.call("gc_big_immutable", h1, 1) == Status.LIMIT_EXCEEDED
    _, h2 = create(inst, F32, 1)
    assert inst.call("gc_big_immutable", h2, 0) == Status.OK
    assert host.buffer_snapshot().runtime_buffer_bytes == 8


def test_f16_storage_example_cpu(make_host):
    k = kernel(bindings=[(0, ElementType.F16, Access.READ_WRITE)], name="inc")
    body = ("(call $writeBufferF16 (call $getBuffer (i32.const 0)) (local.get 0)"
            " (f32.add (call $readBufferF16 (call $getBuffer (i32.const 0)) (local.get 0)) (f32.const 1)))")
    extra = f"""
  (func $k (param i32) {body})
  (func (export "wago_gpu.kernel.inc") (param i32) (call $k (local.get 0)))
  (func (export "wago_gpu.cpu.inc") (param $n i32) (local $i i32)
    (block $d (loop $l (br_if $d (i32.ge_u (local.get $i) (local.get $n)))
      (call $k (local.get $i)) (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $l))))"""
    host = make_host(kernels=[k])
    inst = host.instantiate(host.compile(abi_module(extra=extra)))
    _, h = create(inst, ElementType.F16, 1)
    inst.write_memory(0, struct.pack("<H", 0x3C00))
    assert inst.call("bindBuffer", 0, h) == 0
    assert inst.call("setBuffer32", h, 0, 0, 0, 1) == 0
    assert inst.call("dispatch", 1, 1) == Status.CPU_FALLBACK
    inst.call("wago_gpu.cpu.inc", 1)
    assert inst.call("readBufferF16", h, 0) == 2.0
    assert inst.call("freeBuffer", h) == 0


SCALAR_INPUTS = [0, 0xFFFFFFFFFFFFFFFF, 0x80000000, 0x7FC12345, 0x3F801000]


def expected_scalar(t: ElementType, x: int) -> int:
    lo = x & 0xFFFFFFFF
    if t in (ElementType.I64, ElementType.U64, ElementType.F64):
        return x
    if t == ElementType.I8:
        return (lo & 0xFF) - ((lo & 0x80) << 1) & 0xFFFFFFFF
    if t == ElementType.U8:
        return lo & 0xFF
    if t == ElementType.I16:
        return (lo & 0xFFFF) - ((lo & 0x8000) << 1) & 0xFFFFFFFF
    if t == ElementType.U16:
        return lo & 0xFFFF
    if t == ElementType.F16:
        return half_to_f32_bits(f32_bits_to_half(lo))
    return lo


@pytest.mark.parametrize("etype", list(ElementType))
def test_scalar_round_trip_per_type(make_host, etype):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = create(inst, etype, 1)
    for x in SCALAR_INPUTS:
        inst.call(f"writebits{etype.name}", h, 0, x - (1 << 64) if x >= 1 << 63 else x)
        got = inst.call(f"readbits{etype.name}", h, 0) & 0xFFFFFFFFFFFFFFFF
        assert got == expected_scalar(etype, x), (etype, hex(x), hex(got))


def test_scalar_f16_vectors(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = create(inst, ElementType.F16, 1)
    for x, want in [(0x3F801000, 0x3F800000), (0x7FC12345, 0x7FC00000), (0x80000000, 0x80000000)]:
        inst.call("writebitsF16", h, 0, x)
        assert inst.call("readbitsF16", h, 0) == want


def test_scalar_trap_order(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = create(inst, F32, 2)
    cases = [(("readbitsF32", 99, 0), 2), (("readbitsF32", 0, 0), 2), (("readbitsI32", h, 0), 4),
             (("readbitsU32", h, 5), 4), (("readbitsF32", h, 2), 3), (("readbitsF32", h, -1), 3),
             (("writebitsF32", h, 2, 0), 3), (("writebitsF64", h, 0, 0), 4)]
    before = host.buffer_snapshot().last
    for args, status in cases:
        with pytest.raises(wasmtime.Trap) as e:
            inst.call(*args)
        assert trap_status(e) == status, args
    assert host.buffer_snapshot().last == before


def test_scalar_write_bumps_version_and_keeps_bits(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = create(inst, F32, 4)
    buf = inst.buffers.buffers[h]
    assert buf.record.version == 1
    inst.call("writebitsF32", h, 1, 0x7FA00001)  # signalling NaN payload
    inst.call("writebitsF32", h, 1, 0x7FA00001)  # identical bits still make a version
    assert buf.record.version == 3
    assert inst.call("readbitsF32", h, 1) == 0x7FA00001
    # The version is 64-bit across two record words: the host's bump and the set path carry.
    buf.record.version = 0xFFFFFFFF
    assert inst.call("setBuffer32", h, 0, 0, 0, 4) == 0
    assert buf.record.version == 1 << 32
    inst.call("writebitsF32", h, 1, 0)  # the accessor module's own bump continues from there
    assert buf.record.version == (1 << 32) + 1


def test_closing_instance_traps_12_and_host_close_is_idempotent(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = create(inst, F32, 1)
    inst.buffers.close()  # the state an import sees while its instance is being closed
    with pytest.raises(wasmtime.Trap) as e:
        inst.call("readbitsF32", h, 0)
    assert trap_status(e) == Status.INVALID_STATE
    assert unpack_result(inst.exports["createBufferPacked"](inst.store, 8, 1)) == (Status.INVALID_STATE, 0)
    assert host.buffer_snapshot().last.status == Status.INVALID_STATE
    inst.close()
    with pytest.raises(ValueError, match="closed"):
        inst.call("readbitsF32", h, 0)
    host.close()
    host.close()
    assert host.buffer_snapshot().state == "STOPPED"


def test_committed_work_survives_a_later_trap(make_host):
    extra = """
  (func (export "set_then_trap") (param $h i32)
    (drop (call $setBuffer32 (local.get $h) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1)))
    (call $writeBufferF32 (local.get $h) (i32.const 1) (f32.const 5))
    unreachable)"""
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(extra=extra)))
    _, h = create(inst, F32, 2)
    inst.write_memory(0, struct.pack("<f", 3.0))
    with pytest.raises(wasmtime.Trap):
        inst.call("set_then_trap", h)
    assert inst.call("readBufferF32", h, 0) == 3.0
    assert inst.call("readBufferF32", h, 1) == 5.0
    assert host.buffer_snapshot().last.import_name == "setBuffer32"


def test_last_survives_cpu_loop_that_traps(f2):
    host, inst = f2
    _, a = create(inst)
    _, b = create(inst)
    inst.call("bindBuffer", 0, a)
    inst.call("bindBuffer", 1, b)
    assert inst.call("dispatch", 1, 4) == 1
    last = host.buffer_snapshot().last
    with pytest.raises(wasmtime.Trap):
        inst.call("readbitsF32", a, 9)
    assert host.buffer_snapshot().last == last


def test_runner_computes_on_fallback(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))))
    inst.write_memory(0, struct.pack("<4f", 1, 2, 3, 4))
    _, a = create(inst)
    _, b = create(inst)
    inst.call("setBuffer32", a, 0, 0, 0, 4)
    inst.call("bindBuffer", 0, a)
    inst.call("bindBuffer", 1, b)
    assert inst.call("dispatch", 1, 4) == 1
    inst.call("wago_gpu.cpu.double", 4)
    assert inst.call("copyBuffer32", b, 0, 0, 16, 4) == 0
    assert struct.unpack("<4f", inst.read_memory(16, 16)) == (2, 4, 6, 8)


def test_concurrent_instances(make_host):
    host = make_host(kernels=[kernel(1, "double"), kernel(2, "addOne")])
    module = host.compile(START_WAT)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                inst = host.instantiate(module)
                assert struct.unpack("<4f", inst.read_memory(16, 16)) == (3, 5, 7, 9)
                inst.close()
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert host.buffer_snapshot().runtime_buffer_bytes == 0


def test_spec_check_passes():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "spec" / "check_spec.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "spec check: ok" in out.stdout


def test_shared_memory_transfers_are_refused(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module(memory='(memory (export "memory") 1 1 shared)')))
    _, h = create(inst, F32, 1)
    inst.write_memory(0, struct.pack("<f", 7.0))
    assert inst.call("setBuffer32", h, 0, 0, 0, 1) == Status.UNSUPPORTED_STORAGE
    assert inst.call("copyBuffer32", h, 0, 0, 0, 1) == Status.UNSUPPORTED_STORAGE
    assert inst.read_memory(0, 4) == struct.pack("<f", 7.0)
