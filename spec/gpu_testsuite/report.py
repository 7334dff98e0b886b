"""JSONL records of a run (one file per adapter) and the generated Markdown table for the guide.

Records: one `adapter` record (what ran, where, how long), one `file` record per `.wast` file,
and one `difference` record per differing case. The Markdown is rebuilt from every adapter's
JSONL in the results folder, so a run on another machine adds its table by adding its file.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .check import FileResult, Finding
from .floats import DESCRIPTIONS, FloatClass

MAX_EXAMPLES = 3
COMMAND = "python3 -m spec.gpu_testsuite"
STRICT_FOLDER = "strict-float"  # the records of runs with every kernel strict_float, beside the others


def adapter_slug(name: str) -> str:
    """A file name for an adapter, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)` -> `llvmpipe-llvm-15-0-6-256-bits`."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def file_record(adapter: str, r: FileResult) -> dict:
    return {"record": "file", "adapter": adapter, "file": r.file, "functions": r.functions, "cases": r.cases,
            "spliced_functions": r.spliced_functions, "spliced_cases": r.spliced_cases,
            "eligible_functions": r.eligible_functions, "eligible_cases": r.eligible_cases,
            "gpu_cases": r.gpu_cases, "gpu_traps": r.gpu_traps, "float_gpu_cases": r.float_cases,
            "failures": len(r.failures()),
            "classes": dict(sorted(r.classes().items())), "fallbacks": dict(r.fallbacks),
            "not_run": dict(r.not_run), "not_eligible": dict(r.not_eligible)}


def write_jsonl(path: Path, adapter_record: dict, results: list[FileResult]) -> None:
    adapter = adapter_record["adapter"]
    lines = [adapter_record] + [file_record(adapter, r) for r in results]
    lines += [{"record": "difference", "adapter": adapter, **d.record()} for r in results for d in r.differences]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, sort_keys=False) + "\n" for x in lines), encoding="utf-8")


@dataclass(slots=True)
class AdapterRun:
    """One adapter's records, read back from its JSONL."""

    adapter: dict
    files: list[dict] = field(default_factory=list)
    differences: list[dict] = field(default_factory=list)

    def classes(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for f in self.files:
            total.update(f["classes"])
        return total

    def total(self, key: str) -> int:
        return sum(f[key] for f in self.files)


def read_jsonl(path: Path) -> AdapterRun:
    run: AdapterRun | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["record"] == "adapter":
            run = AdapterRun(rec)
        elif run is None:
            raise ValueError(f"{path}: the first record must name the adapter")
        elif rec["record"] == "file":
            run.files.append(rec)
        elif rec["record"] == "difference":
            run.differences.append(rec)
    if run is None:
        raise ValueError(f"{path}: no adapter record")
    return run


def _classes_cell(classes: dict[str, int]) -> str:
    return ", ".join(f"{c} {n}" for c, n in sorted(classes.items())) or "-"


def _file_table(run: AdapterRun) -> list[str]:
    rows = ["| file | functions | cases | pure i32/f32 (fn / cases) | GPU-eligible (fn / cases) | ran on GPU "
            "| differing on GPU |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for f in run.files:
        rows.append(f"| {f['file']} | {f['functions']} | {f['cases']} | {f['spliced_functions']} / "
                    f"{f['spliced_cases']} | {f['eligible_functions']} / {f['eligible_cases']} | {f['gpu_cases']} "
                    f"| {_classes_cell(f['classes'])} |")
    rows.append(f"| **all** | {run.total('functions')} | {run.total('cases')} | {run.total('spliced_functions')} / "
                f"{run.total('spliced_cases')} | {run.total('eligible_functions')} / {run.total('eligible_cases')} "
                f"| {run.total('gpu_cases')} | {_classes_cell(dict(run.classes()))} |")
    return rows


def _example(d: dict) -> str:
    return f"`{d['function']}({', '.join(d['args'])})` = {d['expected']}, got {d['got']} ({d['file']}:{d['line']})"


def _class_table(run: AdapterRun) -> list[str]:
    rows = ["| class | cases | what it means | examples |", "| --- | ---: | --- | --- |"]
    classes = run.classes()
    for cls in FloatClass:
        if not classes.get(cls.value):
            continue
        examples = [d for d in run.differences if d["float_class"] == cls.value][:MAX_EXAMPLES]
        rows.append(f"| {cls.value} | {classes[cls.value]} | {DESCRIPTIONS[cls]} | "
                    + "<br>".join(_example(d) for d in examples) + " |")
    return rows


def _cpu_only(run: AdapterRun) -> list[str]:
    """Why pure functions stayed on the CPU (the compiler's reasons), most frequent first."""
    reasons: Counter[str] = Counter()
    for f in run.files:
        reasons.update(f["not_eligible"])
    if not reasons:
        return []
    listed = "; ".join(f"{reason} ({n})" for reason, n in reasons.most_common())
    return [f"Pure functions the GPU compiler refused (they ran on the CPU path only): {listed}.", ""]


def adapter_section(run: AdapterRun) -> list[str]:
    a = run.adapter
    float_cases = run.total("float_gpu_cases")
    differing = sum(run.classes().values())
    failures = run.total("failures")
    mode = ", every kernel `strict_float=True`" if a.get("strict_float") else ""
    out = [f"## {a['adapter']}{mode}", "",
           f"Backend {a.get('backend', '?')}, driver {a.get('driver', '?')}; wagogpu {a.get('wagogpu', '?')}, "
           f"{a.get('seconds', 0):.0f} s. {run.total('gpu_cases')} cases ran on the GPU, {float_cases} of them "
           f"in float functions; **{differing}** of those differ from the spec. Integer results, traps "
           f"and the CPU path: {failures} failures.", ""]
    out += _file_table(run) + [""] + _cpu_only(run)
    out += _class_table(run) if differing else ["No float case differs on this adapter."]
    return out + [""]


def render_markdown(runs: list[AdapterRun]) -> str:
    head = ["# Float semantics per adapter", "",
            f"<!-- generated by `{COMMAND}`; do not edit by hand -->", "",
            "The official WebAssembly spec testsuite (`spec/testsuite/`) run through wagogpu: every pure "
            "i32/f32 function of its files that has `assert_return`/`assert_trap` cases becomes a buffer "
            "kernel, one element per case, and runs on the GPU path and on the guest's own CPU runner. "
            "The CPU path always gives Wasm's answer; integer results and traps are exact on the GPU "
            "too. With `relaxed_float=True` a float kernel's GPU results may differ as the tables below "
            "record, per adapter and per class. Outside the reference subset the compiler hides float "
            "constants and results from the driver's folding (an OR with a run-time zero), which is what "
            "keeps constant folding and reassociation out of these tables; flush-to-zero and approximate "
            "division or square root happen in hardware and stay. A kernel declared `strict_float=True` "
            "computes its f32 arithmetic exactly in integer code on every adapter (no relaxed_float "
            "consent needed, about 5-6x the instructions): its sections, headed `strict_float=True`, "
            "must show no difference.", "",
            "| class | meaning |", "| --- | --- |"]
    head += [f"| {c.value} | {DESCRIPTIONS[c]} |" for c in FloatClass] + [""]
    body = [line for run in runs for line in adapter_section(run)]
    return "\n".join(head + body)


def render_folder(results: Path, markdown: Path) -> None:
    """The Markdown of every record in `results`, then of every strict_float record beside them."""
    paths = sorted(results.glob("*.jsonl")) + sorted((results / STRICT_FOLDER).glob("*.jsonl"))
    runs = [read_jsonl(p) for p in paths]
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(render_markdown(runs), encoding="utf-8")


def count_failures(results: list[FileResult]) -> Counter[Finding]:
    return Counter(d.finding for r in results for d in r.failures())
