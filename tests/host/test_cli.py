"""The `wagogpu` command: every verb, and every user error as one stderr line with exit status 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wagogpu.cli import main

from ..gpu_support import HARDWARE_REQUIRED

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "examples" / "guests" / "double.wasm"
MANDELBROT = ROOT / "examples" / "guests" / "mandelbrot.wasm"
START = ROOT / "examples" / "start" / "start.wat"
GPU_FLAG = "--require-gpu" if HARDWARE_REQUIRED else "--allow-software-adapter"
DOUBLE_CONFIG = {"kernels": [{"id": 1, "name": "double", "relaxed_float": True,
                              "bindings": [[0, "F32", "read"], [1, "f32", "write"]]}]}
LEGACY_WAT = '(module (func (export "twice") (param f32) (result f32) (f32.mul (local.get 0) (f32.const 2))))'


def stderr_lines(err: str) -> list[str]:
    """stderr without the GL driver's XDG_RUNTIME_DIR noise."""
    return [line for line in err.splitlines() if line.strip() and "XDG_RUNTIME_DIR" not in line]


def run_cli(capsys, *argv) -> tuple[int, str, list[str]]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, stderr_lines(err)


def assert_error(capsys, argv, *fragments: str, code: int = 2) -> str:
    """The command fails with `code` and exactly one `wagogpu: error:` line containing the fragments."""
    got, out, err = run_cli(capsys, *argv)
    assert got == code, (got, out, err)
    assert len(err) == 1, err
    assert err[0].startswith("wagogpu: error: "), err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    return err[0]


@pytest.fixture
def config_file(tmp_path):
    def write(data, name: str = "config.json") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path
    return write


