"""tools/check_circles.py finds a run-time import circle, ignores a type-only one, and passes the package."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check_circles.py"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def _run(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(path)], capture_output=True, text=True, timeout=60)


def test_a_circle_through_a_function_level_import_fails(tmp_path):
    pkg = _package(tmp_path, {"a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n"})
    proc = _run(pkg)
    assert proc.returncode == 1
    assert "pk.a -> pk.b" in proc.stderr


def test_a_type_only_import_closes_no_circle(tmp_path):
    pkg = _package(tmp_path, {"a.py": "from . import b\n",
                              "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"})
    proc = _run(pkg)
    assert proc.returncode == 0, proc.stderr
    assert "0 run-time import circle(s)" in proc.stdout


def test_the_package_has_no_run_time_circle():
    proc = _run(ROOT / "wagogpu")
    assert proc.returncode == 0, proc.stderr
