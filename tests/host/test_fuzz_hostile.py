"""The hostile-guest fuzzer (fuzz/hostile.py): a short seeded run on both hosts against the model,
and that a model with one check order changed is caught (the fuzzer can fail)."""
from __future__ import annotations

import pytest

from .. import fuzz_support  # noqa: F401 (sys.path)
from ..fuzz_support import hostile_fuzzer as fuzzer  # noqa: F401 (a fixture)
import hostile  # noqa: E402
import hostile_model  # noqa: E402
from wagogpu import Status  # noqa: E402


def test_a_short_seeded_run_agrees_with_the_model(fuzzer):
    assert hostile.fuzz(60, 30, fuzzer, verbose=False, seed=11) == 30
    assert fuzzer.calls > 150


def test_a_wrong_check_order_in_the_model_is_caught(fuzzer, monkeypatch):
    """The model checking the handle before the slot (docs/design/abi.md §2.4 says the slot first)."""
    original = hostile_model.Model.bind

    def handle_first(model, slot, handle):
        if handle and handle & 0xFFFFFFFF not in model.buffers:
            return Status.INVALID_HANDLE
        return original(model, slot, handle)

    monkeypatch.setattr(hostile_model.Model, "bind", handle_first)
    with pytest.raises(hostile.Failure, match=r"bind\(8, .*host 5, model 2"):
        fuzzer.check([["bind", 8, ["raw", 0xFFFFFFFF]]])


def test_a_wrong_value_in_the_model_is_caught(fuzzer, monkeypatch):
    """The model widening an F16 infinity to a NaN."""
    monkeypatch.setitem(hostile_model.READ_BITS, "F16", lambda word: 0x7FC00001)
    ops = [["packed", 7, 1], ["write", "match", ["recent", 0], ["in", 0], 0x7F800000],
           ["read", "match", ["recent", 0], ["in", 0]]]
    with pytest.raises(hostile.Failure, match="host 2139095040, model 2143289345"):
        fuzzer.check(ops)
