"""i64 and f64 through guest memory on the adapter (lavapipe unless WAGO_GPU_TEST=1): loads of
8 bytes and the narrow i64 loads from the dispatch-time snapshot, 64-bit and narrow stores and
loads in the shadow frame, inlined callees with i64 and f64 parameters and results or that reuse
local indices with other types, and immutable i64 and f64 globals as constants. Each
body runs on the GPU and, through a disabled Host, in wasmtime (the CPU runner): the answers
must be equal bit for bit, and where a load leaves memory the GPU falls back and the CPU traps."""
from __future__ import annotations

import pytest

from dataclasses import replace

from wagogpu import Config, Host, Status

from .test_kernel_memory_gpu import KERNEL, TABLE, TABLE_AT, job, write_out
from .test_control_flow_gpu import rd

pytestmark = pytest.mark.gpu

FOLD = "(i32.xor (i32.wrap_i64 {0}) (i32.wrap_i64 (i64.shr_u {0} (i64.const 32))))"  # an i64 into 32 bits
LOCALS = "(local $p i32) (local $x i64)"
FLOAT_KERNEL = replace(KERNEL, relaxed_float=True)  # f64 loads and stores make a float kernel
TABLE_BYTES = b"".join(v.to_bytes(4, "little") for v in TABLE)


@pytest.fixture(scope="module")
def cpu():
    host = Host(Config(kernels=[FLOAT_KERNEL], disabled=True))
    yield host
    host.close()


@pytest.fixture(scope="module")
def gpu():
    from ..gpu_support import gpu_host
    host = gpu_host(kernels=[FLOAT_KERNEL])
    yield host
    host.close()


def same_on_both(gpu: Host, cpu: Host, body: str, inputs: list[int]) -> list[int]:
    on_gpu, on_cpu = job(gpu, body, inputs, LOCALS), job(cpu, body, inputs, LOCALS)
    assert (on_gpu.status, on_gpu.reason) == (Status.OK, "NONE")
    assert (on_cpu.status, on_cpu.trapped) == (Status.CPU_FALLBACK, False)
    assert on_gpu.out == on_cpu.out
    return on_gpu.out


def table_i64(at: int, width: int = 8, signed: bool = False) -> int:
    raw = int.from_bytes(TABLE_BYTES[at:at + width], "little")
    if signed and raw >> (8 * width - 1):
        raw -= 1 << (8 * width)
    return raw & (1 << 64) - 1


def fold(v: int) -> int:
    return (v ^ (v >> 32)) & 0xFFFFFFFF


def test_8_byte_and_narrow_i64_loads_read_the_snapshot(gpu, cpu):
    k = f"(i32.and {rd(0)} (i32.const 7))"
    loads = ("(i64.add (i64.add (i64.load offset={at} (i32.shl {k} (i32.const 3)))"
             " (i64.load8_s offset={at1} (local.get $p))) (i64.add (i64.load16_u offset={at2} (local.get $p))"
             " (i64.load32_s offset={at3} (local.get $p))))").format(at=TABLE_AT, at1=TABLE_AT + 1, at2=TABLE_AT + 6,
                                                                        at3=TABLE_AT + 12, k=k)
    body = f"(local.set $p (i32.shl {k} (i32.const 2)))" + write_out(FOLD.format(loads))
    ks = [(3 * j) % 8 for j in range(64)]
    out = same_on_both(gpu, cpu, body, ks)
    want = [fold((table_i64(8 * k) + table_i64(4 * k + 1, 1, True) + table_i64(4 * k + 6, 2)
                  + table_i64(4 * k + 12, 4, True)) & (1 << 64) - 1) for k in ks]
    assert out == want


def test_f64_loads_keep_their_bits(gpu, cpu):
    body = write_out(FOLD.format(f"(i64.reinterpret_f64 (f64.load offset={TABLE_AT} (i32.shl (i32.and {rd(0)}"
                                 " (i32.const 7)) (i32.const 3))))"))
    out = same_on_both(gpu, cpu, body, list(range(8)))
    assert out == [fold(table_i64(8 * k)) for k in range(8)]


def test_an_8_byte_load_past_memory_falls_back_and_traps(gpu):
    body = write_out(FOLD.format(f"(i64.load {rd(0)})"))
    got = job(gpu, body, [TABLE_AT, 65528, 65532], LOCALS)  # the last one reads 4 bytes past the page
    assert (got.status, got.reason, got.trapped) == (Status.CPU_FALLBACK, "INDEX_RANGE", True)
    assert not got.committed


FRAME = "(local.set $p (i32.sub (global.get $sp) (i32.const 32))) (global.set $sp (local.get $p))"
RESTORE = "(global.set $sp (i32.add (local.get $p) (i32.const 32)))"