# -- entry points -----------------------------------------------------------------------------------
def test_python_dash_m_wagogpu_info():
    proc = subprocess.run([sys.executable, "-m", "wagogpu", "info"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wagogpu ")
    assert "default settings: " in proc.stdout and "with --allow-software-adapter: " in proc.stdout
    assert "Traceback" not in proc.stderr


def test_help_and_missing_command(capsys):
    assert main(["--help"]) == 0
    assert "info" in capsys.readouterr().out
    assert_error(capsys, [], "choose a command")
    assert_error(capsys, ["frobnicate"], "invalid choice")
    assert_error(capsys, ["info", "--bogus"], "unrecognized arguments: --bogus")


# -- info -------------------------------------------------------------------------------------------
def test_info_text(capsys):
    code, out, _ = run_cli(capsys, "info")
    assert code == 0
    assert "timestamp-query: " in out  # per adapter
    assert "default settings: " in out and "with --allow-software-adapter: " in out


def test_info_json_choices(capsys):
    probe_flags = [] if HARDWARE_REQUIRED else ["--allow-software-adapter"]
    code, out, _ = run_cli(capsys, "info", "--json", "--probe", *probe_flags)
    assert code == 0
    report = json.loads(out)
    adapters = report["adapters"]
    assert adapters, "wgpu found no adapter (CI installs lavapipe: mesa-vulkan-drivers)"
    for a in adapters:
        assert {"name", "vendor", "backend", "adapter_type", "driver", "is_software", "features", "limits",
                "timestamp_query"} <= set(a)
        assert a["timestamp_query"] == ("timestamp-query" in a["features"])
    default, software = report["choice"]["default"], report["choice"]["allow_software_adapter"]
    assert software["adapter"] is not None
    if all(a["is_software"] for a in adapters):
        assert default["adapter"] is None and "allow_software_adapter is False" in default["cpu_only_reason"]
    else:
        assert not adapters[default["adapter"]]["is_software"] and default["cpu_only_reason"] == ""
    probe = report["probe"]
    assert probe["opened"], probe["reason"]
    limits = probe["loop_limits"]  # measured by the device's loop probe (gpu/probe.py)
    assert limits["error"] == "" and (limits["cut"] is None) == (limits["budget"] is None)


# -- compile ----------------------------------------------------------------------------------------
def test_compile_buffer_kernel(capsys):
    code, out, err = run_cli(capsys, "compile", DOUBLE, "--kernel", "double", "--binding", "0:F32:read",
                             "--binding", "1:f32:WRITE")
    assert code == 0 and all(line.startswith("note: ") for line in err), err  # the rules it sees: compile_rules tests
    assert "@compute" in out and "var<storage, read> slot0" in out and "var<storage, read_write> slot1" in out


def test_compile_wat_and_full_export_name(capsys):
    code, out, _ = run_cli(capsys, "compile", START, "--kernel", "wago_gpu.kernel.addOne", "--id", "2",
                           "--binding", "0:f32:r", "--binding", "1:F32:rw")
    assert code == 0 and "@compute" in out


def test_compile_legacy(capsys, tmp_path):
    wat = tmp_path / "legacy.wat"
    wat.write_text(LEGACY_WAT)
    code, out, _ = run_cli(capsys, "compile", wat, "--legacy", "twice")
    assert code == 0 and "@compute" in out


def test_compile_errors_are_compile_errors(capsys, tmp_path):
    # (a contract error in a kernel the reference refuses for its 64-bit binding: UNSUPPORTED, as there)
    code, out, err = run_cli(capsys, "compile", MANDELBROT, "--kernel", "mandel", "--binding", "0:I64:read",
                             "--binding", "1:U32:write")
    assert code == 1 and out == ""
    assert len(err) == 2 and err[0].startswith("CompileError UNSUPPORTED: "), err
    assert err[1] == ("note: the kernel runs on the CPU only: every valid dispatch answers 1 (reason "
                      "UNSUPPORTED_KERNEL) and the guest runs wago_gpu.cpu.mandel")
    code, _, err = run_cli(capsys, "compile", DOUBLE, "--kernel", "missing", "--binding", "0:F32:read")
    assert code == 1 and err[0].startswith("CompileError INVALID_CONTRACT: ")
    code, _, err = run_cli(capsys, "compile", START, "--legacy", "wago_gpu.kernel.double")
    assert code == 1 and err[0].startswith("CompileError INVALID_CONTRACT: ")


@pytest.mark.parametrize("binding, fragment", [("0:F32", "SLOT:TYPE:ACCESS"), ("0:F33:read", "unknown element type"),
                                               ("0:F32:sometimes", "unknown access"), ("x:F32:read", "slot"),
                                               ("0:F32:read:extra", "SLOT:TYPE:ACCESS")])
def test_compile_bad_binding(capsys, binding, fragment):
    assert_error(capsys, ["compile", DOUBLE, "--kernel", "double", "--binding", binding], "--binding", fragment)


def test_compile_user_errors(capsys, tmp_path):
    assert_error(capsys, ["compile", tmp_path / "nope.wasm", "--kernel", "double", "--binding", "0:F32:read"],
                 "cannot read", "nope.wasm")
    bad = tmp_path / "bad.wasm"
    bad.write_bytes(b"\0asm\1\0\0\0\1")
    assert_error(capsys, ["compile", bad, "--kernel", "double", "--binding", "0:F32:read"], "invalid module")
    garbage = tmp_path / "garbage.wasm"
    garbage.write_bytes(bytes(range(200, 256)))
    assert_error(capsys, ["compile", garbage, "--kernel", "double", "--binding", "0:F32:read"], "not a Wasm module")
    wat = tmp_path / "bad.wat"
    wat.write_text("(module (func (export \"f\") (i32.bogus)))")
    code, _, err = run_cli(capsys, "compile", wat, "--kernel", "double", "--binding", "0:F32:read")
    assert code == 2 and err[0].startswith(f"wagogpu: error: {wat}: invalid WAT at line 1, column 29: "), err
    assert err[1:] == ['    1 | (module (func (export "f") (i32.bogus)))', "      |" + " " * 29 + "^"]
    assert_error(capsys, ["compile", DOUBLE, "--kernel", "double"], "at least one --binding")
    assert_error(capsys, ["compile", DOUBLE], "--kernel")
    assert_error(capsys, ["compile", DOUBLE, "--legacy", "x", "--kernel", "double"], "--legacy")


# -- run --------------------------------------------------------------------------------------------
def test_run_cpu(capsys, config_file):
    code, out, err = run_cli(capsys, "run", DOUBLE, "--config", config_file(DOUBLE_CONFIG), "--call", "run", "--cpu")
    assert code == 0 and err == []
    lines = out.splitlines()
    assert lines[0] == "result: 1"
    assert lines[1] == "device: none (DISABLED: GPU disabled)"
    assert lines[2].startswith("last operation: freeBuffer, status OK (0), outcome OK")
    assert lines[3].startswith("last dispatch: kernel 1 count 4, status CPU_FALLBACK (1), outcome CPU_FALLBACK_READY "
                               "(DISABLED: GPU disabled)"), lines[3]


def test_run_gpu(capsys, config_file):
    code, out, _ = run_cli(capsys, "run", DOUBLE, "--config", config_file(DOUBLE_CONFIG), "--call", "run", GPU_FLAG)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "result: 0" and lines[1].endswith("(READY)")


def test_run_start_function_and_config_forms(capsys, config_file):
    config = {"kernels": [
        {"id": 1, "export": "wago_gpu.kernel.double", "cpu_export": "wago_gpu.cpu.double", "relaxed_float": True,
         "bindings": [{"slot": 0, "type": "F32", "access": "read"}, {"slot": 1, "type": 8, "access": 2}]},
        {"id": 2, "name": "addOne", "relaxed_float": True, "min_elements": 5,
         "bindings": [[0, "F32", "read"], [1, "F32", "write"]]}],
        "max_elements": 1000, "disabled": True}
    code, out, _ = run_cli(capsys, "run", START, "--config", config_file(config))
    assert code == 0
    assert out.splitlines()[0] == "instantiated (start function ran); no --call given"


def test_run_passes_arguments(capsys, config_file):
    config = {"kernels": [{"id": 1, "name": "step", "relaxed_float": True, "bindings": [
        [0, "F32", "read"], [1, "F32", "read"], [2, "F32", "rw"], [3, "F32", "rw"]]}]}
    code, out, _ = run_cli(capsys, "run", MANDELBROT, "--config", config_file(config), "--call", "render_direct",
                           "8", "0x6", "16", "--cpu")
    assert code == 0 and out.splitlines()[0] == "result: 0"
    code, out, _ = run_cli(capsys, "run", MANDELBROT, "--config", config_file(config), "--call", "render_direct",
                           "0", "6", "16", "--cpu")
    assert code == 0 and out.splitlines()[0] == "result: 100"  # the guest's own range check


def test_run_trap_exits_1(capsys, config_file, tmp_path):
    wat = tmp_path / "trap.wat"
    wat.write_text('(module (func (export "boom") unreachable))')
    assert_error(capsys, ["run", wat, "--config", config_file(DOUBLE_CONFIG), "--call", "boom", "--cpu"],
                 "trap in boom", "unreachable", code=1)
    start = tmp_path / "start_trap.wat"
    start.write_text("(module (func $s unreachable) (start $s))")
    assert_error(capsys, ["run", start, "--config", config_file(DOUBLE_CONFIG), "--cpu"],
                 "trap in the start function", code=1)
    scalar = tmp_path / "scalar.wat"
    scalar.write_text('(module (import "wago_gpu_v1" "readBufferF32" (func $r (param i32 i32) (result f32)))'
                      ' (func (export "f") (result f32) (call $r (i32.const 9) (i32.const 0))))')
    assert_error(capsys, ["run", scalar, "--config", config_file(DOUBLE_CONFIG), "--call", "f", "--cpu"],
                 "wago_gpu_v1 scalar access: status 2", code=1)


@pytest.mark.parametrize("config, fragments", [
    ('{"kernels": [', ("invalid JSON",)),
    ("[1, 2]", ("JSON object",)),
    ({"kernelz": []}, ("kernelz", "unknown Config field")),
    ({"kernels": []}, ("kernels",)),  # Config needs kernels or kernel_export
    ({**DOUBLE_CONFIG, "max_elements": -1}, ("max_elements", "negative")),
    ({**DOUBLE_CONFIG, "max_elements": "many"}, ("max_elements", "integer")),
    ({**DOUBLE_CONFIG, "power_preference": "fast"}, ("power_preference",)),
    ({**DOUBLE_CONFIG, "disabled": "yes"}, ("disabled", "bool")),
    ({"kernels": [{"name": "double", "bindings": [[0, "F32", "read"]]}]}, ("kernels[0].id", "missing")),
    ({"kernels": [{"id": 0, "name": "double", "bindings": [[0, "F32", "read"]]}]}, ("kernels[0].id",)),
    ({"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F99", "read"]]}]}, ("bindings[0].type",)),
    ({"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F32"]]}]}, ("bindings[0]",)),
    ({"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F32", "read"]], "colour": 1}]}, ("colour",)),
    ({"kernels": [{"id": 1, "name": "double", "bindings": [[9, "F32", "read"]]}]}, ("slot",)),
])
def test_run_bad_config(capsys, config_file, config, fragments):
    path = config_file(config)
    line = assert_error(capsys, ["run", DOUBLE, "--config", path, "--call", "run", "--cpu"], *fragments)
    assert str(path) in line


