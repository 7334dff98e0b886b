"""Property tests: random kernels of the subset compile to valid WGSL; mutations never escape CompileError;
the fast and the checked instruction loops agree."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures import K, MANDEL_CONFIG, bufferwork_config, bufferwork_wasm, buffers_wasm, mandelbrot_wasm
from strategies import Program, mutations, subset_kernels
from wagogpu.compiler import CompileError, KernelClass, compile_buffer_wgsl, compile_wgsl, inspect_module
from wagogpu.compiler import reader as lim
from wagogpu.compiler.buffer import select_body, validate_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.compiler.lower import Lowering, binding_facts, lower_body

FAST = settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                deadline=None)


@FAST
@given(subset_kernels())
def test_random_subset_kernels_compile(program: Program):
    wgsl = compile_buffer_wgsl(program.source, program.kernel)
    bound = [int(s) for s in re.findall(r"var<storage, read(?:_write)?> slot(\d)", wgsl)]
    assert bound == sorted(program.reads | program.writes)
    written = {int(s) for s in re.findall(r"var<storage, read_write> slot(\d)", wgsl)}
    assert written == program.writes
    main = wgsl[wgsl.index("fn main"):]
    assert sum(main.count(op) for op in (" + ", " - ", " * ")) <= program.arithmetic
    assert len(wgsl) <= lim.MAX_WGSL_BYTES
    plan = inspect_module(program.source, [program.kernel]).kernels[1]
    assert plan.cls is KernelClass.ELIGIBLE and plan.wgsl == wgsl


def _outcome(run_name: str, source: bytes, kernel) -> tuple:
    """Lower with one specific instruction loop; (code, facts) or (kind, message)."""
    try:
        validate_kernel(kernel)
        module = decode_module(source)
        start, end = select_body(module, kernel)
        original = Lowering.run
        Lowering.run = getattr(Lowering, run_name)  # type: ignore[method-assign]
        try:
            body = lower_body(module, start, end, binding_facts(kernel.bindings))
        finally:
            Lowering.run = original  # type: ignore[method-assign]
    except CompileError as e:
        return ("error", e.kind, e.message)
    return ("ok", body.code, body.reads, body.writes, body.read_before_write, body.is_float)


def _seeds() -> st.SearchStrategy[tuple[bytes, object]]:
    fixed = st.sampled_from([(buffers_wasm(), K), (mandelbrot_wasm(), MANDEL_CONFIG),
                             (bufferwork_wasm(), bufferwork_config("polynomial")),
                             (bufferwork_wasm(), bufferwork_config("square"))])
    generated = subset_kernels(max_statements=5, max_depth=3).map(lambda p: (p.source, p.kernel))
    return st.one_of(fixed, generated)


@FAST
@given(st.data())
def test_fast_and_checked_loops_agree(data):
    source, kernel = data.draw(_seeds())
    if data.draw(st.booleans()):
        source = data.draw(mutations(source))
    assert _outcome("run_fast", source, kernel) == _outcome("run_checked", source, kernel)


@FAST
@given(st.data())
def test_mutated_modules_compile_or_raise_compile_error(data):
    source, kernel = data.draw(_seeds())
    mutated = data.draw(mutations(source))
    try:
        wgsl = compile_buffer_wgsl(mutated, kernel)
    except CompileError:
        pass
    else:
        assert len(wgsl) <= lim.MAX_WGSL_BYTES
    contract = inspect_module(mutated, [kernel], kernel_export="kernel")
    assert contract.verified or contract.reason
    try:
        compile_wgsl(mutated, "kernel")
    except CompileError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
@example(bytes.fromhex("01ff"))
def test_random_bytes_after_header(data):
    """abi.md §9.2 case 23: every failure is a CompileError and any WGSL is at most 512 KiB."""
    for source in (b"\x00asm\x01\x00\x00\x00" + data, data):
        try:
            wgsl = compile_buffer_wgsl(source, K)
        except CompileError as e:
            assert type(e) is CompileError
        else:
            assert len(wgsl) <= lim.MAX_WGSL_BYTES
        try:
            compile_wgsl(source, "kernel")
        except CompileError as e:
            assert type(e) is CompileError
