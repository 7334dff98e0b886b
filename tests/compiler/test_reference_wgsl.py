"""Reference-subset kernels keep their exact WGSL: every case of reference_corpus against the golden
file written before the lowering became one path (see reference_corpus.py)."""
from __future__ import annotations

import json

import pytest

import reference_corpus as corpus

GOLDEN: dict[str, str] = json.loads(corpus.GOLDEN.read_text())
CASES = corpus.all_cases()


def test_golden_file_matches_the_corpus():
    assert sorted(GOLDEN) == sorted(c.name for c in CASES)
    assert not any(v.startswith("error") for v in GOLDEN.values())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_subset_wgsl_is_byte_identical(case):
    assert corpus.outcome(case) == GOLDEN[case.name]


def test_named_cases_are_reference_shaped():
    """The named texts use no construct of the extended subset (error word, vars, helpers)."""
    for case in CASES:
        text = GOLDEN[case.name]
        if case.name.startswith("random_"):
            continue
        main = text[text.index("fn main"):]
        assert "err" not in text and "var " not in main and "wasm_" not in text, case.name