def test_run_user_errors(capsys, config_file, tmp_path):
    config = config_file(DOUBLE_CONFIG)
    assert_error(capsys, ["run", tmp_path / "missing.wasm", "--config", config, "--call", "run"], "cannot read")
    assert_error(capsys, ["run", DOUBLE, "--config", tmp_path / "missing.json", "--call", "run"], "cannot read")
    assert_error(capsys, ["run", DOUBLE, "--call", "run"], "--config")
    assert_error(capsys, ["run", DOUBLE, "--config", config, "--call", "nope", "--cpu"],
                 "no exported function 'nope'", "run")
    assert_error(capsys, ["run", DOUBLE, "--config", config, "--call", "run", "7", "--cpu"], "takes 0 argument")
    assert_error(capsys, ["run", MANDELBROT, "--config", config, "--call", "render_direct", "8", "x", "16", "--cpu"],
                 "argument 2 of render_direct")
    assert_error(capsys, ["run", MANDELBROT, "--config", config, "--call", "render_direct", "8", str(1 << 40), "1",
                          "--cpu"], "out of range")
    bad = tmp_path / "bad.wat"
    bad.write_text("(module")
    code, _, err = run_cli(capsys, "run", bad, "--config", config, "--cpu")
    assert code == 2 and err == [f"wagogpu: error: {bad}: invalid WAT at line 1, column 8: expected `)`",
                                 "    1 | (module", "      |        ^"]
    link = tmp_path / "link.wat"
    link.write_text('(module (import "env" "f" (func)))')
    assert_error(capsys, ["run", link, "--config", config, "--cpu"], "cannot instantiate", "env::f")


