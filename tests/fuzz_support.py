"""Puts fuzz/ (and tests/compiler/, where flowgen lives) on sys.path for the tests of the fuzzers, and
their shared fixture."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT / "fuzz", ROOT / "tests" / "compiler"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")



@pytest.fixture(scope="module")
def hostile_fuzzer():
    """The hostile-guest fuzzer's two hosts, shared by a module's tests."""
    import hostile

    h = hostile.Hostile()
    yield h
    h.close()