def test_64_bit_and_narrow_stores_in_the_frame(gpu, cpu):
    x = f"(i64.mul (i64.extend_i32_s {rd(0)}) (i64.const 0x100000001))"
    body = (FRAME + f"(i64.store offset=8 (local.get $p) {x})"
            "(i64.store8 offset=8 (local.get $p) (i64.const 0x1ab))"  # the low byte of the low word changes
            "(f64.store offset=16 (local.get $p) (f64.convert_i64_s (i64.load offset=8 (local.get $p))))"
            "(i64.store32 offset=24 (local.get $p) (i64.load offset=8 (local.get $p)))"
            "(local.set $x (i64.add (i64.load offset=8 (local.get $p)) (i64.reinterpret_f64 (f64.load offset=16"
            " (local.get $p)))))"
            + write_out(f"(i32.add {FOLD.format('(local.get $x)')} (i32.add (i32.load offset=8 (local.get $p))"
                        " (i32.wrap_i64 (i64.load32_s offset=24 (local.get $p)))))") + RESTORE)
    same_on_both(gpu, cpu, body, [0, 1, -1 & 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 12345, 0xFFFF0000])


def test_a_frame_slot_stored_inside_control_flow_holds_an_i64(gpu, cpu):
    body = (FRAME + "(i64.store offset=8 (local.get $p) (i64.const -5))"
            f"(if (i32.gt_u {rd(0)} (i32.const 3)) (then (i64.store offset=8 (local.get $p)"
            f" (i64.shl (i64.extend_i32_u {rd(0)}) (i64.const 40)))))"
            + write_out(FOLD.format("(i64.load offset=8 (local.get $p))")) + RESTORE)
    out = same_on_both(gpu, cpu, body, list(range(8)))
    assert out == [fold((v << 40) & (1 << 64) - 1) if v > 3 else fold((1 << 64) - 5) for v in range(8)]


CALLEES = """
  (func $narrow (param $v i32) (result i32) (local $t i32)
    (if (i32.gt_u (local.get $v) (i32.const 2)) (then (local.set $t (i32.mul (local.get $v) (i32.const 3)))))
    (local.get $t))
  (func $wide (param $v i32) (result i32) (local $t i64)
    (if (i32.gt_u (local.get $v) (i32.const 2)) (then (local.set $t (i64.shl (i64.extend_i32_u (local.get $v))
      (i64.const 33)))))
    (i32.wrap_i64 (i64.shr_u (local.get $t) (i64.const 32))))
"""


def test_callees_reuse_local_indices_with_other_types(gpu, cpu, monkeypatch):
    """Both callees' $t is the workspace's same local index, an i32 in one and an i64 in the other."""
    from . import test_kernel_memory_gpu as memory
    monkeypatch.setattr(memory, "HELPERS", memory.HELPERS + CALLEES)
    out = same_on_both(gpu, cpu, write_out(f"(i32.add (call $narrow {rd(0)}) (call $wide {rd(0)}))"), list(range(8)))
    assert out == [(3 * v + 2 * v) if v > 2 else 0 for v in range(8)]


WIDE_CALLEES = """
  (global $k64 i64 (i64.const 0x123456789abcdef))
  (global $half f64 (f64.const 0.5))
  (func $mix (param $a i64) (param $b f64) (result i64 f64)
    (i64.xor (i64.mul (local.get $a) (global.get $k64)) (i64.reinterpret_f64 (local.get $b)))
    (f64.add (local.get $b) (global.get $half)))
  (func $div (param $a i64) (param $b i64) (result i64) (i64.div_s (local.get $a) (local.get $b)))
"""


def test_callees_with_i64_and_f64_parameters_and_results(gpu, cpu, monkeypatch):
    from . import test_kernel_memory_gpu as memory
    monkeypatch.setattr(memory, "HELPERS", memory.HELPERS + WIDE_CALLEES)
    call = f"(call $mix (i64.extend_i32_s {rd(0)}) (f64.convert_i32_u {rd(0)}))"
    body = (f"(local.set $x (i64.xor {call} (i64.reinterpret_f64)))"
            + write_out(FOLD.format("(local.get $x)")))
    out = same_on_both(gpu, cpu, body, [0, 1, 7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 123456])
    assert len(set(out)) == 7


def test_a_trap_inside_a_64_bit_callee_falls_back(gpu, monkeypatch):
    from . import test_kernel_memory_gpu as memory
    monkeypatch.setattr(memory, "HELPERS", memory.HELPERS + WIDE_CALLEES)
    body = write_out("(i32.wrap_i64 (call $div (i64.const 100) (i64.extend_i32_u " + rd(0) + ")))")
    quiet = job(gpu, body, [1, 3, 7], LOCALS)
    assert (quiet.status, quiet.out) == (Status.OK, [100, 33, 14])
    got = job(gpu, body, [1, 0, 7], LOCALS)  # a zero divisor traps in the callee
    assert (got.status, got.reason, got.trapped) == (Status.CPU_FALLBACK, "KERNEL_TRAP", True)
    assert not got.committed
