"""`wagogpu demo` (the start, buffers and compiled examples, per kernel which path ran) and
`wagogpu bench` (list or run a benchmark of the source checkout's bench/)."""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from .common import Failure, UsageError


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import report_lines, run_demo
    from ..errors import ConfigError, GpuRequiredError

    if args.cpu and args.require_gpu:
        raise UsageError("--require-gpu cannot be combined with --cpu")
    try:
        report = run_demo(args.cpu, args.require_gpu, args.allow_software_adapter, args.power_preference,
                          args.adapter, args.backend, args.cpu_kernels, args.placement)
    except GpuRequiredError as exc:
        raise Failure(str(exc)) from exc
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(dict(asdict(report), ok=report.ok, problems=report.problems), indent=2))
    else:
        print("\n".join(report_lines(report)))
    return 0 if report.ok else 1


def bench_dir() -> Path | None:
    """bench/ of the source checkout: under the working directory, or beside an editable install."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent.parent):
        candidate = root / "bench"
        if candidate.is_dir() and any(candidate.glob("*.py")):
            return candidate
    return None


def benchmarks(directory: Path) -> dict[str, str]:
    """Runnable benchmark modules in bench/ (those with a __main__ block) and their first docstring line."""
    out = {}
    for path in sorted(directory.glob("*.py")):
        if path.stem.startswith("_") or path.stem == "common":
            continue
        text = path.read_text(errors="replace")
        if "__main__" not in text:
            continue
        try:
            doc = ast.get_docstring(ast.parse(text)) or ""
        except SyntaxError:
            doc = ""
        out[path.stem] = summary(doc)
    return out


def summary(doc: str, width: int = 100) -> str:
    """A docstring's first sentence (or first paragraph, shortened), on one line."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    if 0 < end < width:
        return paragraph[:end + 1]
    return paragraph if len(paragraph) <= width else paragraph[:width - 3].rstrip() + "..."


def cmd_bench(args: argparse.Namespace) -> int:
    directory = bench_dir()
    if directory is None:
        raise UsageError("no bench/ directory here: the benchmarks live in the source checkout, run from its root")
    found = benchmarks(directory)
    if not args.name:
        if args.args:
            raise UsageError("give a benchmark name before its arguments")
        print(f"benchmarks in {directory} (wagogpu bench NAME [ARG...] runs python -m bench.NAME):")
        width = max((len(n) for n in found), default=0)
        for name, doc in found.items():
            print(f"  {name:<{width}}  {doc}")
        return 0
    if args.name not in found:
        raise UsageError(f"unknown benchmark {args.name!r} (one of {', '.join(found) or 'none'})")
    sys.stdout.flush()
    return subprocess.run([sys.executable, "-m", f"bench.{args.name}", *args.args], cwd=directory.parent).returncode