# -- demo -------------------------------------------------------------------------------------------
def test_demo_cpu(capsys):
    code, out, _ = run_cli(capsys, "demo", "--cpu")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "device: none (DISABLED: GPU disabled)"
    for job in ("start", "buffers", "buffers, kernel 2 forced to CPU", "compiled Zig", "compiled C"):
        assert any(line.startswith(f"{job}: ok (") for line in lines), job
    assert lines[-1] == "demo ok: 5 jobs verified; 0 kernel runs on the GPU, 8 on the CPU"


def test_demo_gpu(capsys):
    code, out, _ = run_cli(capsys, "demo", GPU_FLAG)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("device: ") and "(READY), opened in " in lines[0]
    assert "  kernel 2 addOne (A = B + 1): CPU fallback (BELOW_THRESHOLD: count 4 below min_elements 5); dispatch " in out
    assert "  kernel 1 double (B = 2*A): GPU; dispatch " in out
    assert lines[-1] == "demo ok: 5 jobs verified; 7 kernel runs on the GPU, 1 on the CPU"


def test_demo_json(capsys):
    code, out, _ = run_cli(capsys, "demo", "--cpu", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] and report["problems"] == [] and report["state"] == "DISABLED"
    assert [j["name"] for j in report["jobs"]] == ["start", "buffers", "buffers, kernel 2 forced to CPU",
                                                    "compiled Zig", "compiled C"]
    assert all(k["status"] == 1 and k["reason_code"] == "DISABLED" for j in report["jobs"] for k in j["kernels"])


