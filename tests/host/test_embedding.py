"""Embedding like wasmtime-py: host-side buffer access, host-called re-exports, lazy exports, closed
objects, argument ranges, module sources (paths, not-a-module, WAT locations)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import wasmtime

from wagogpu import ElementType, ModuleError, Status
from wagogpu.abi import unpack_result
from wagogpu.abi.f16 import f32_bits_to_half
from wagogpu.host.access import BufferAccessError

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import abi_module, copy_kernel, runner_kernel

F32 = ElementType.F32
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def guest(make_host) -> Guest:
    return Guest(make_host(), kernels=copy_kernel())


# -- read_buffer / write_buffer ------------------------------------------------------------------------
@pytest.mark.parametrize("etype, dtype, values", [
    (ElementType.I8, np.int8, [-128, 0, 127]), (ElementType.U8, np.uint8, [0, 200, 255]),
    (ElementType.I16, np.int16, [-32768, 7, 32767]), (ElementType.U16, np.uint16, [0, 65535, 9]),
    (ElementType.I32, np.int32, [-(2 ** 31), 5, 2 ** 31 - 1]), (ElementType.U32, np.uint32, [0, 2 ** 32 - 1, 3]),
    (ElementType.F32, np.float32, [1.5, -0.0, np.inf]), (ElementType.I64, np.int64, [-(2 ** 63), 1, 2 ** 63 - 1]),
    (ElementType.U64, np.uint64, [0, 2 ** 64 - 1, 4]), (ElementType.F64, np.float64, [0.1, -2.5, 1e300])])
def test_write_then_read_every_element_type(guest, etype, dtype, values):
    h = guest.create(etype, 3)
    guest.inst.write_buffer(h, values)
    got = guest.inst.read_buffer(h)
    assert got.dtype == dtype and got.tolist() == np.array(values, dtype=dtype).tolist()
    # What the guest's own scalar read sees: the same bits.
    bits = guest.inst.call(f"readbits{etype.name}", h, 1)
    assert bits & ((1 << (8 * np.dtype(dtype).itemsize)) - 1) == np.array(values, dtype=dtype)[1:2].view(
        f"u{np.dtype(dtype).itemsize}")[0]


def test_f16_follows_the_abi_rules(guest):
    h = guest.create(ElementType.F16, 4)
    guest.inst.write_buffer(h, np.array([1.0, 65504.0, 1e-8, np.nan], dtype=np.float32))
    got = guest.inst.read_buffer(h)
    assert got.dtype == np.float16
    expected = f32_bits_to_half(np.array([1.0, 65504.0, 1e-8, np.nan], dtype=np.float32).view(np.uint32))
    assert got.view(np.uint16).tolist() == list(expected) and got.view(np.uint16)[3] == 0x7E00
    raw = np.array([0x7C01, 0x3C00], dtype=np.uint16).view(np.float16)  # a NaN payload kept as given
    guest.inst.write_buffer(h, raw, offset=2)
    assert guest.inst.read_buffer(h).view(np.uint16).tolist()[2:] == [0x7C01, 0x3C00]


def test_a_write_is_a_committed_cpu_write(guest):
    h = guest.create(F32, 4)
    buf = guest.buf(h)
    assert buf.record.version == 1
    guest.inst.write_buffer(h, [1.0, 2.0], offset=1)
    assert buf.record.version == 2 and guest.state(h) == "CPU_CURRENT"
    assert guest.get_f32(h, 4).tolist() == [0.0, 1.0, 2.0, 0.0]  # the guest's copyBuffer32 sees it
    guest.inst.write_buffer(h, [])
    assert buf.record.version == 2  # an empty write commits nothing


@pytest.mark.parametrize("call, message", [
    (lambda i, h: i.read_buffer(h + 100), "read_buffer: INVALID_HANDLE (2): handle {bad} is not a live buffer "
                                          "of instance {inst}"),
    (lambda i, h: i.write_buffer(h, [1.0] * 5), "write_buffer: INVALID_RANGE (3): elements [0, 5) lie outside "
                                                "buffer {h} (F32, 4 elements)"),
    (lambda i, h: i.write_buffer(h, [1.0], offset=4), "write_buffer: INVALID_RANGE (3): elements [4, 5) lie outside "
                                                      "buffer {h} (F32, 4 elements)"),
    (lambda i, h: i.write_buffer(h, [1.0], offset=-1), "write_buffer: INVALID_RANGE (3): elements [-1, 0) lie "
                                                       "outside buffer {h} (F32, 4 elements)"),
    (lambda i, h: i.write_buffer(h, ["x"]), "write_buffer: TYPE_MISMATCH (4): <U1 values cannot be written to a "
                                            "F32 buffer"),
])
def test_bad_accesses_name_the_abi_status(guest, call, message):
    h = guest.create(F32, 4)
    with pytest.raises(BufferAccessError) as e:
        call(guest.inst, h)
    assert str(e.value) == message.format(bad=h + 100, h=h, inst=guest.inst.id)
    assert isinstance(e.value, ValueError) and e.value.status.name in str(e.value)
    assert guest.version(h) == 1  # nothing committed


def test_values_must_fit_the_element_type(guest):
    i8 = guest.create(ElementType.I8, 2)
    with pytest.raises(ValueError, match=r"^write_buffer: 300 is outside the I8 range -128\.\.127$"):
        guest.inst.write_buffer(i8, [1, 300])
    with pytest.raises(BufferAccessError, match=r"^write_buffer: TYPE_MISMATCH \(4\): float64 values cannot be "
                                                r"written to a I8 buffer$"):
        guest.inst.write_buffer(i8, [1.5])
    with pytest.raises(ValueError, match=r"^write_buffer: values must be one-dimensional, got shape \(1, 2\)$"):
        guest.inst.write_buffer(i8, [[1, 2]])
    with pytest.raises(TypeError, match="^write_buffer: offset must be an integer, got 0.5$"):
        guest.inst.write_buffer(i8, [1], offset=0.5)
    assert guest.version(i8) == 1


def test_a_gpu_result_is_read_back_and_a_lost_buffer_says_contents_lost():
    g = Guest(gpu_host(kernels=[kernel(1, "double")]), kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))
    try:
        a, b = g.create(F32, 4), g.create(F32, 4)
        g.inst.write_buffer(a, [1, 2, 3, 4])
        g.bind(a, b)
        assert g.dispatch(1, 4) == Status.OK and g.state(b) == "GPU_CURRENT"
        assert g.inst.read_buffer(b).tolist() == [2, 4, 6, 8]  # read back from the device
        assert g.state(b) == "BOTH_CURRENT"
        g.inst.write_buffer(a, [5], offset=3)  # dirty range [3, 4): the next dispatch uploads it
        assert g.dispatch(1, 4) == Status.OK and g.inst.read_buffer(b).tolist() == [2, 4, 6, 10]
        assert g.dispatch(1, 4) == Status.OK and g.state(b) == "GPU_CURRENT"
        # A quarantine reads back what the device can still give; b is what it could not.
        g.host.context.residency.quarantine("test: the device is gone", unreadable=[g.buf(b)])
        assert g.state(b) == "CONTENTS_LOST"
        with pytest.raises(BufferAccessError, match=rf"^read_buffer: CONTENTS_LOST \(8\): buffer {b}'s only current "
                                                    "copy was on a device that failed$"):
            g.inst.read_buffer(b)
        with pytest.raises(BufferAccessError, match=r"^write_buffer: CONTENTS_LOST \(8\)"):
            g.inst.write_buffer(b, [1.0], offset=1)  # a partial write needs the lost contents
        g.inst.write_buffer(b, [9, 9, 9, 9])  # a full write replaces them, as a full setBuffer32 does
        assert g.state(b) == "CPU_CURRENT" and g.inst.read_buffer(b).tolist() == [9, 9, 9, 9]
    finally:
        g.host.close()


def test_closed_instance_and_host(make_host):
    host = make_host()
    inst = host.instantiate(host.compile(abi_module()))
    _, h = unpack_result(inst.call("createBufferPacked", 8, 2))
    inst.close()
    for use in (lambda: inst.read_buffer(h), lambda: inst.write_buffer(h, [1.0]), lambda: inst.call("firstWord"),
                lambda: inst.read_memory(0, 4)):
        with pytest.raises(ValueError, match=f"^instance {inst.id} is closed$"):
            use()
    assert dict(inst.exports) == {}
    module = host.compile("(module)")
    module.close()
    with pytest.raises(ValueError, match=f"^instantiate: module {module.id} is closed$"):
        host.instantiate(module)
    host.close()
    for use in (lambda: host.compile("(module)"), lambda: host.instantiate(module),
                lambda: host.define_func("env", "f", wasmtime.FuncType([], []), print)):
        with pytest.raises(ValueError, match="^host is closed$"):
            use()


# -- Instance.call's argument ranges ----------------------------------------------------------------------
def test_integer_arguments_must_fit_their_parameter(guest):
    inst = guest.inst
    with pytest.raises(ValueError) as e:
        inst.call("createBufferPacked", 2 ** 100, 4)
    assert str(e.value) == "createBufferPacked: argument 1 (i32) is 1267650600228229401496703205376, " \
                           "outside -2147483648..4294967295"
    with pytest.raises(ValueError, match=r"^createBufferPacked: argument 2 \(i32\) is -2147483649, outside"):
        inst.call("createBufferPacked", 8, -(2 ** 31) - 1)
    with pytest.raises(TypeError, match=r"^createBufferPacked: argument 2 \(i32\) must be an integer, got float$"):
        inst.call("createBufferPacked", 8, 1.5)
    # Signed and unsigned spellings, as wasmtime-py takes them.
    assert unpack_result(inst.call("createBufferPacked", 2 ** 32 - 1, 1))[0] == Status.TYPE_MISMATCH
    assert unpack_result(inst.call("createBufferPacked", -1, 1))[0] == Status.TYPE_MISMATCH
    assert inst.buffers.buffers == {}  # nothing was created by the refused calls


# -- host-called re-exports -----------------------------------------------------------------------------
DIRECT_EXPORTS = """(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu" "run" (func $run (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (export "createBufferPacked" (func $create))
  (export "setBuffer32" (func $set))
  (export "copyBuffer32" (func $copy))
  (export "wago_gpu.run" (func $run))
  (func (export "twice") (param f32) (result f32) (f32.mul (local.get 0) (f32.const 2))))"""


def test_a_host_called_transfer_still_needs_a_verified_contract(make_host):
    host = make_host(kernel_export="twice", kernels=[])
    inst = host.instantiate(host.compile(DIRECT_EXPORTS))
    _, h = unpack_result(inst.call("createBufferPacked", 8, 3))
    inst.write_memory(64, struct.pack("<3f", 1.5, 2.5, 3.5))
    assert inst.call("setBuffer32", h, 0, 0, 64, 3) == Status.UNSUPPORTED_STORAGE  # no kernels: contract unverified
    assert "contract is unverified" in host.buffer_snapshot().last.reason


def test_reexported_imports_called_from_the_host_move_data(make_host):
    host = make_host(kernel_export="twice")
    inst = host.instantiate(host.compile(DIRECT_EXPORTS))
    _, h = unpack_result(inst.call("createBufferPacked", 8, 3))
    inst.write_memory(64, struct.pack("<3f", 1.5, 2.5, 3.5))
    assert inst.call("setBuffer32", h, 0, 0, 64, 3) == Status.OK
    assert inst.read_buffer(h).tolist() == [1.5, 2.5, 3.5]
    assert inst.call("copyBuffer32", h, 1, 0, 128, 2) == Status.OK
    assert struct.unpack("<2f", inst.read_memory(128, 8)) == (2.5, 3.5)
    assert inst.call("copyBuffer32", h, 0, 0, 65536 - 4, 3) == Status.INVALID_RANGE  # its own memory's bounds
    # The legacy import answers FALLBACK (1: the device is off), not INVALID_RANGE (2): it found memory 0.
    assert inst.call("wago_gpu.run", 64, 128, 3) == 1


# -- lazy exports ----------------------------------------------------------------------------------------
def test_instantiating_reads_no_export_up_front(make_host, monkeypatch):
    """Exports are looked up by name when used: wasmtime-py's eager reading of all of them (quadratic
    in their number: 20,000 took 18.8 s) never runs. bench/instantiate.py measures the time."""
    import wasmtime._instance as wi

    read: list[int] = []
    original = wi.InstanceExports.__init__

    def counting(self, *args):
        original(self, *args)
        read.append(len(self))

    host = make_host()
    module = host.compile("(module " + "".join(f'(func (export "f{i}") (result i32) i32.const {i})'
                                               for i in range(2000)) + ")")
    monkeypatch.setattr(wi.InstanceExports, "__init__", counting)
    inst = host.instantiate(module)
    assert read and max(read) < 100  # the plugin's own small accessor module only
    assert inst.call("f1999") == 1999 and inst.call("f7") == 7
    assert "f1234" in inst.exports and "nope" not in inst.exports
    assert len(inst.exports) == 2000 and list(inst.exports)[:2] == ["f0", "f1"]


# -- module sources ------------------------------------------------------------------------------------
def test_compile_takes_a_path(make_host, tmp_path):
    host = make_host()
    wat = tmp_path / "guest.wat"
    wat.write_text('(module (func (export "f") (result i32) i32.const 4))')
    assert host.instantiate(host.compile(wat)).call("f") == 4
    binary = tmp_path / "guest.wasm"
    binary.write_bytes(wasmtime.wat2wasm(wat.read_text()))
    assert host.instantiate(host.compile(binary)).call("f") == 4
    assert host.instantiate(host.compile(ROOT / "examples" / "guests" / "double.wasm")).call("run") == 1


@pytest.mark.parametrize("name, content, message", [
    ("text.wasm", b"(module)", "{path}: not a Wasm module: a .wasm file must start with \\0asm, this one starts "
                               "with b'(module)'"),
    ("binary.wat", b"\0asm\1\0\0\0", "{path}: a .wat file must hold WAT text, this one holds Wasm bytes"),
    ("notes.txt", b"hello world", "{path}: not a Wasm module: the bytes start with b'hello wo', neither the Wasm "
                                  "magic \\0asm nor WAT text"),
])
def test_a_file_that_is_not_what_its_name_says(make_host, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ModuleError) as e:
        make_host().compile(path)
    assert str(e.value) == message.format(path=path)


def test_wat_errors_keep_line_column_and_caret(make_host):
    host = make_host()
    with pytest.raises(ModuleError) as e:
        host.compile('(module\n  (func (export "f") (result i32)\n    i32.const x))')
    assert str(e.value) == "invalid WAT at line 3, column 15: expected a i32"
    assert (e.value.line, e.value.column) == (3, 15)
    assert e.value.excerpt == "    3 |     i32.const x))\n      |               ^"
    with pytest.raises(ModuleError) as e:
        host.compile("guest.wasm")
    assert str(e.value) == ("invalid WAT at line 1, column 1: expected `(` "
                            "(to compile a file, pass pathlib.Path('guest.wasm'))")
    with pytest.raises(ModuleError, match=r"^not a Wasm module: the bytes start with b'# not wa'"):
        host.compile(b"# not wat")
    assert host.instantiate(host.compile(b";; a comment first\n(module)")) is not None


# -- every error status has a reason ---------------------------------------------------------------------
def test_every_error_status_records_a_reason(guest):
    inst = guest.inst
    a, b, small = guest.create(F32, 4), guest.create(F32, 4), guest.create(F32, 2)
    i32 = guest.create(ElementType.I32, 4)

    def last_after(*call) -> tuple[int, str, str]:
        status = inst.call(*call)
        op = guest.host.buffer_snapshot().last
        return status, op.reason_code, op.reason

    iid = inst.id
    assert last_after("freeBuffer", 999) == (Status.INVALID_HANDLE, "CONTRACT_ERROR",
                                              f"handle 999 is not a live buffer of instance {iid}")
    assert last_after("bindBuffer", 8, a) == (Status.INVALID_BINDING, "CONTRACT_ERROR", "slot 8 is not below 8")
    assert last_after("setBuffer32", a, 3, 0, 0, 2) == (
        Status.INVALID_RANGE, "CONTRACT_ERROR", f"elements [3, 5) lie past the end of buffer {a} (F32, 4 elements)")
    assert last_after("copyBuffer32", a, 0, 0, 65535, 4) == (
        Status.INVALID_RANGE, "CONTRACT_ERROR", "guest bytes [65535, 65551) lie past memory 0's 65536 bytes")
    assert last_after("dispatch", 1, 4) == (Status.INVALID_BINDING, "CONTRACT_ERROR",
                                            "kernel 1 declares slot 0, which has no buffer bound")
    guest.bind(a, a)
    assert last_after("dispatch", 1, 4)[2] == (f"buffer {a} fills slot 1 and another declared slot "
                                               "(a handle may fill one slot)")
    guest.bind(a, i32)
    assert last_after("dispatch", 1, 4) == (Status.TYPE_MISMATCH, "CONTRACT_ERROR",
                                            f"kernel 1 declares slot 1 F32; buffer {i32} bound there is I32")
    guest.bind(small, b)
    assert last_after("dispatch", 1, 4) == (
        Status.INVALID_RANGE, "CONTRACT_ERROR", f"count 4 exceeds the 2 elements of buffer {small} in slot 0 "
                                                "(every bound buffer holds at least count elements)")
    assert last_after("dispatch", 9, 4) == (Status.INVALID_KERNEL, "CONTRACT_ERROR", "no kernel with ID 9")
    status, handle = unpack_result(inst.call("createBufferPacked", 99, 1))
    op = guest.host.buffer_snapshot().last
    assert (status, op.reason) == (Status.TYPE_MISMATCH, "unknown element type 99")
    status, _ = unpack_result(inst.call("createBufferPacked", 8, 10_000_001))
    assert (status, guest.host.buffer_snapshot().last.reason) == (Status.LIMIT_EXCEEDED,
                                                                  "count 10000001 is above max_elements 10000000")
    failure = guest.host.buffer_snapshot().last_failure
    assert failure.import_name == "createBufferPacked" and failure.status == Status.LIMIT_EXCEEDED
    assert inst.call("freeBuffer", a) == Status.OK
    assert guest.host.buffer_snapshot().last_failure.status == Status.LIMIT_EXCEEDED  # kept across successes


def test_exports_hide_the_hosts_memory_exports(make_host):
    host = make_host()
    inst = host.instantiate(host.compile('(module (memory (export "mem") 1) (memory 2) (func (export "f")))'))
    assert list(inst.exports) == ["mem", "f"] and len(inst.exports) == 2
    assert "wagogpu:memory:0" not in inst.exports and "wagogpu:memory:1" not in inst.exports
    with pytest.raises(KeyError):
        inst.exports["wagogpu:memory:1"]
    assert len(inst.memory_view(1)) == 2 * 65536 and inst.read_memory(0, 4, memory=1) == bytes(4)


def test_a_dispatch_record_prints_on_one_line_and_repr_keeps_every_field():
    from dataclasses import fields

    from wagogpu.diagnostics import BufferOperation, Outcome, ReasonCode

    op = BufferOperation.start("dispatch", 1, 4, 1)
    op.status, op.outcome, op.reason_code = 1, Outcome.CPU_FALLBACK_READY, ReasonCode.BELOW_THRESHOLD
    op.reason, op.total, op.upload, op.compute = "count 4 is below min_elements 64", 0.0015, 0.0002, 0.001
    assert str(op) == ("dispatch kernel 1 count 4: status 1, CPU_FALLBACK_READY (BELOW_THRESHOLD: count 4 is below "
                       "min_elements 64), 1.500 ms (upload 0.200 ms, compute 1.000 ms)")
    freed = BufferOperation.start("freeBuffer", 1, 0, 0)
    freed.outcome = Outcome.OK
    assert str(freed) == "freeBuffer: status 0, OK, 0.000 ms" and str(BufferOperation()) == "no import yet"
    assert all(f"{f.name}=" in repr(op) for f in fields(BufferOperation))
