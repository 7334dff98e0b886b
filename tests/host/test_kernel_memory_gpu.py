"""Compiled-language kernels end to end on the adapter (lavapipe unless WAGO_GPU_TEST=1): inlined
helpers, the shadow stack, and loads of guest memory through the dispatch-time snapshot. A snapshot
is never stale (the guest changes its table between dispatches), a load outside guest memory
makes dispatch return 1 with nothing committed and the CPU runner trap as Wasm does, and a call
to a function that never returns falls back the same way when an invocation reaches it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from wagogpu import Access, BindingConfig, ElementType, Host, KernelConfig, Status

from ..gpu_support import gpu_host
from ..gpu_support import Guest
from .test_control_flow_gpu import kernel_text, rd

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access
KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                      [BindingConfig(0, E.I32, A.READ), BindingConfig(2, E.I32, A.WRITE)])
TABLE_AT = 8192  # above the staging area the inputs pass through (guest offset 0)
TABLE = [(7 * k * k + 3) & 0xFFFFFFFF for k in range(16)]
TABLE_TEXT = "".join("\\%02x" % b for v in TABLE for b in v.to_bytes(4, "little"))
HELPERS = f"""
  (data (i32.const {TABLE_AT}) "{TABLE_TEXT}")
  (global $sp (mut i32) (i32.const 60000))
  (global $scale i32 (i32.const 3))
  (func $lookup (param $k i32) (result i32) (i32.load offset={TABLE_AT} (i32.shl (local.get $k) (i32.const 2))))
  (func $twice (param $v i32) (result i32) (i32.add (call $lookup (local.get $v)) (local.get $v)))
  (func $panic (param i32) (unreachable))
