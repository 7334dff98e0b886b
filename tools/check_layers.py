"""Check wagogpu's import layers from the import graph; exit 1 naming every import that breaks them.

    python3 tools/check_layers.py [PACKAGE_DIR]

Layers, top to bottom (a module may import its own layer and any layer below it, never above):

    face      __init__, __main__, cli, demo, ray
    host      host/, config
    buffers   buffers/
    gpu       gpu/
and beside them:
    compiler  compiler/  imported by host and face only; imports abi and the leaves
    abi       abi/       imported by everyone but gpu (gpu knows no Wasm); imports the leaves
    leaves    diagnostics, memcopy, errors: import nothing of the package (errors may
              reach the compiler lazily, inside a function)

Third-party edges: wasmtime only from host/ and face; wasmtime's private modules (wasmtime._*)
only from host/_wasmtime.py; wgpu only from gpu/; wgpu's internals (wgpu.backends.*) only from
gpu/_native.py. Every import counts, also one inside a function or under TYPE_CHECKING.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

RANK = {"face": 4, "host": 3, "buffers": 2, "gpu": 1}
# What each side layer may import, besides itself.
SIDE_IMPORTS = {"compiler": {"abi", "leaf"}, "abi": {"leaf"}, "leaf": set()}
# Who may import each side layer.
SIDE_IMPORTERS = {"compiler": {"face", "host"}, "abi": {"face", "host", "buffers", "compiler"},
                  "leaf": {"face", "host", "buffers", "gpu", "compiler", "abi"}}
FACE = {"__init__", "__main__", "cli", "demo", "ray"}
LEAVES = {"diagnostics", "memcopy", "errors"}
WASMTIME_INTERNALS = "host/_wasmtime.py"
WGPU_INTERNALS = "gpu/_native.py"
# A lazy import inside a function that a leaf may make (errors.CompileError for callers).
LAZY_LEAF_EXCEPTIONS = {("errors", "compiler")}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def layer_of(parts: tuple[str, ...]) -> str:
    """Layer of a module given its path parts below the package ('host', '_wasmtime')."""
    head = parts[0]
    if head in FACE:
        return "face"
    if head in LEAVES:
        return "leaf"
    if head == "config":
        return "host"
    return head


def allowed(importer: str, imported: str) -> bool:
    if importer == imported:
        return True
    if importer in RANK and imported in RANK:
        return RANK[importer] > RANK[imported]
    if importer in SIDE_IMPORTS:
        return imported in SIDE_IMPORTS[importer]
    return importer in SIDE_IMPORTERS.get(imported, set())


def _module_parts(path: Path, root: Path) -> tuple[str, ...]:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts
    return parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts


def _resolve(node: ast.ImportFrom, parts: tuple[str, ...], is_package: bool) -> list[tuple[str, ...]]:
    """Package-relative targets of a `from ... import` inside the package ([] when outside it)."""
    if node.level == 0:
        if not (node.module or "").startswith("wagogpu"):
            return []
        base = tuple((node.module or "").split(".")[1:])
    else:
        anchor = parts if is_package else parts[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)] if node.level > 1 else anchor
        base = anchor + tuple(node.module.split(".") if node.module else ())
    if base:
        return [base]
    return [(alias.name,) for alias in node.names]  # `from . import cli`


def _inside_function(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    lines.add(id(node))
    return lines


def check_file(path: Path, root: Path) -> list[Violation]:
    rel = path.relative_to(root).as_posix()
    parts = _module_parts(path, root)
    importer = layer_of(parts)
    tree = ast.parse(path.read_text(), filename=rel)
    lazy = _inside_function(tree)
    found: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _third_party(rel, importer, node.lineno, alias.name)
                if alias.name.startswith("wagogpu."):
                    found += _internal(rel, importer, node.lineno, tuple(alias.name.split(".")[1:]), False, root)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module == "wagogpu":
                found += _internal(rel, importer, node.lineno, ("__init__",), id(node) in lazy, root)
                continue
            if node.level == 0 and node.module and not node.module.startswith("wagogpu"):
                found += _third_party(rel, importer, node.lineno, node.module)
            for target in _resolve(node, parts, path.name == "__init__.py"):
                found += _internal(rel, importer, node.lineno, target, id(node) in lazy, root)
    return found


def _existing(root: Path, target: tuple[str, ...]) -> tuple[str, ...]:
    """The module a target names: `from .x import name` names x, not x.name; () for the package."""
    while target and not ((root.joinpath(*target).with_suffix(".py")).is_file() or root.joinpath(*target).is_dir()):
        target = target[:-1]
    return target


def _internal(rel: str, importer: str, line: int, target: tuple[str, ...], lazy: bool,
              root: Path) -> list[Violation]:
    target = _existing(root, target) or ("__init__",)
    imported = layer_of(target)
    if allowed(importer, imported):
        return []
    if lazy and (Path(rel).stem, target[0]) in LAZY_LEAF_EXCEPTIONS:
        return []
    return [Violation(rel, line, f"{importer} imports {imported} (wagogpu.{'.'.join(target)})")]


def _third_party(rel: str, importer: str, line: int, module: str) -> list[Violation]:
    top = module.split(".")[0]
    if top == "wasmtime":
        if module.startswith("wasmtime._") and rel != WASMTIME_INTERNALS:
            return [Violation(rel, line, f"wasmtime internals ({module}) outside {WASMTIME_INTERNALS}")]
        if importer not in ("host", "face"):
            return [Violation(rel, line, f"{importer} imports wasmtime")]
    if top == "wgpu":
        if module.startswith("wgpu.backends") and rel != WGPU_INTERNALS:
            return [Violation(rel, line, f"wgpu internals ({module}) outside {WGPU_INTERNALS}")]
        if importer != "gpu":
            return [Violation(rel, line, f"{importer} imports wgpu")]
    return []


def check(root: Path) -> list[Violation]:
    found: list[Violation] = []
    for path in sorted(root.rglob("*.py")):
        found += check_file(path, root)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent / "wagogpu")
    if not root.is_dir():
        print(f"check_layers: {root} is not a directory", file=sys.stderr)
        return 2
    found = check(root)
    for v in found:
        print(v)
    modules = sum(1 for _ in root.rglob("*.py"))
    print(f"check_layers: {modules} modules, {len(found)} import(s) against the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
