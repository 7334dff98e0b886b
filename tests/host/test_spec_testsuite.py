"""The official Wasm spec testsuite (spec/testsuite/) through a real Host on the adapter (lavapipe
unless WAGO_GPU_TEST=1): every pure i32/f32 function with cases runs as a buffer kernel, one
element per case, on the GPU path and on the guest's CPU runner.

Held exactly: the CPU path gives every spec result and trap; integer functions are bit-exact on
the GPU; every trap case makes dispatch return 1 with nothing published; every GPU-eligible case
runs on the GPU or falls back as recorded for the adapter (no silent fallback). Float differences must fall in the classes recorded for the
adapter in spec/results/<adapter>.jsonl, no more cases per class than recorded when the record is
for this very adapter, and the GPU covers at least the recorded cases of each file: a new
difference, or lost coverage, fails until the record is regenerated and reviewed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from spec.gpu_testsuite.check import Finding
from spec.gpu_testsuite.report import AdapterRun, adapter_slug, read_jsonl
from spec.gpu_testsuite.suite import SuiteRun, run_suite, wast_files

from ..gpu_support import HARDWARE_REQUIRED

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

RESULTS = Path(__file__).resolve().parents[2] / "spec" / "results"
REGENERATE = "python3 -m spec.gpu_testsuite (then review docs/float-semantics.md and commit spec/results/)"


@pytest.fixture(scope="module")
def suite() -> SuiteRun:
    try:
        return run_suite(wast_files(), allow_software_adapter=not HARDWARE_REQUIRED,
                         require_gpu=HARDWARE_REQUIRED)
    except RuntimeError as exc:  # no adapter opened: a failure, never a skip
        pytest.fail(str(exc))


def _record(name: str) -> tuple[AdapterRun | None, bool]:
    """The recorded run of this adapter (exact: True), else of its family (llvmpipe, NVIDIA...)."""
    exact = RESULTS / f"{adapter_slug(name)}.jsonl"
    if exact.is_file():
        return read_jsonl(exact), True
    family = name.split()[0].lower() if name else ""
    for path in sorted(RESULTS.glob("*.jsonl")):
        run = read_jsonl(path)
        if run.adapter["adapter"].split()[0].lower() == family:
            return run, False
    return None, False


def _failures(suite: SuiteRun, *findings: Finding) -> list[str]:
    return [f"{d.file}:{d.line} {d.function}({', '.join(d.args)}) expected {d.expected} got {d.got}"
            for r in suite.results for d in r.failures() if d.finding in findings]


def test_every_file_was_read_and_ran(suite: SuiteRun):
    assert len(suite.results) == len(wast_files()) == 25
    for r in suite.results:
        assert r.cases > 0 and r.spliced_cases > 0 and r.gpu_cases > 0, r.file


def test_the_cpu_path_gives_every_spec_result_and_trap(suite: SuiteRun):
    assert _failures(suite, Finding.CPU_MISMATCH) == []


def test_integer_functions_are_bit_exact_on_the_gpu(suite: SuiteRun):
    assert _failures(suite, Finding.INTEGER_MISMATCH) == []
    assert sum(r.gpu_cases - r.float_cases - r.gpu_traps for r in suite.results) >= 800


def test_traps_fall_back_with_nothing_published(suite: SuiteRun):
    assert _failures(suite, Finding.TRAP_NOT_RAISED, Finding.TRAP_PUBLISHED) == []
    assert sum(r.gpu_traps for r in suite.results) >= 60  # raised by the kernels themselves


def test_eligible_kernels_fall_back_only_as_recorded(suite: SuiteRun):
    """No silent fallback: an eligible case leaves the GPU only as the adapter's record says (on
    lavapipe f32.compute_radix(1, 1), whose loop relaxed arithmetic keeps running: LOOP_BUDGET)."""
    record, _ = _record(suite.name)
    assert record is not None, f"no record for {suite.name!r}: run {REGENERATE}"
    recorded = {f["file"]: f.get("fallbacks", {}) for f in record.files}
    new = {r.file: dict(r.fallbacks) for r in suite.results
           if any(n > recorded.get(r.file, {}).get(str(reason), 0) for reason, n in r.fallbacks.items())}
    assert new == {}, f"eligible cases fell back beyond the record; if intended, {REGENERATE}"


def test_float_differences_stay_in_the_recorded_classes(suite: SuiteRun):
    record, exact = _record(suite.name)
    assert record is not None, f"no float record for {suite.name!r}: run {REGENERATE}"
    recorded = record.classes()
    seen = {r.file: r.classes() for r in suite.results}
    new = {f: sorted(set(c) - set(recorded)) for f, c in seen.items() if set(c) - set(recorded)}
    assert new == {}, f"float difference classes not recorded for this adapter; if intended, {REGENERATE}"
    if exact:
        total = sum(seen.values(), start=type(recorded)())
        grown = {c: (n, recorded[c]) for c, n in total.items() if n > recorded[c]}
        assert grown == {}, f"more differing cases than recorded (now, recorded); if intended, {REGENERATE}"


def test_gpu_coverage_does_not_shrink(suite: SuiteRun):
    record, _ = _record(suite.name)
    assert record is not None, f"no record for {suite.name!r}: run {REGENERATE}"
    recorded = {f["file"]: f["gpu_cases"] for f in record.files}
    lost = {r.file: (r.gpu_cases, recorded[r.file]) for r in suite.results
            if r.gpu_cases < recorded.get(r.file, 0)}
    assert lost == {}, f"fewer cases ran on the GPU than recorded (now, recorded); if intended, {REGENERATE}"


@pytest.fixture(scope="module")
def strict_suite() -> SuiteRun:
    try:
        return run_suite(wast_files(), allow_software_adapter=not HARDWARE_REQUIRED, require_gpu=HARDWARE_REQUIRED,
                         strict_float=True)
    except RuntimeError as exc:
        pytest.fail(str(exc))


def test_strict_float_kernels_give_every_spec_answer(strict_suite: SuiteRun, suite: SuiteRun):
    """With every kernel strict_float the GPU gives the spec's answer for every case, floats included,
    on every adapter (no record needed), and covers every case the native mode covers."""
    assert sum(r.float_cases for r in strict_suite.results) >= 6000
    assert {r.file: dict(r.classes()) for r in strict_suite.results if r.classes()} == {}
    assert [f for r in strict_suite.results for f in r.failures()] == []
    assert {r.file: dict(r.fallbacks) for r in strict_suite.results if r.fallbacks} == {}
    native = {r.file: r.gpu_cases for r in suite.results}
    assert {r.file: r.gpu_cases for r in strict_suite.results} == native