"""


def write_out(value: str) -> str:
    return f"(call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i) {value})"


@dataclass
class Job:
    status: int
    reason: str
    trapped: bool  # the CPU runner (run after status 1) trapped
    committed: bool  # the dispatch changed the output buffer
    out: list[int]


def job(host: Host, body: str, inputs: list[int], locals_: str = "(local $p i32)") -> Job:
    """One dispatch of `body` over len(inputs) elements; the CPU runner on status 1."""
    g = Guest(host, kernels=kernel_text(body, locals_) + HELPERS)
    try:
        n = len(inputs)
        src, dst = g.create(E.I32, n), g.create(E.I32, n)
        assert g.set_raw(src, np.asarray(inputs, dtype=np.uint32).tobytes(), n) == 0
        g.bind(src, dst, slots=[0, 2])
        before = g.version(dst)
        status = g.dispatch(1, n)
        reason, committed, trapped = g.last.reason_code, g.version(dst) != before, False
        if status == Status.CPU_FALLBACK:
            try:
                g.inst.call("wago_gpu.cpu.k", n)
            except Exception:
                trapped = True
        assert g.inst.call("copyBuffer32", dst, 0, 0, 0, n) == 0
        return Job(status, reason, trapped, committed, np.frombuffer(g.inst.read_memory(0, 4 * n), np.uint32).tolist())
    finally:
        g.inst.close()


@pytest.fixture(scope="module")
def gpu():
    host = gpu_host(kernels=[KERNEL])
    yield host
    host.close()


LOOKUP = write_out(f"(i32.mul (call $twice (i32.and {rd(0)} (i32.const 15))) (global.get $scale))")


def test_inlined_helpers_load_a_data_table_on_the_gpu(gpu):
    ks = [k * 5 % 16 for k in range(300)]
    got = job(gpu, LOOKUP, ks)
    assert (got.status, got.reason) == (Status.OK, "NONE")
    want = [((TABLE[k] + k) * 3) & 0xFFFFFFFF for k in ks]
    assert got.out == want


def test_a_changed_table_is_read_anew():
    """Between two dispatches the guest stores into its table: the second dispatch sees it."""
    host = gpu_host(kernels=[KERNEL])
    try:
        g = Guest(host, kernels=kernel_text(LOOKUP, "(local $p i32)") + HELPERS)
        n = 64
        src, dst = g.create(E.I32, n), g.create(E.I32, n)
        assert g.set_raw(src, np.arange(n, dtype=np.uint32).tobytes(), n) == 0
        g.bind(src, dst, slots=[0, 2])
        answers = []
        for round_ in range(3):
            table = np.array([(v + 1000 * round_) & 0xFFFFFFFF for v in TABLE], dtype=np.uint32)
            g.inst.write_memory(TABLE_AT, table.tobytes())
            assert g.dispatch(1, n) == Status.OK
            assert g.inst.call("copyBuffer32", dst, 0, 0, 0, n) == 0
            out = np.frombuffer(g.inst.read_memory(0, 4 * n), dtype=np.uint32)
            answers.append(out.copy())
            assert out.tolist() == [((int(table[k % 16]) + k % 16) * 3) & 0xFFFFFFFF for k in range(n)]
        assert not np.array_equal(answers[0], answers[1])
    finally:
        host.close()


def test_a_load_outside_memory_falls_back_and_traps(gpu):
    body = write_out(f"(i32.load offset={TABLE_AT} (i32.shl {rd(0)} (i32.const 2)))")
    got = job(gpu, body, [1, 2, 0x10000, 3])  # 0x10000 * 4 + 1024 is past the 1-page memory
    assert (got.status, got.reason, got.trapped) == (Status.CPU_FALLBACK, "INDEX_RANGE", True)
    assert not got.committed


def test_a_load_inside_memory_but_outside_the_snapshot_gives_the_cpu_answer(gpu):
    """Below the lowest static address: the GPU cannot answer, the CPU runner reads memory itself."""
    body = write_out(f"(i32.load (i32.mul {rd(0)} (i32.const 0)))")  # address 0, not a constant
    got = job(gpu, body, [1, 2, 3])
    assert (got.status, got.reason, got.trapped) == (Status.CPU_FALLBACK, "INDEX_RANGE", False)
    assert got.out == [1, 1, 1]  # the first input word, staged at guest offset 0


# A helper at -O0: locals in a frame below the stack pointer, moved and restored.
SHADOW = write_out(f"""
    (local.set $p (i32.sub (global.get $sp) (i32.const 16)))
    (global.set $sp (local.get $p))
    (i32.store offset=12 (local.get $p) (local.get $i))
    (i32.store offset=8 (local.get $p) {rd(0)})
    (block $b (br_if $b (i32.lt_u (i32.load offset=8 (local.get $p)) (i32.const 100)))
      (i32.store offset=8 (local.get $p) (i32.const 100)))
    (i32.add (i32.load offset=8 (local.get $p)) (i32.load offset=12 (local.get $p)))
    (global.set $sp (i32.add (local.get $p) (i32.const 16)))""")


def test_a_shadow_stack_frame_is_private_per_invocation(gpu):
    values = [(k * 37) % 250 for k in range(300)]
    got = job(gpu, SHADOW, values)
    assert (got.status, got.reason) == (Status.OK, "NONE")
    assert got.out == [min(v, 100) + k for k, v in enumerate(values)]


def test_a_call_that_never_returns_falls_back_when_reached(gpu):
    body = f"(if (i32.gt_u {rd(0)} (i32.const 5)) (then (call $panic (i32.const 1))))" + write_out(rd(0))
    quiet = job(gpu, body, [1, 2, 3])
    assert (quiet.status, quiet.out) == (Status.OK, [1, 2, 3])
    reached = job(gpu, body, [1, 9, 3])
    assert (reached.status, reached.reason, reached.trapped) == (Status.CPU_FALLBACK, "KERNEL_TRAP", True)
    assert not reached.committed


# musl's FORCE_EVAL pattern: on one path an address into the frame is left in a local that the
# other path sets to a number, and nothing reads it after the paths meet (addressvars.py).
ADDRESS_ON_ONE_PATH = f"""
    (local.set $p (i32.sub (global.get $sp) (i32.const 16)))
    (global.set $sp (local.get $p))
    (if (i32.lt_u {rd(0)} (i32.const 50))
      (then (i32.store offset=12 (local.get $p) (i32.mul {rd(0)} (i32.const 3)))
            (local.set $q (i32.add (local.get $p) (i32.const 12)))
            {write_out("(i32.load (local.get $q))")})
      (else (local.set $q (i32.const 5)) {write_out(rd(0))}))
    (global.set $sp (i32.add (local.get $p) (i32.const 16)))"""


def test_a_frame_address_left_in_a_local_on_one_path_runs_on_the_gpu(gpu):
    values = [(k * 13) % 100 for k in range(300)]
    got = job(gpu, ADDRESS_ON_ONE_PATH, values, "(local $p i32) (local $q i32)")
    assert (got.status, got.reason) == (Status.OK, "NONE")
    assert got.out == [v * 3 if v < 50 else v for v in values]


# The stack protector's epilogue at -O0: a canary in the frame, compared before returning; the
# matching path restores the stack pointer and returns inside the block, the other one calls a
# handler that never returns (shadow.release_to_return). Here the "canary" is the input, so
# inputs of 1000 and above take the handler's path.
PROTECTED = f"""
    (local.set $p (i32.sub (global.get $sp) (i32.const 16)))
    (global.set $sp (local.get $p))
    (i32.store offset=12 (local.get $p) {rd(0)})
    (i32.store offset=8 (local.get $p) (i32.mul {rd(0)} (i32.const 7)))
    {write_out("(i32.load offset=8 (local.get $p))")}
    (block $bad
      (br_if $bad (i32.ge_u (i32.load offset=12 (local.get $p)) (i32.const 1000)))
      (global.set $sp (i32.add (local.get $p) (i32.const 16)))
      (return))
    (call $panic (i32.const 2))"""


def test_a_stack_protector_epilogue_runs_on_the_gpu_and_its_failure_falls_back(gpu):
    values = [(k * 37) % 999 for k in range(300)]
    got = job(gpu, PROTECTED, values)
    assert (got.status, got.reason) == (Status.OK, "NONE")
    assert got.out == [v * 7 for v in values]
    smashed = job(gpu, PROTECTED, [1, 2000, 3])
    assert (smashed.status, smashed.reason, smashed.trapped) == (Status.CPU_FALLBACK, "KERNEL_TRAP", True)
    assert not smashed.committed
