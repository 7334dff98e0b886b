"""The suite collects without the optional extras (ray, atheris, matplotlib): their tests skip.

Packages that raise ImportError when imported stand in for missing ones on PYTHONPATH (installed
ones would otherwise be found), and `pytest --collect-only` must report no collection error."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("ray", "atheris", "matplotlib")


def test_the_suite_collects_without_the_optional_extras(tmp_path):
    for name in EXTRAS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed (test stand-in)')\n")
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # where the deps may live
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), *inherited])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert "error" not in proc.stdout.splitlines()[-1].lower(), tail
    assert "tests/host/test_ray_pool.py" in proc.stdout and "could not import 'ray'" in proc.stdout, tail
