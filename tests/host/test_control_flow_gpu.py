"""Kernels of the extended subset end to end through Host on the adapter (lavapipe unless WAGO_GPU_TEST=1):
the Mandelbrot loop kernel on the GPU; Wasm traps, an exhausted loop budget and out-of-range gathers
make dispatch return 1 with nothing committed, and the guest's CPU runner then traps (or finishes)
exactly as Wasm does; conditional writes keep the old contents; and random programs give the same
buffers on the GPU path as on a CPU-only host."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig, Status, compile_buffer_wgsl
from wagogpu.abi.table import TYPE_INFO
from wagogpu.compiler import reader as lim
from wagogpu.compiler.valuetext import OPAQUE_ZERO

from ..guests import abi_module
from ..gpu_support import Guest, gpu_host

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from flowgen import FLOW_BINDINGS, LOCALS, flow_inputs, flow_kernel, flow_programs  # noqa: E402

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

E, A = ElementType, Access
INT_KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                          [BindingConfig(0, E.I32, A.READ), BindingConfig(2, E.I32, A.WRITE)])  # no float consent


def kernel_text(body: str, locals_: str = LOCALS, name: str = "k") -> str:
    """The kernel `name` and a CPU runner that calls it for every index (runs inside tests/guests.abi_module)."""
    return f"""
  (func $kernel_{name} (export "wago_gpu.kernel.{name}") (param $i i32) {locals_} {body})
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $j i32)
    (block $done (loop $next (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
      (call $kernel_{name} (local.get $j)) (local.set $j (i32.add (local.get $j) (i32.const 1))) (br $next))))"""


def rd(slot: int, t: str = "I32", element: str = "(local.get $i)") -> str:
    return f"(call $readBuffer{t} (call $getBuffer (i32.const {slot})) {element})"


def wr(slot: int, t: str, value: str) -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


@dataclass
class Job:
    status: int  # dispatch's status
    reason: str  # the dispatch's reason code
    trapped: bool  # the CPU runner (run after status 1) trapped
    outputs: dict[int, np.ndarray]  # every slot's stored values after the job
    committed: set[int]  # slots whose buffer the dispatch itself changed (version bumped)


def run_job(host: Host, body: str, kernel: KernelConfig, inputs: dict[int, list[int]], count: int,
            locals_: str = LOCALS, length: int | None = None) -> Job:
    """Create and fill one buffer per binding (length elements, default count), dispatch kernel 1
    over count elements, run the CPU runner on status 1, read every buffer back."""
    g = Guest(host, kernels=kernel_text(body, locals_))
    try:
        n = length if length is not None else count
        handles = {}
        for b in kernel.bindings:
            width = TYPE_INFO[b.type].stored_bytes
            dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
            data = np.asarray(inputs.get(b.slot, [0] * n), dtype=np.uint64).astype(dtype)
            handles[b.slot] = g.create(b.type, n)
            assert g.set_raw(handles[b.slot], data.tobytes(), n) == 0
            assert g.inst.call("bindBuffer", b.slot, handles[b.slot]) == 0
        before = {s: g.version(h) for s, h in handles.items()}
        status = g.dispatch(kernel.id, count)
        reason = g.last.reason_code
        committed = {s for s, h in handles.items() if g.version(h) != before[s]}
        trapped = False
        if status == Status.CPU_FALLBACK:
            try:
                g.inst.call(kernel.cpu_export, count)
            except Exception:
                trapped = True
        outputs = {}
        for b in kernel.bindings:
            width = TYPE_INFO[b.type].stored_bytes
            assert g.inst.call("copyBuffer32", handles[b.slot], 0, 0, 0, n) == 0
            raw = g.inst.read_memory(0, width * n)
            outputs[b.slot] = np.frombuffer(raw, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32}[width]).copy()
        return Job(status, reason, trapped, outputs, committed)
    finally:
        g.inst.close()


@pytest.fixture(scope="module")
def gpu():
    host = gpu_host(kernels=[flow_kernel()])
    yield host
    host.close()


@pytest.fixture(scope="module")
def cpu():
    host = Host(Config(kernels=[flow_kernel()], disabled=True))
    yield host
    host.close()


def inputs_for(count: int, ints) -> dict[int, list[int]]:
    return {0: [v & 0xFFFFFFFF for v in ints], 1: [0x3F800000] * count, 2: [0xDEADBEEF] * count,
            3: [0x40000000] * count, 4: [i & 0xFF for i in range(count)]}


# ---- the Mandelbrot loop kernel ---------------------------------------------------------------------
def test_mandelbrot_loop_kernel_runs_on_the_gpu():
    from examples.mandelbrot.__main__ import MANDEL, STEP, GUEST

    host = gpu_host(kernels=[STEP, MANDEL])
    try:
        module = host.compile(GUEST.read_bytes())
        with host.instantiate(module) as inst:
            assert inst.call("render_loop", 48, 32, 40) == 0
            assert (inst.call("gpu_dispatches"), inst.call("cpu_dispatches")) == (1, 0)
            gpu_counts = np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * 48 * 32), "<u4").copy()
            assert inst.call("render_direct", 48, 32, 40) == 0
            direct = np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * 48 * 32), "<u4").copy()
        assert np.count_nonzero(gpu_counts != direct) <= 0.01 * direct.size
        assert gpu_counts.max() == 40 and gpu_counts.min() < 5
    finally:
        host.close()


# ---- traps, loop budget, gathers --------------------------------------------------------------------
TRAPS = {
    "div_by_zero": wr(2, "I32", f"(i32.div_s (i32.const 100) (i32.sub {rd(0)} (i32.const 7)))"),
    "int_min_by_minus_one": wr(2, "I32", f"(i32.div_s (i32.const -2147483648) (i32.sub {rd(0)} (i32.const 8)))"),
    "rem_by_zero": wr(2, "I32", f"(i32.rem_u (i32.const 100) (i32.sub {rd(0)} (i32.const 7)))"),
    "trunc_out_of_range": wr(2, "I32", f"(i32.trunc_f32_s (f32.mul (f32.convert_i32_s {rd(0)}) (f32.const 4e8)))"),
    "unreachable": f"(if (i32.eq {rd(0)} (i32.const 7)) (then unreachable))" + wr(2, "I32", "(i32.const 1)"),
}


@pytest.mark.parametrize("name", list(TRAPS))
def test_wasm_traps_fall_back_and_the_runner_traps(gpu, cpu, name):
    count = 300
    ints = [3] * count
    ints[257] = 7  # one element in the second workgroup traps
    job = run_job(gpu, TRAPS[name], flow_kernel(), inputs_for(count, ints), count)
    assert (job.status, job.reason, job.trapped) == (Status.CPU_FALLBACK, "KERNEL_TRAP", True)
    assert job.committed == set()  # nothing committed: the buffers are still the ones the guest set
    reference = run_job(cpu, TRAPS[name], flow_kernel(), inputs_for(count, ints), count)
    assert reference.trapped and np.array_equal(job.outputs[2], reference.outputs[2])  # same partial effects
    ok = run_job(gpu, TRAPS[name], flow_kernel(), inputs_for(count, [3] * count), count)
    assert (ok.status, ok.trapped, ok.committed) == (Status.OK, False, {2})


def test_loop_budget_falls_back_without_committing(monkeypatch):
    monkeypatch.setattr(lim, "LOOP_BUDGET", 50)
    host = gpu_host(kernels=[flow_kernel()])
    try:
        body = (f"(loop $l (br_if $l (i32.lt_u (local.tee $a (i32.add (local.get $a) (i32.const 1))) {rd(0)})))"
                + wr(2, "I32", "(local.get $a)"))
        count = 100
        within = run_job(host, body, flow_kernel(), inputs_for(count, [50] * count), count)
        assert within.status == Status.OK and (within.outputs[2] == 50).all()
        over = run_job(host, body, flow_kernel(), inputs_for(count, [50] * 99 + [51]), count)
        assert (over.status, over.reason, over.trapped) == (Status.CPU_FALLBACK, "LOOP_BUDGET", False)
        assert over.committed == set()
        assert over.outputs[2].tolist() == [50] * 99 + [51]  # the CPU runner finished the job
    finally:
        host.close()


def test_gather_out_of_range_falls_back_and_the_runner_traps(gpu):
    count = 100
    body = wr(2, "I32", rd(0, element=f"(i32.add (local.get $i) {rd(0)})"))
    inside = run_job(gpu, body, flow_kernel(), inputs_for(count, [1] * 99 + [0]), count)
    assert inside.status == Status.OK
    assert inside.outputs[2].tolist() == [1] * 98 + [0, 0]
    beyond = run_job(gpu, body, flow_kernel(), inputs_for(count, [1] * count), count)
    assert (beyond.status, beyond.reason, beyond.trapped) == (Status.CPU_FALLBACK, "INDEX_RANGE", True)
    negative = run_job(gpu, body, flow_kernel(), inputs_for(count, [-5] * count), count)
    assert (negative.reason, negative.trapped) == ("INDEX_RANGE", True)
    # a gather reaches the whole buffer, past the dispatch count too
    longer = run_job(gpu, body, flow_kernel(), inputs_for(count + 20, [20] * (count + 20)), count, length=count + 20)
    assert longer.status == Status.OK and (longer.outputs[2][:count] == 20).all()


def test_conditional_writes_keep_the_old_contents(gpu, cpu):
    """A WRITE slot written only on some paths is seeded from its old contents (read_before_write)."""
    body = (f"(if (i32.and {rd(0)} (i32.const 1)) (then {wr(2, 'I32', '(local.get $i)')}))"
            f" (block $b (br_if $b (i32.lt_s {rd(0)} (i32.const 4))) {wr(4, 'U8', '(i32.const 200)')})")
    count = 300
    ints = list(range(count))
    for length in (count, count + 40):  # the whole buffer, and a prefix of it
        job = run_job(gpu, body, flow_kernel(), inputs_for(length, ints + [0] * 40), count, length=length)
        ref = run_job(cpu, body, flow_kernel(), inputs_for(length, ints + [0] * 40), count, length=length)
        assert job.status == Status.OK
        assert np.array_equal(job.outputs[2], ref.outputs[2]) and np.array_equal(job.outputs[4], ref.outputs[4])
        assert job.outputs[2][0] == 0xDEADBEEF and job.outputs[2][1] == 1


def test_integer_loops_need_no_float_consent():
    host = gpu_host(kernels=[INT_KERNEL])
    try:
        body = (f"(local.set $b {rd(0)}) (block $done (loop $next (br_if $done (i32.le_s (local.get $b) (i32.const 0)))"
                " (local.set $a (i32.add (local.get $a) (local.get $b)))"
                " (local.set $b (i32.sub (local.get $b) (i32.const 1))) (br $next)))" + wr(2, "I32", "(local.get $a)"))
        count = 64
        job = run_job(host, body, INT_KERNEL, {0: list(range(count))}, count, locals_="(local $a i32) (local $b i32)")
        assert (job.status, job.reason) == (Status.OK, "NONE")
        assert job.outputs[2].tolist() == [k * (k + 1) // 2 for k in range(count)]
    finally:
        host.close()


# ---- differential: random programs, GPU path vs CPU-only host ----------------------------------------
def _close_floats(a: np.ndarray, b: np.ndarray, driver_folds: bool = False) -> bool:
    """GPU f32 bits `a` against Wasm's `b`, within relaxed_float's rounding tolerance (NaN for NaN, any
    payload). With `driver_folds` (a reference-subset kernel, whose WGSL keeps the driver's freedom to
    fold, docs/gpu.md), an element where Wasm gives NaN, an infinity or a zero may be anything:
    `x * 0` folded to 0 for a NaN `x` is that freedom, not a wrong answer (finite values stay checked)."""
    fa, fb = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    special = ~np.isfinite(fb) | (fb == 0) if driver_folds else np.zeros(fb.shape, bool)
    with np.errstate(invalid="ignore"):
        return bool(np.all(special | (np.isnan(fa) & np.isnan(fb)) | np.isclose(fa, fb, rtol=1e-4, atol=1e-3) | (fa == fb)))


def keeps_driver_freedom(body: str) -> bool:
    """Whether the kernel of `body` is in the reference subset: its WGSL has no opaque float operand."""
    wasm = wasmtime.wat2wasm(abi_module(kernels=kernel_text(body)))
    return OPAQUE_ZERO not in compile_buffer_wgsl(wasm, flow_kernel())


SPECIALS = [0x7FC00000, 0x7F800000, 0xFF800000, 0x80000000, 0x00000000, 0x3FC00000]  # NaN, ±Inf, ∓0, 1.5


def assert_specials_as_wasm(gpu: Host, cpu: Host, body: str, count: int = 64) -> None:
    """`body` over slot 1 holding SPECIALS in turn runs on the GPU (status 0), and slot 3 comes out
    as Wasm's: NaN where Wasm gives NaN (some case does), every other element bit for bit (zeros'
    signs too)."""
    inputs = {**inputs_for(count, range(count)), 1: (SPECIALS * count)[:count]}
    job, ref = run_job(gpu, body, flow_kernel(), inputs, count), run_job(cpu, body, flow_kernel(), inputs, count)
    assert (job.status, ref.status) == (Status.OK, Status.CPU_FALLBACK)
    got, want = job.outputs[3].view(np.float32), ref.outputs[3].view(np.float32)
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(job.outputs[3][~np.isnan(want)], ref.outputs[3][~np.isnan(want)])


@pytest.mark.parametrize("op, in_reference", [("f32.mul", True), ("f32.add", True), ("f32.sub", True),
                                              ("f32.div", False)])  # f32.div leaves the reference subset
def test_outside_the_reference_subset_no_driver_folds_special_values(gpu, cpu, op, in_reference):
    """out = x op 0.0 with x NaN, ±Inf or a zero. Straight-line over F32 slots, the kernel is in the
    reference subset and keeps the reference's WGSL and the driver's freedom (lavapipe folds `x * 0`
    to +0 and `x + 0` to x there); in a block it is outside, the constant is opaque to the driver,
    and NaN, the infinities and the zeros' signs come out as Wasm's on every adapter."""
    straight = wr(3, "F32", f"({op} {rd(1, 'F32')} (f32.const 0))")
    blocked = f"(block $b {straight})"
    assert keeps_driver_freedom(straight) == in_reference and not keeps_driver_freedom(blocked)
    assert_specials_as_wasm(gpu, cpu, blocked)


_SQRT_ABS = f"(f32.sqrt (f32.abs {rd(1, 'F32')}))"  # outside the reference subset (f32.sqrt)


@pytest.mark.parametrize("value", [f"(f32.sub {_SQRT_ABS} {_SQRT_ABS})",
                                   f"(f32.add (f32.sub {_SQRT_ABS} {_SQRT_ABS}) {rd(1, 'F32')})"])
def test_two_computations_of_one_value_are_two_values_to_the_driver(gpu, cpu, value):
    """`sqrt(|x|) - sqrt(|x|)` over two reads of one element (found by the random programs below):
    the driver merges the two computations into one value and, if its second operand were not a
    distinct copy (valuetext.py), folds `y - y` to +0, where Wasm gives NaN for an infinite x."""
    body = wr(3, "F32", value)
    assert not keeps_driver_freedom(body)
    assert_specials_as_wasm(gpu, cpu, body)


@pytest.mark.parametrize("value", ["(f32.div (f32.const 0) (f32.const -4))", "(f32.sqrt (f32.const -0))",
                                   "(f32.div (f32.const 0) (f32.const 0))", "(f32.add (f32.const -0) (f32.const -0))"])
def test_a_constant_only_operation_is_not_folded_outside_the_reference_subset(gpu, cpu, value):
    """All operands constant: the compiler copies the first into a let (no WGSL const-expression),
    and that let is opaque too, else the driver knows its value: `0 / -4` came out +0 on lavapipe
    (found by fuzz/differential.py), where Wasm gives -0."""
    body = f"(block $b {wr(3, 'F32', value)})"
    assert not keeps_driver_freedom(body)
    count = 64
    inputs = inputs_for(count, range(count))
    job, ref = run_job(gpu, body, flow_kernel(), inputs, count), run_job(cpu, body, flow_kernel(), inputs, count)
    assert (job.status, ref.status) == (Status.OK, Status.CPU_FALLBACK)
    want = ref.outputs[3]
    if np.isnan(want.view(np.float32)).all():
        assert np.isnan(job.outputs[3].view(np.float32)).all()
    else:
        assert np.array_equal(job.outputs[3], want)  # the zero's sign too


def test_a_select_of_float_constants_is_not_folded_outside_the_reference_subset(gpu, cpu):
    """A select of two float constants under a condition the driver can decide (a br_if always
    taken): its constants are hidden like any other float constant, else the driver knows the
    result is 0 and folds `0 * sqrt(|x|)` to 0 where Wasm gives NaN for an infinite x (found by
    fuzz/differential.py)."""
    decided = "(block (result i32) (drop (br_if 0 (i32.const 1) (i32.const 1))) (i32.const 0))"
    assert_specials_as_wasm(gpu, cpu, wr(3, "F32", f"(f32.mul (select (f32.const 0) (f32.const 1) {decided}) {_SQRT_ABS})"))


def test_a_value_the_driver_knows_to_be_zero_keeps_its_second_copy_opaque(gpu, cpu):
    """`-0 * f32(i - i)`: the driver knows the conversion is 0, so its OR with the run-time zero is
    that zero, and an XOR with the same word would give a known 0 back (`x * 0` folded to +0 on
    lavapipe, where Wasm gives -0); the second copy's XOR uses another zero word (found by
    fuzz/differential.py)."""
    known_zero = "(f32.convert_i32_s (i32.sub (local.get $i) (local.get $i)))"
    body = f"(block $b {wr(3, 'F32', f'(f32.mul (f32.const -0) {known_zero})')})"
    count = 64
    inputs = inputs_for(count, range(count))
    job, ref = run_job(gpu, body, flow_kernel(), inputs, count), run_job(cpu, body, flow_kernel(), inputs, count)
    assert (job.status, ref.status) == (Status.OK, Status.CPU_FALLBACK)
    assert ref.outputs[3].tolist() == [0x80000000] * count and np.array_equal(job.outputs[3], ref.outputs[3])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@pytest.mark.slow
@given(st.data())
def test_random_programs_same_on_gpu_and_cpu(gpu, cpu, data):
    program = data.draw(flow_programs())
    count = data.draw(st.sampled_from([64, 300]))
    inputs = flow_inputs(data.draw, count)
    job = run_job(gpu, program.body, flow_kernel(), inputs, count)
    ref = run_job(cpu, program.body, flow_kernel(), inputs, count)
    assert ref.status == Status.CPU_FALLBACK
    assert job.trapped == ref.trapped, program.body
    if job.status == Status.OK:
        assert not ref.trapped
    else:
        assert job.status == Status.CPU_FALLBACK and job.reason in ("KERNEL_TRAP", "INDEX_RANGE"), job.reason
        assert job.trapped and job.committed == set()
    for slot, got in job.outputs.items():
        if slot == 3 and not ref.trapped:
            assert _close_floats(got, ref.outputs[3], keeps_driver_freedom(program.body)), program.body
        else:
            assert np.array_equal(got, ref.outputs[slot]), (slot, program.body)


def test_flow_bindings_are_what_the_generator_assumes():
    assert [(b.slot, b.type, b.access) for b in FLOW_BINDINGS] == [
        (0, E.I32, A.READ), (1, E.F32, A.READ), (2, E.I32, A.WRITE), (3, E.F32, A.READ_WRITE), (4, E.U8, A.READ_WRITE)]
