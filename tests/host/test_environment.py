"""How wagogpu meets its environment, each in a fresh interpreter: importing it loads no heavy
stack; with wgpu missing every CPU path (and `wagogpu info`) still works; on wasmtime-py's public
path the host answers the same; a program that exits with hosts and instances open prints nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A meta-path finder that makes wgpu (and everything below it) impossible to import.
HIDE_WGPU = textwrap.dedent('''
    import importlib.abc, sys

    class _NoWgpu(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "wgpu" or name.startswith("wgpu."):
                raise ImportError(f"No module named {name!r} (hidden by the test)")
            return None

    sys.meta_path.insert(0, _NoWgpu())
''')

# One guest end to end on the CPU path: set, dispatch (answers 1), the guest's CPU runner, copy back.
ROUND_TRIP = textwrap.dedent('''
    import struct, sys
    from wagogpu import Config, Host, Status
    from wagogpu.abi import unpack_result
    from tests.conftest import kernel
    from tests.guests import abi_module, runner_kernel

    def round_trip(**config):
        host = Host(Config(kernels=[kernel(1, "double")], **config))
        inst = host.instantiate(host.compile(abi_module(kernels=runner_kernel("double", 0, 1, "(f32.mul $x (f32.const 2))"))))
        _, a = unpack_result(inst.call("createBufferPacked", 8, 4))
        _, b = unpack_result(inst.call("createBufferPacked", 8, 4))
        inst.write_memory(0, struct.pack("<4f", 1, 2, 3, 4))
        assert inst.call("setBuffer32", a, 0, 0, 0, 4) == 0
        assert inst.call("bindBuffer", 0, a) == 0 and inst.call("bindBuffer", 1, b) == 0
        status = inst.call("dispatch", 1, 4)
        if status == Status.CPU_FALLBACK:
            inst.call("wago_gpu.cpu.double", 4)
        assert inst.call("copyBuffer32", b, 0, 0, 64, 4) == 0
        got = struct.unpack("<4f", inst.read_memory(64, 16))
        snap = host.buffer_snapshot()
        return {"status": status, "values": list(got), "state": str(snap.state),
                "reason_code": str(snap.last_dispatch.reason_code), "reason": snap.reason, "host": host, "inst": inst}
''')


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    # The checkout first, then whatever the caller's PYTHONPATH already holds (the GPU machine's
    # wheels live there).
    inherited = os.environ.get("PYTHONPATH")
    path = str(ROOT) + (os.pathsep + inherited if inherited else "")
    environment = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=timeout)


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_stack() -> None:
    proc = run_python(textwrap.dedent('''
        import json, sys
        import wagogpu
        heavy = ("wgpu", "wasmtime", "numpy", "cffi")
        before = sorted(m for m in heavy if m in sys.modules)
        wagogpu.Config  # a public name resolves on first use
        import wagogpu.gpu  # the device layer's records and errors: no wgpu either
        print(json.dumps({"heavy": before, "names": sorted(wagogpu.__all__),
                          "wgpu_after_config": "wgpu" in sys.modules}))
    '''))
    out = last_json(proc)
    assert out["heavy"] == [] and out["wgpu_after_config"] is False
    assert {"Host", "Config", "Status", "ModuleError", "GpuRequiredError", "compile_wgsl"} <= set(out["names"])


def test_without_wgpu_every_cpu_path_works() -> None:
    proc = run_python(HIDE_WGPU + ROUND_TRIP + textwrap.dedent('''
        import json
        import wagogpu.gpu  # the records and errors need no wgpu
        disabled = round_trip(disabled=True)
        no_device = round_trip(allow_software_adapter=True)  # would open a device: wgpu cannot load
        assert "wgpu" not in sys.modules
        print(json.dumps({k: {n: v for n, v in r.items() if n not in ("host", "inst")}
                          for k, r in (("disabled", disabled), ("no_device", no_device))}))
    '''))
    out = last_json(proc)
    for case in ("disabled", "no_device"):
        assert out[case]["status"] == 1 and out[case]["values"] == [2.0, 4.0, 6.0, 8.0], out
    assert (out["disabled"]["state"], out["disabled"]["reason_code"]) == ("DISABLED", "DISABLED")
    assert (out["no_device"]["state"], out["no_device"]["reason_code"]) == ("UNAVAILABLE", "NO_DEVICE")
    assert "wgpu" in out["no_device"]["reason"]


def test_without_wgpu_info_says_why_it_is_cpu_only() -> None:
    proc = run_python(HIDE_WGPU + "import sys\nfrom wagogpu.cli import main\nsys.exit(main(['info']))")
    assert proc.returncode == 0, proc.stderr
    assert "wgpu failed to load" in proc.stdout and "CPU only" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_host_tests_pass_on_the_public_wasmtime_path() -> None:
    """WAGOGPU_PUBLIC_WASMTIME=1 selects wasmtime-py's public API: the crossing, the CPU ABI and the
    legacy runner's tests pass on it unchanged."""
    env = {"WAGOGPU_PUBLIC_WASMTIME": "1"}
    proc = run_python("from wagogpu.host import _wasmtime as w; print(w.FAST_PATH, w.PATH_NOTE)", env)
    assert proc.returncode == 0 and proc.stdout.split()[0] == "False", proc.stdout + proc.stderr
    tests = ["tests/host/test_fastcall.py", "tests/abi/test_abi_cpu.py", "tests/host/test_legacy.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_exit_with_hosts_and_instances_open_prints_nothing(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "xdg"  # mesa's own note about a missing XDG_RUNTIME_DIR is not ours
    runtime_dir.mkdir(mode=0o700)
    proc = run_python(ROUND_TRIP + textwrap.dedent('''
        kept = [round_trip(disabled=True), round_trip(allow_software_adapter=True)]
        for r in kept:  # more instances left open, one of them with a readback in flight on the device
            r["host"].instantiate(r["host"].compile(abi_module())).call("createBufferPacked", 8, 16)
        print("done", kept[1]["status"])
    '''), env={"XDG_RUNTIME_DIR": str(runtime_dir)})
    assert proc.returncode == 0 and proc.stdout.startswith("done"), proc.stderr
    assert proc.stderr == ""