def test_demo_flag_conflict(capsys):
    assert_error(capsys, ["demo", "--cpu", "--require-gpu"], "--require-gpu")


# -- bench ------------------------------------------------------------------------------------------
def test_bench_lists_modules(capsys):
    code, out, _ = run_cli(capsys, "bench")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert "cpu_fallback" in names and "common" not in names


def test_bench_runs_one_with_arguments(capfd):
    assert main(["bench", "cpu_fallback", "--sizes", "1024", "--repeats", "1"]) == 0
    records = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    assert records and {r["elements"] for r in records} == {1024}


def test_bench_unknown(capsys):
    assert_error(capsys, ["bench", "nope"], "unknown benchmark 'nope'", "cpu_fallback")


# -- embedding additions: version, adapters, diagnostics, compile rules, driver noise ----------------------
def test_version(capsys):
    from wagogpu import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"wagogpu {__version__}\n"


def test_info_numbers_the_adapters_and_probes_one_by_index(capsys):
    code, out, _ = run_cli(capsys, "info")
    assert code == 0 and "  [0] " in out
    if HARDWARE_REQUIRED:
        return
    code, out, _ = run_cli(capsys, "info", "--probe", "--allow-software-adapter", "--backend", "gl", "--adapter",
                           "LLVMPIPE")
    probe = [line for line in out.splitlines() if line.startswith("probe (")]
    assert code == 0 and len(probe) == 1 and "opened llvmpipe" in probe[0] and "OpenGL" in probe[0]
    assert out.splitlines()[-1].startswith("  loops: cut after ")  # llvmpipe cuts loops (gpu/probe.py)
    assert_error(capsys, ["info", "--probe", "--adapter", "99"], "--adapter/--backend: adapter index 99 matches "
                                                                 "no adapter; adapters: 0: ")
    assert_error(capsys, ["info", "--adapter", "0"], "--adapter and --backend choose the device --probe opens")


def test_run_on_a_chosen_adapter(capsys, config_file):
    config = config_file(DOUBLE_CONFIG)
    line = assert_error(capsys, ["run", DOUBLE, "--config", config, "--call", "run", GPU_FLAG, "--adapter",
                                 "no such gpu"], "adapter: adapter name 'no such gpu' matches no adapter; adapters: 0: ")
    assert "[" not in line.split("adapters:")[0]
    if HARDWARE_REQUIRED:
        return
    code, out, _ = run_cli(capsys, "run", DOUBLE, "--config", config, "--call", "run", GPU_FLAG, "--backend", "gl")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "result: 0" and lines[1].startswith("device: llvmpipe")
    assert lines[3].startswith("last dispatch: kernel 1 count 4, status OK (0), outcome GPU, ")


SAXPI_WAT = """(module
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (func (export "wago_gpu.kernel.saxpy") (param i32))
  (func (export "wago_gpu.cpu.saxpy") (param i32))
  (func (export "run") (result i32)
    (if (i32.gt_u (call $dispatch (i32.const 1) (i32.const 4)) (i32.const 1)) (then unreachable))
    (i32.const 0)))"""


