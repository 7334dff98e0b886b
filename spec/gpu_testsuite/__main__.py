"""python3 -m spec.gpu_testsuite [FILE ...] [--results DIR] [--markdown PATH] [--hardware] [--strict-float] [--render-only]

Runs the copied spec testsuite through wagogpu's GPU and CPU paths, prints one line per file,
writes DIR/<adapter>.jsonl and rebuilds the Markdown table from every JSONL in DIR. Exit status 1
when an integer result, a trap or the CPU path differs from the spec (float differences are
recorded, not failures: tests/host/test_spec_testsuite.py holds each adapter to its record).
--strict-float runs every kernel with strict_float=True and writes DIR/strict-float/<adapter>.jsonl,
the exact mode's record (the Markdown shows both). --render-only rebuilds the Markdown from DIR
without running anything.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .report import STRICT_FOLDER, adapter_slug, count_failures, render_folder, write_jsonl
from .suite import run_suite, wast_files

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_RESULTS = ROOT / "spec" / "results"
DEFAULT_MARKDOWN = ROOT / "docs" / "float-semantics.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m spec.gpu_testsuite", description=__doc__.splitlines()[2])
    ap.add_argument("files", nargs="*", help="testsuite files (default: all in spec/testsuite)")
    ap.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="folder of per-adapter JSONL")
    ap.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN, help="generated Markdown table")
    ap.add_argument("--hardware", action="store_true", help="refuse software adapters (require a GPU)")
    ap.add_argument("--strict-float", action="store_true", help="every kernel strict_float (its own record)")
    ap.add_argument("--render-only", action="store_true", help="only rebuild the Markdown from --results")
    args = ap.parse_args(argv)
    if args.render_only:
        render_folder(args.results, args.markdown)
        print(f"wrote {args.markdown} from {args.results}")
        return 0
    try:
        files = wast_files(args.files)
        run = run_suite(files, allow_software_adapter=not args.hardware, require_gpu=args.hardware,
                        strict_float=args.strict_float)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in run.results:
        print(f"{r.file}: {r.functions} functions, {r.cases} cases; pure {r.spliced_functions} / {r.spliced_cases}; "
              f"eligible {r.eligible_functions} / {r.eligible_cases}; on GPU {r.gpu_cases}; "
              f"float differences {dict(r.classes()) or 0}; failures {len(r.failures())}")
        for d in r.failures():
            print(f"  FAIL {d.finding} {d.file}:{d.line} {d.function}({', '.join(d.args)}) "
                  f"expected {d.expected} got {d.got}")
    folder = args.results / STRICT_FOLDER if args.strict_float else args.results
    path = folder / f"{adapter_slug(run.name)}.jsonl"
    write_jsonl(path, run.adapter, run.results)
    render_folder(args.results, args.markdown)
    failures = count_failures(run.results)
    print(f"{run.name}: {run.adapter['seconds']} s; wrote {path} and {args.markdown}; "
          f"failures {dict(failures) or 0}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
