"""bench.poll_modes: one record with every wait variant timed on a real device and the last
dispatch's output checked; bad arguments and a device on the public backend end in one line."""
from __future__ import annotations

import json

import pytest

from bench import poll_modes

pytestmark = pytest.mark.gpu  # it dispatches on a GPU adapter (lavapipe in CI)


def test_one_record_with_every_variant_checked(monkeypatch) -> None:
    records: list[dict] = []
    monkeypatch.setattr(poll_modes, "emit", records.append)
    assert poll_modes.main(["--allow-software-adapter", "--rounds", "1", "--calls", "2"]) == 0
    [record] = [json.loads(json.dumps(r)) for r in records]  # (what the JSONL line holds)
    assert record["bench"] == "poll_modes" and record["checked"] is True and record["adapter"]
    variants = ("native_spin", "native_block", "native_spin_yield", "idle_poll", "host_spin", "host_block")
    for name in variants:
        figure = record[name]
        assert 0 < figure["min_us"] <= figure["q1_us"] <= figure["median_us"], name
    assert record["native_spin"]["polls_per_call"] >= 1  # a dispatch is never done before its first poll


def test_bad_arguments_and_the_public_backend_are_one_line_errors(monkeypatch) -> None:
    with pytest.raises(SystemExit, match="--rounds and --calls must be at least 1, got 0, 2"):
        poll_modes.main(["--rounds", "0", "--calls", "2"])
    from wagogpu.gpu import api

    monkeypatch.setenv(api.PUBLIC_ENV, "1")  # the device opens on wgpu-py's public API
    with pytest.raises(SystemExit, match="runs on the public backend; the blocking poll is a wgpu-native call"):
        poll_modes.main(["--allow-software-adapter", "--rounds", "1", "--calls", "1"])