def test_a_trap_says_which_import_failed_before_it(capsys, config_file, tmp_path):
    guest = tmp_path / "saxpi.wat"
    guest.write_text(SAXPI_WAT)
    config = config_file({"kernels": [{"id": 1, "name": "saxpi", "bindings": [[0, "F32", "read"]]}]})
    line = assert_error(capsys, ["run", guest, "--config", config, "--call", "run", "--cpu"], code=1)
    assert line == ("wagogpu: error: trap in run: wasm trap: wasm `unreachable` instruction executed; the last import "
                    "that failed: dispatch kernel 1 count 4, status INVALID_KERNEL (10), outcome ERROR "
                    "(CONTRACT_ERROR: wago_gpu.kernel.saxpi must be a defined (i32) -> () export)")


KERNEL_WAT = """(module
  (import "wago_gpu_v1" "getBuffer" (func $g (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $r (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $w (param i32 i32 f32)))
  (func (export "wago_gpu.kernel.k") (param i32)
    (call $w (call $g (i32.const 0)) (local.get 0) (call $r (call $g (i32.const 1)) (local.get 0))))
  (func (export "wago_gpu.cpu.k") (param i32)))"""


@pytest.mark.parametrize("bindings, expected", [
    (["0:F32:write", "1:F32:read", "2:F32:read"], [
        "note: slot 2 (F32, read) is never touched by the kernel; dispatch still needs a buffer bound there that "
        "holds at least count elements",
        "note: dispatch(1, count) runs indices 0..count-1: the buffers bound to slots 0, 1, 2 must each hold at least "
        "count elements (INVALID_RANGE otherwise), be distinct handles (INVALID_BINDING) and have the declared types "
        "(TYPE_MISMATCH)",
        "note: the kernel does float arithmetic: it runs on the GPU only with relaxed_float (--relaxed-float); "
        "without it every dispatch answers 1 (reason FLOAT_MODE)"]),
    (["0:F32:rw", "1:F32:rw"], [
        "note: slot 0 (F32, read_write) is written but never read by the kernel (declare it write)",
        "note: slot 1 (F32, read_write) is never written by the kernel: its buffer keeps its contents (declare it read)"]),
])
def test_compile_reports_the_rules_it_can_see(capsys, tmp_path, bindings, expected):
    wat = tmp_path / "k.wat"
    wat.write_text(KERNEL_WAT)
    args = [arg for b in bindings for arg in ("--binding", b)]
    code, out, err = run_cli(capsys, "compile", wat, "--kernel", "k", *args)
    assert code == 0 and "@compute" in out
    assert err[:len(expected)] == expected, err


@pytest.mark.parametrize("bindings, first, problem", [
    (["0:F32:read", "1:F32:read"], "writeBufferF32 writes slot 0, declared READ",
     "note: slot 0 is declared read but the kernel writes it (declare it write or rw)"),
    (["0:F32:write", "1:F32:write"], "readBufferF32 reads slot 1, declared WRITE",
     "note: slot 1 is declared write but the kernel reads it (declare it rw)"),
])
def test_compile_names_the_slot_that_breaks_its_access(capsys, tmp_path, bindings, first, problem):
    wat = tmp_path / "k.wat"
    wat.write_text(KERNEL_WAT)
    args = [arg for b in bindings for arg in ("--binding", b)]
    code, out, err = run_cli(capsys, "compile", wat, "--kernel", "k", *args)
    assert code == 1 and out == ""
    assert err == [f"CompileError INVALID_CONTRACT: intrinsic violates slot access: {first}", problem,
                   "note: every dispatch of kernel 1 answers INVALID_KERNEL (10): fix the kernel or its bindings"]


