"""Two checkouts of wagogpu, one benchmark, alternating runs: the before/after of a change in one run.

    python3 -m bench.compare_versions --old .old --rounds 2 --out ab.jsonl -- \\
        bench.buffer_bench --kernels twice --sizes 1024 --require-gpu

Each round runs the benchmark module once per checkout (old first on even rounds, new first on
odd ones, so neither always meets a cold cache), each in a fresh interpreter whose cwd and
PYTHONPATH are that checkout. Every JSONL record the benchmark prints is written to --out with
`version` ("old"/"new") and `round` added; the benchmark checks its own results outside its timers.
Afterwards the medians over rounds of every timing field (top-level numbers whose names end in
NS, _ms or _us, also one record deep) are printed beside each other with new/old, matched on the record's key fields.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

NEW_ROOT = Path(__file__).resolve().parent.parent
TIMING_SUFFIXES = ("NS", "_ms", "_us")
KEY_FIELDS = ("bench", "adapter", "Kernel", "Count", "path", "mode", "kernel", "elements", "n", "steps", "pixels", "case",
              "name", "width", "height", "pipelined", "stage")


def run_once(root: Path, module: list[str], timeout: float) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH")))))
    proc = subprocess.run([sys.executable, "-m", *module], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        raise SystemExit(f"compare_versions: {' '.join(module)} failed in {root} (exit {proc.returncode}): {tail[0]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def shared_key_fields(records: list[dict]) -> dict[str, tuple[str, ...]]:
    """Per benchmark, the key fields that both versions' records carry (a field that only one
    version added, such as a new `mode`, would otherwise keep every record apart)."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rec in records:
        seen[(rec.get("bench", ""), rec["version"])].update(k for k in KEY_FIELDS if k in rec)
    benches = {bench for bench, _ in seen}
    return {b: tuple(k for k in KEY_FIELDS if k in seen[(b, "old")] & seen[(b, "new")]) for b in benches}


def timings(rec: dict) -> dict[str, float]:
    """The record's timing fields; one level of nested records counts too, as `Outer.Field`."""
    flat = dict(rec)
    for outer, inner in rec.items():
        if isinstance(inner, dict):
            flat.update((f"{outer}.{k}", v) for k, v in inner.items())
    return {k: float(v) for k, v in flat.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k.endswith(TIMING_SUFFIXES)}


def summarise(records: list[dict]) -> list[dict]:
    """Per key and timing field: the median over rounds of each version, and new/old."""
    values: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    key_fields = shared_key_fields(records)
    for rec in records:
        key = tuple((k, rec[k]) for k in key_fields[rec.get("bench", "")] if k in rec)
        for field, value in timings(rec).items():
            values[(key, field)][rec["version"]].append(value)
    rows = []
    for (key, field), by_version in values.items():
        if "old" in by_version and "new" in by_version:
            old, new = statistics.median(by_version["old"]), statistics.median(by_version["new"])
            rows.append({"key": dict(key), "field": field, "old": old, "new": new,
                         "new_over_old": new / old if old else None, "rounds": len(by_version["new"])})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--old", type=Path, required=True, help="the other checkout (with its own bench/)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per benchmark run")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("module", nargs=argparse.REMAINDER, help="-- bench.<name> [its arguments]")
    args = ap.parse_args(argv)
    module = args.module[1:] if args.module[:1] == ["--"] else args.module
    if not module:
        ap.error("name the benchmark module after --")
    roots = {"old": args.old.resolve(), "new": NEW_ROOT}
    records: list[dict] = []
    with args.out.open("a") as out:
        for rnd in range(args.rounds):
            for version in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                for rec in run_once(roots[version], module, args.timeout):
                    rec.update(version=version, round=rnd, command=" ".join(module))
                    out.write(json.dumps(rec, sort_keys=True) + "\n")
                    records.append(rec)
                out.flush()
    for row in summarise(records):
        print(json.dumps(row, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
