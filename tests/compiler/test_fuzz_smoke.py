"""A short run of the fuzzers (fuzz/): the hypothesis fuzzer for ~12 s, the atheris harness on its seeds."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"fuzz_{name}", os.path.join(ROOT, "fuzz", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_hypothesis_fuzzer_smoke(gpu):
    fuzzer = _load("hypothesis_fuzz")
    produced: set[str] = set()
    stats = fuzzer.run(seconds=12, max_input_seconds=5.0, chunk=60, on_wgsl=produced.add)
    assert stats.inputs > 200 and stats.compiled > 20 and stats.slowest < 5.0
    for wgsl in sorted(produced)[:300]:  # every shader the fuzzer produced must also be valid WGSL
        gpu.validate(wgsl)


def test_atheris_harness_runs_its_seeds(tmp_path):
    harness = _load("fuzz_compiler")
    assert harness.write_seeds(str(tmp_path)) >= 8
    for path in sorted(tmp_path.iterdir()):
        data = path.read_bytes()
        harness.test_one_input(data)
        for cut in range(0, len(data), max(1, len(data) // 40)):
            harness.test_one_input(data[:cut])