def test_the_drivers_xdg_runtime_dir_lines_are_silenced():
    """libwayland (loaded by wgpu's GL backend) prints them when XDG_RUNTIME_DIR is unset."""
    import ctypes
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY")}
    command = [sys.executable, "-m", "wagogpu", "info", "--probe", "--allow-software-adapter", "--backend", "gl"]
    quiet = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert quiet.returncode == 0 and "XDG_RUNTIME_DIR" not in quiet.stderr, quiet.stderr
    try:
        ctypes.CDLL("libwayland-client.so.0")
    except OSError:
        return  # no libwayland: nothing prints the lines either way
    if "backend OpenGL" not in quiet.stdout:
        return  # no GL adapter: wgpu's GL backend, which loads libwayland, never starts
    loud = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, "WAGOGPU_KEEP_DRIVER_LOG": "1"})
    assert "XDG_RUNTIME_DIR is invalid or not set" in loud.stderr  # the lines the silencing removes


def test_demo_takes_the_adapter_flags(capsys):
    assert_error(capsys, ["demo", "--allow-software-adapter", "--adapter", "no such gpu"],
                 "adapter: adapter name 'no such gpu' matches no adapter; adapters: 0: ")


DIVIDE_WAT = """(module
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $g (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferI32" (func $r (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "writeBufferI32" (func $w (param i32 i32 i32)))
  (func (export "wago_gpu.kernel.div") (param i32)
    (call $w (call $g (i32.const 1)) (local.get 0)
      (i32.div_s (i32.const 7) (call $r (call $g (i32.const 0)) (local.get 0)))))
  (func $cpu (export "wago_gpu.cpu.div") (param i32)
    (drop (i32.div_s (i32.const 7) (call $r (call $g (i32.const 0)) (i32.const 0)))))
  (func (export "run") (result i32)
    (drop (call $bind (i32.const 0) (i32.wrap_i64 (call $create (i32.const 5) (i32.const 4)))))
    (drop (call $bind (i32.const 1) (i32.wrap_i64 (call $create (i32.const 5) (i32.const 4)))))
    (if (i32.eq (call $dispatch (i32.const 1) (i32.const 4)) (i32.const 1)) (then (call $cpu (i32.const 4))))
    (i32.const 0)))"""


@pytest.mark.gpu
def test_a_trap_after_a_gpu_fallback_says_why_it_fell_back(capsys, config_file, tmp_path):
    """The kernel divides by the zero-filled input: the GPU attempt raises the error word, the CPU
    runner traps as Wasm does, and the error line says both, in words."""
    guest = tmp_path / "divide.wat"
    guest.write_text(DIVIDE_WAT)
    config = config_file({"kernels": [{"id": 1, "name": "div", "bindings": [[0, "I32", "read"], [1, "I32", "write"]]}]})
    line = assert_error(capsys, ["run", guest, "--config", config, "--call", "run", GPU_FLAG], code=1)
    assert line == ("wagogpu: error: trap in run: wasm trap: integer divide by zero; the last dispatch (kernel 1 "
                    "count 4) fell back from the GPU to the guest's CPU runner, KERNEL_TRAP: the GPU kernel hit a "
                    "Wasm trap (division by zero, signed overflow or a trapping truncation) (kernel error word 1); "
                    "nothing was published, the CPU runner does the work")


def test_compile_of_an_unknown_kernel_lists_the_kernels_found(capsys, tmp_path):
    code, _, err = run_cli(capsys, "compile", DOUBLE, "--kernel", "doubel", "--binding", "0:f32:r", "--binding", "1:f32:w")
    assert code == 1
    assert err[:2] == ["CompileError INVALID_CONTRACT: wago_gpu.kernel.doubel must be a defined (i32) -> () export",
                       "note: did you mean --kernel double? the module exports the kernels: double"]
    code, _, err = run_cli(capsys, "compile", MANDELBROT, "--kernel", "zzz", "--binding", "0:f32:r")
    assert code == 1 and err[1] == "note: the module exports the kernels: mandel, step"
    plain = tmp_path / "plain.wat"
    plain.write_text('(module (func (export "f")))')
    code, _, err = run_cli(capsys, "compile", plain, "--kernel", "double", "--binding", "0:f32:r")
    assert code == 1 and err[1] == "note: the module exports no kernel (no export named wago_gpu.kernel.NAME)"
