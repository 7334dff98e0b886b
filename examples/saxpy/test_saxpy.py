"""The SAXPY guests (WAT, C, Zig, AssemblyScript) on the real Host: CPU-only and on a GPU adapter.

Each run checks what the guest returned, which path its dispatch took (buffer_snapshot's
last_dispatch), y as the guest left it in its memory against numpy, and that no buffer is left.
The checked-in .wasm files are what examples/guests/build.sh builds (its --check runs in CI).
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import wasmtime

from examples.saxpy import BAD_COUNT, SAXPY, Language, guest_source, run
from wagogpu import BindingConfig, CompileError, CompileErrorKind, ElementType, Access, Status, compile_buffer_wgsl

LANGUAGES = list(Language)
COUNTS = [1, 257, 1000, 4096]  # one element, a partial second workgroup, the default, the largest


@pytest.fixture(scope="module")
def cpu_host(open_host):
    return open_host([SAXPY], gpu=False)


@pytest.fixture(scope="module")
def gpu_host(open_host):
    return open_host([SAXPY], gpu=True)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("n", COUNTS)
def test_cpu_only_host_runs_the_cpu_runner(cpu_host, language, n):
    r = run(cpu_host, language, n)
    assert r.returned == Status.CPU_FALLBACK
    assert (r.outcome, r.reason_code) == ("CPU_FALLBACK_READY", "DISABLED")
    assert r.correct, r


@pytest.mark.gpu
@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("n", COUNTS)
def test_gpu_host_runs_the_kernel_on_the_gpu(gpu_host, language, n):
    r = run(gpu_host, language, n)
    assert r.returned == Status.OK
    assert (r.outcome, r.reason_code) == ("GPU", "NONE")
    assert r.correct, r


@pytest.fixture(scope="module")
def threshold_host(open_host):
    return open_host([replace(SAXPY, min_elements=1001)], gpu=True)


@pytest.mark.gpu
@pytest.mark.parametrize("language", LANGUAGES)
def test_below_min_elements_the_gpu_host_falls_back(threshold_host, language):
    below, at = run(threshold_host, language, 1000), run(threshold_host, language, 1001)
    assert (below.returned, below.outcome, below.reason_code) == (1, "CPU_FALLBACK_READY", "BELOW_THRESHOLD")
    assert (at.returned, at.outcome) == (0, "GPU")
    assert below.correct and at.correct


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("n", [0, 4097, -1])
def test_a_bad_count_is_refused_before_any_import(cpu_host, language, n):
    r = run(cpu_host, language, n)
    assert r.returned == BAD_COUNT and not r.dispatched and r.live_buffers == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_host_without_kernel_1_answers_invalid_kernel(open_host, language):
    host = open_host([replace(SAXPY, id=2)], gpu=False)
    r = run(host, language, 8)
    assert (r.returned, r.outcome) == (Status.INVALID_KERNEL, "ERROR") and r.live_buffers == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_declared_slot_the_guest_never_binds_is_invalid_binding(open_host, language):
    # The body never touches slot 2, but every declared binding is checked at dispatch.
    unbound = BindingConfig(2, ElementType.F32, Access.READ)
    host = open_host([replace(SAXPY, bindings=(*SAXPY.bindings, unbound))], gpu=False)
    r = run(host, language, 8)
    assert r.returned == Status.INVALID_BINDING and r.live_buffers == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_buffer_limit_is_returned_and_the_first_buffer_freed(open_host, language):
    host = open_host([SAXPY], gpu=False, max_buffers_per_instance=1)
    r = run(host, language, 8)
    assert r.returned == Status.LIMIT_EXCEEDED and not r.dispatched and r.live_buffers == 0


def wasm_bytes(language: Language) -> bytes:
    source = guest_source(language)
    return wasmtime.wat2wasm(source) if isinstance(source, str) else source


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_build_of_the_kernel_is_inside_the_gpu_subset(language):
    wgsl = compile_buffer_wgsl(wasm_bytes(language), SAXPY)
    assert "@compute" in wgsl and "loop" not in wgsl  # straight-line: the reference's own subset


@pytest.mark.parametrize("language", LANGUAGES)
def test_declaring_y_read_only_is_an_invalid_contract(language):
    read_only = replace(SAXPY, bindings=(SAXPY.bindings[0], BindingConfig(1, ElementType.F32, Access.READ)))
    with pytest.raises(CompileError) as exc:
        compile_buffer_wgsl(wasm_bytes(language), read_only)
    assert exc.value.kind == CompileErrorKind.INVALID_CONTRACT


def test_the_example_command_reports_each_guest(capsys):
    from examples.saxpy.__main__ import main

    assert main(["--cpu", "--n", "300"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "device: none (DISABLED: GPU disabled)"
    assert out[1:] == [f"{name}: run(300) returned 1, ran its CPU runner (DISABLED); y verified"
                       for name in ("WAT", "C", "Zig", "AssemblyScript")]


@pytest.mark.parametrize("argv", [["--n", "0"], ["--n", "4097"], ["--cpu", "--require-gpu"], ["--guest", "go"]])
def test_the_example_command_rejects_bad_flags(argv):
    from examples.saxpy.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
