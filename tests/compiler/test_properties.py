"""Property tests: random kernels of the subset compile to valid WGSL; mutations never escape CompileError;
the fast and the checked instruction loops agree, on the reference subset and beyond it."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures import (K, MANDEL_CONFIG, bufferwork_config, bufferwork_wasm, buffers_wasm, mandelbrot_wasm, read0, tm,
                      write1)
from wasmgen import f32c, f32mul, lget
from flowgen import flow_kernel, flow_programs
from strategies import Program, mutations, subset_kernels
from wagogpu.compiler import CompileError, KernelClass, compile_buffer_wgsl, compile_wgsl, inspect_module
from wagogpu.compiler import reader as lim
from wagogpu.compiler.buffer import select_body, validate_kernel
from wagogpu.compiler.decoder import decode_module
from wagogpu.compiler import lower
from wagogpu.compiler.bindings import binding_facts
from watkit import kernel_module

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


def _outcome(fast: bool, source: bytes, kernel, monkeypatch) -> tuple:
    """Lower with run_fast first (where its limits allow) or with run_checked alone; the lowered body
    or (kind, message)."""
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(lower, "fast_loop_applies", lambda _st: False)
        try:
            validate_kernel(kernel)
            module = decode_module(source)
            start, end = select_body(module, kernel)
            body = lower.lower_body(module, start, end, binding_facts(kernel.bindings))
        except CompileError as e:
            return ("error", e.kind, e.message)
    return ("ok", body)


def _seeds() -> st.SearchStrategy[tuple[bytes, object]]:
    fixed = st.sampled_from([(buffers_wasm(), K), (mandelbrot_wasm(), MANDEL_CONFIG),
                             (bufferwork_wasm(), bufferwork_config("polynomial")),
                             (bufferwork_wasm(), bufferwork_config("square"))])
    generated = subset_kernels(max_statements=5, max_depth=3).map(lambda p: (p.source, p.kernel))
    extended = flow_programs().map(lambda p: (kernel_module(p.body, p.locals), flow_kernel()))
    return st.one_of(fixed, generated, extended)


@FAST
@given(data=st.data())
def test_fast_and_checked_loops_agree(monkeypatch, data):
    source, kernel = data.draw(_seeds())
    if data.draw(st.booleans()):
        source = data.draw(mutations(source))
    assert _outcome(True, source, kernel, monkeypatch) == _outcome(False, source, kernel, monkeypatch)


def test_fast_loop_hands_over_at_the_first_extended_instruction(monkeypatch):
    """A body that leaves the reference subset runs run_fast up to the first instruction outside it and
    run_checked from there. Only when f32 arithmetic was emitted before that point is the body lowered
    again from the start, so that its float operands are opaque too (valuetext.py)."""
    calls: list[int] = []
    checked = lower.run_checked
    monkeypatch.setattr(lower, "run_checked", lambda st, pc=0: calls.append(pc) or checked(st, pc))
    prefix = write1(f32c(1.0)) + write1(read0())
    wgsl = compile_buffer_wgsl(tm(prefix + lget(0) + b"\x1a" + write1(f32mul(read0(), f32c(2.0)))), K)
    assert calls == [len(prefix) + len(lget(0))]
    assert wgsl.count("slot1[index] =") == 3 and "0x40000000u | params.pad2" in wgsl
    calls.clear()
    wgsl = compile_buffer_wgsl(tm(write1(f32mul(read0(), f32c(2.0))) + lget(0) + b"\x1a" + write1(f32c(1.0))), K)
    assert calls == [0]
    assert wgsl.count("slot1[index] =") == 2 and wgsl.count("let v0: u32 = slot0[index];") == 1
    assert "0x40000000u | params.pad2" in wgsl


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
    """docs/design/abi.md §9.2 case 23: every failure is a CompileError and any WGSL is at most 512 KiB."""
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
