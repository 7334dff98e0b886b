"""The compiler-fuzzing campaign driver (fuzz/campaign.py) and the FUZZ-RESULT line every fuzzer
prints last: parsing, resuming from recorded chunks, choosing the next fuzzer."""
from __future__ import annotations

import json
from dataclasses import asdict

from .. import fuzz_support  # noqa: F401 (sys.path)
import campaign  # noqa: E402
from fuzz_result import FuzzResult, parse  # noqa: E402


def test_the_result_line_round_trips():
    line = FuzzResult("atheris", 1234, 5.5, 0, {"returncode": 0}).line()
    text = f"noise\n{line}\nINFO: trailing libFuzzer output\n"
    assert parse(text) == FuzzResult("atheris", 1234, 5.5, 0, {"returncode": 0})
    assert parse("no result here") is None


def _record(fuzzer: str, executions: int, seconds: float, commit: str, failures: int = 0) -> campaign.Record:
    return campaign.Record("c", fuzzer, executions, seconds, failures, commit, False, 0, 0.0)


def test_a_finished_campaign_resumes_without_running(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "RESULTS", tmp_path)
    monkeypatch.setattr(campaign, "commit", lambda: ("abc", False))
    monkeypatch.setattr(campaign, "_ensure_corpus", lambda fuzzers: None)
    ran = []
    monkeypatch.setattr(campaign, "run_chunk", lambda *a: ran.append(a))
    records = [_record("hypothesis", 600, 10.0, "abc"), _record("atheris", 500, 1.0, "abc"),
               _record("atheris", 10_000, 1.0, "old")]  # another commit: not counted by default
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(asdict(r)) + "\n" for r in records))
    plan = campaign.Plan("c", 1000, 1e18, 100, 60.0, 1, list(campaign.Fuzzer), campaign.Balance.TIME, False)
    tally = campaign.campaign(plan)
    assert ran == [] and tally.total == 1100
    plan.any_commit = True
    assert campaign.Tally.of(plan.recorded(), plan.fuzzers).total == 11_100


def test_the_next_chunk_goes_to_the_fuzzer_with_less_time():
    fuzzers = list(campaign.Fuzzer)
    tally = campaign.Tally.of([_record("hypothesis", 600, 10.0, "x"), _record("atheris", 5000, 2.0, "x")], fuzzers)
    assert tally.next_fuzzer(fuzzers, campaign.Balance.TIME, {}) is campaign.Fuzzer.ATHERIS
    assert tally.next_fuzzer(fuzzers, campaign.Balance.EXECUTIONS, {}) is campaign.Fuzzer.HYPOTHESIS
    assert tally.next_fuzzer(fuzzers, campaign.Balance.TIME, {"atheris": 1}) is campaign.Fuzzer.HYPOTHESIS


def test_a_failing_chunk_stops_the_campaign(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "RESULTS", tmp_path)
    monkeypatch.setattr(campaign, "commit", lambda: ("abc", False))
    calls = []

    def chunk(name, fuzzer, executions, seconds):
        calls.append(fuzzer)
        return _record(fuzzer.value, executions, 1.0, "abc", failures=1), "FAIL: boom"

    monkeypatch.setattr(campaign, "run_chunk", chunk)
    plan = campaign.Plan("c", 10_000, 1e18, 100, 60.0, 1, [campaign.Fuzzer.HYPOTHESIS], campaign.Balance.TIME, False)
    tally = campaign.campaign(plan)
    assert len(calls) == 1 and tally.failures == 1
    assert [json.loads(line)["failures"] for line in (tmp_path / "c.jsonl").read_text().splitlines()] == [1]
    assert any(p.name.startswith("c-failure-hypothesis") for p in tmp_path.iterdir())
