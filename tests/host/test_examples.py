"""The examples on the CPU path (--cpu) and on the GPU path (a software adapter unless WAGO_GPU_TEST=1).

The GPU-path tests assert that kernels really ran on the GPU, so they fail (never skip) when no
adapter opens.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from examples.buffers.__main__ import main as buffers_main, run as buffers_run
from examples.compiled.__main__ import main as compiled_main, run as compiled_run
from examples.mandelbrot.__main__ import Render, difference, main as mandelbrot_main, run as mandelbrot_run
from examples.start.__main__ import main as start_main, run as start_run
from examples.storage.__main__ import main as storage_main, run as storage_run

from ..gpu_support import HARDWARE_REQUIRED

ROOT = Path(__file__).resolve().parents[2]
GPU_FLAGS = ["--require-gpu"] if HARDWARE_REQUIRED else ["--allow-software-adapter"]
GPU = dict(require_gpu=HARDWARE_REQUIRED, allow_software_adapter=not HARDWARE_REQUIRED)


def lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


# -- start ------------------------------------------------------------------------------------------
def test_start_cpu(capsys):
    assert start_main(["--cpu"]) == 0
    out = lines(capsys)
    assert out[0] == "device: none (DISABLED: GPU disabled)"
    assert out[1:] == ["B = 2*A: status 1, ran on CPU fallback (GPU disabled)",
                       "A = B + 1: status 1, ran on CPU fallback (GPU disabled)",
                       "result [3.0, 5.0, 7.0, 9.0] == expected"]


def test_start_gpu(capsys):
    assert start_main(GPU_FLAGS) == 0
    out = lines(capsys)
    assert out[0].startswith("device: ") and out[0].endswith("(READY)"), out[0]
    assert out[1:3] == ["B = 2*A: status 0, ran on GPU", "A = B + 1: status 0, ran on GPU"]


def test_start_threshold_reason_without_the_record():
    # The dispatches ran inside the start function: the reason comes from the diagnostics.
    out = start_run(**GPU, second_cpu=True)
    assert out.ok and out.statuses == (0, 1)
    assert out.paths == ("GPU", "CPU fallback (count 4 below min_elements 5)")


# -- buffers ----------------------------------------------------------------------------------------
def test_buffers_cpu(capsys):
    assert buffers_main(["--cpu", "--first-cpu"]) == 0
    out = lines(capsys)
    assert out[1].startswith("kernel 1 (B = 2*A): status 1 (0=GPU, 1=CPU fallback): CPU fallback (DISABLED: GPU disabled)")
    assert out[2].startswith("kernel 2 (A = B + 1): status 1 (0=GPU, 1=CPU fallback): CPU fallback (DISABLED")
    assert out[3] == "verified: [3.0, 5.0, 7.0, 9.0]"


@pytest.mark.parametrize("first_cpu, second_cpu, statuses", [(False, False, (0, 0)), (True, False, (1, 0)),
                                                             (False, True, (0, 1))])
def test_buffers_gpu_and_forced_fallback(first_cpu, second_cpu, statuses):
    out = buffers_run(**GPU, first_cpu=first_cpu, second_cpu=second_cpu)
    assert out.ok, out.error
    assert out.result == (3.0, 5.0, 7.0, 9.0)
    assert out.statuses == statuses
    for d, status in zip(out.dispatches, statuses):
        assert d.outcome == ("GPU" if status == 0 else "CPU_FALLBACK_READY")
        assert d.reason_code == ("NONE" if status == 0 else "BELOW_THRESHOLD")
        assert d.dispatch_seconds > 0 and d.step_seconds >= d.dispatch_seconds


def test_buffers_gpu_main_prints_paths(capsys):
    assert buffers_main([*GPU_FLAGS]) == 0
    out = lines(capsys)
    assert "status 0 (0=GPU, 1=CPU fallback): GPU; dispatch" in out[1]
    assert "status 0 (0=GPU, 1=CPU fallback): GPU; dispatch" in out[2]


@pytest.mark.parametrize("argv", [["--require-gpu", "--first-cpu"], ["--require-gpu", "--second-cpu"],
                                  ["--cpu", "--require-gpu"]])
def test_buffers_rejects_contradicting_flags(argv):
    with pytest.raises(SystemExit) as exc:
        buffers_main(argv)
    assert exc.value.code == 2


# -- storage ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, verified", [("f16", "f16 result verified: 2"), ("memory64", "memory64 result verified: 7"),
                                            ("gc", "gc result verified: 7")])
def test_storage_cpu(capsys, kind, verified):
    assert storage_main(["--kind", kind, "--cpu"]) == 0
    out = lines(capsys)
    assert out[-1] == verified
    if kind == "f16":
        assert out[1] == "F16 dispatch status 1 (0=GPU, 1=CPU): CPU fallback (DISABLED: GPU disabled)"
    else:
        assert out[1] == f"{kind}: no dispatch (transfers only); 4 bytes set, 4 bytes copied back"


def test_storage_f16_gpu(capsys):
    assert storage_main(["--kind", "f16", *GPU_FLAGS]) == 0
    out = lines(capsys)
    assert out[1] == "F16 dispatch status 0 (0=GPU, 1=CPU): GPU"
    assert out[2] == "f16 result verified: 2"


def test_storage_results():
    f16 = storage_run("f16", cpu=True)
    assert f16.ok and f16.value == 2.0 and f16.dispatch_status == 1 and f16.reason_code == "DISABLED"
    assert f16.moved_bytes == (2, 0) and f16.leftover_bytes == 0
    for kind in ("memory64", "gc"):
        out = storage_run(kind, cpu=True)
        assert out.ok and out.value == 7.0 and out.dispatch_status is None and out.moved_bytes == (4, 4)


def test_storage_require_gpu_needs_f16():
    with pytest.raises(SystemExit) as exc:
        storage_main(["--kind", "gc", "--require-gpu"])
    assert exc.value.code == 2


# -- compiled guests --------------------------------------------------------------------------------
def test_compiled_cpu(capsys):
    assert compiled_main(["--cpu"]) == 0
    out = lines(capsys)
    assert out[1].startswith("Zig guest: run() returned 1 (CPU runner): CPU fallback (GPU disabled)")
    assert out[2] == "Zig guest: 0 live buffers after run(), 0 bytes outside the reuse pool (0 pooled), 0 bytes after close"
    assert out[4].startswith("C guest: run() returned 1 (CPU runner)")
    assert out[6] == "C result verified: [2, 4, 6, 8] (checked by the guest); no buffers left"


def test_compiled_gpu():
    device, results = compiled_run(["zig", "c"], **GPU)
    assert device.endswith("(READY)")
    assert [r.guest for r in results] == ["Zig", "C"]
    for r in results:
        assert r.returned == 0 and r.path == "GPU"
        assert r.live_buffers == 0 and r.held_bytes == r.pool_bytes and r.leftover_bytes == 0
        assert r.ok


def test_compiled_single_guest(capsys):
    assert compiled_main(["--guest", "c", "--cpu"]) == 0
    out = lines(capsys)
    assert len(out) == 4 and out[1].startswith("C guest:")


# -- mandelbrot -------------------------------------------------------------------------------------
SMALL = ["--width", "40", "--height", "24", "--iterations", "12"]


def test_mandelbrot_cpu_writes_png(capsys, tmp_path):
    from PIL import Image

    png = tmp_path / "m.png"
    assert mandelbrot_main(["--cpu", *SMALL, "--out", str(png)]) == 0
    out = lines(capsys)
    assert "render_direct: render_direct" in out[2]
    assert "dispatches 0 on the GPU / 12 on the CPU: CPU fallback (GPU disabled)" in out[3]
    assert out[4] == "CPU fallback vs render_direct: 0 of 960 pixels differ, max |difference| 0 iterations"
    with Image.open(png) as image:
        assert image.size == (40, 24) and image.mode == "RGB"


def test_mandelbrot_gpu_path():
    out = mandelbrot_run(40, 24, 12, **GPU)
    assert out.ok, out.problems
    direct, fallback, gpu = out.renders
    assert (gpu.gpu_dispatches, gpu.cpu_dispatches) == (12, 0) and gpu.path == "GPU"
    assert (fallback.gpu_dispatches, fallback.cpu_dispatches) == (0, 12)
    assert gpu.upload_bytes > 0 and gpu.download_bytes > 0
    names = [(d.a, d.b) for d in out.differences]
    assert names == [("GPU path", "CPU fallback"), ("GPU path", "render_direct"), ("CPU fallback", "render_direct")]
    assert out.differences[2].pixels == 0
    assert np.array_equal(fallback.counts, direct.counts)


def test_mandelbrot_loop_variant():
    # The loop kernel runs on the GPU: one dispatch for the whole image (the extended subset).
    out = mandelbrot_run(40, 24, 12, loop=True, **GPU)
    assert out.ok, out.problems
    direct, fallback, gpu = out.renders
    assert gpu.export == "render_loop" and (gpu.gpu_dispatches, gpu.cpu_dispatches) == (1, 0) and gpu.path == "GPU"
    assert (fallback.gpu_dispatches, fallback.cpu_dispatches) == (0, 1)
    assert gpu.upload_bytes > 0 and gpu.download_bytes > 0
    assert out.differences[0].pixels <= 0.01 * out.differences[0].total  # relaxed_float: a few pixels at most
    assert out.differences[2].pixels == 0 and np.array_equal(fallback.counts, direct.counts)


def test_mandelbrot_loop_main_prints_gpu_path(capsys):
    assert mandelbrot_main(["--loop", "--no-image", *SMALL, *GPU_FLAGS]) == 0
    out = lines(capsys)
    assert "loop kernel (render_loop)" in out[1]
    assert "dispatches 1 on the GPU / 0 on the CPU: GPU" in out[4]


def test_mandelbrot_difference_report():
    a = Render("a", "render", 0, np.array([[0, 5], [7, 12]], dtype=np.uint32))
    b = Render("b", "render", 0, np.array([[0, 3], [7, 11]], dtype=np.uint32))
    d = difference(a, b)
    assert (d.pixels, d.total, d.max_abs) == (2, 4, 2)
    assert d.line() == "a vs b: 2 of 4 pixels differ, max |difference| 2 iterations"


@pytest.mark.parametrize("argv", [["--width", "0"], ["--height", "5000"], ["--iterations", "0"],
                                  ["--width", "4096", "--height", "4096"], ["--cpu", "--require-gpu"]])
def test_mandelbrot_rejects_bad_settings(argv):
    with pytest.raises(SystemExit) as exc:
        mandelbrot_main(argv)
    assert exc.value.code == 2


# -- the demo's packaged guests ---------------------------------------------------------------------
@pytest.mark.parametrize("packaged, original", [("start.wat", "examples/start/start.wat"),
                                                ("buffers.wat", "examples/buffers/buffers.wat"),
                                                ("double.wasm", "examples/guests/double.wasm"),
                                                ("double_c.wasm", "examples/guests/double_c.wasm")])
def test_demo_guests_are_copies_of_the_examples(packaged, original):
    from wagogpu.demo import guest

    assert guest(packaged) == (ROOT / original).read_bytes(), f"copy {original} to wagogpu/demo/{packaged}"
