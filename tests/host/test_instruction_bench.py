"""bench.instructions: its child makes the calls it is asked for on the stubbed host, and bad
arguments or a missing valgrind end in one line naming what is wrong (the valgrind run itself is
too slow for the suite; bench/results hold its figures)."""
from __future__ import annotations

import pytest

from bench import instructions


def test_a_child_makes_its_calls_on_the_stubbed_device(capsys, monkeypatch) -> None:
    made = []
    from bench import host_overhead

    real = host_overhead.guest

    def guest(host, n):
        inst, x = real(host, n)
        call = inst.call
        monkeypatch.setattr(inst, "call", lambda name, *a: made.append(name) or call(name, *a))
        return inst, x

    monkeypatch.setattr(host_overhead, "guest", guest)
    instructions.child("round_trip", 7, 256)
    warm = 3 * instructions.WARM_ROUNDS
    assert made[warm:] == ["sample"] * 7 and len(made) == warm + 7
    assert capsys.readouterr().out.strip()  # the adapter it stubbed


def test_bad_calls_and_a_missing_valgrind_are_one_line_errors(monkeypatch) -> None:
    with pytest.raises(SystemExit, match="--calls must be at least 1, got 0"):
        instructions.main(["--calls", "0"])
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="valgrind is not installed"):
        instructions.main([])
