"""The progress line of the benchmarks and long examples (stderr, off when not a terminal) and the
check for optional packages before any work."""
from __future__ import annotations

import importlib.util
import io

import pytest

from examples.progress import Progress, missing_packages, require_packages


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.delenv("WAGOGPU_PROGRESS", raising=False)
    stream = io.StringIO()
    with Progress(3, "bench", stream=stream) as p:
        for i in range(3):
            p.step(f"case {i}")
    assert stream.getvalue() == ""


def test_a_terminal_sees_the_bar_and_a_cleared_line_after(monkeypatch):
    monkeypatch.delenv("WAGOGPU_PROGRESS", raising=False)
    stream = Terminal()
    with Progress(2, "bench", stream=stream) as p:
        p.step("first")
        assert "bench [############............] 1/2" in stream.getvalue() and "first" in stream.getvalue()
        p.step("second")  # the last step is always drawn
        assert "2/2" in stream.getvalue()
    assert stream.getvalue().endswith("\r" + " " * 118 + "\r")


@pytest.mark.parametrize("setting, terminal, drawn", [("0", True, False), ("1", False, True)])
def test_the_environment_overrides(monkeypatch, setting, terminal, drawn):
    monkeypatch.setenv("WAGOGPU_PROGRESS", setting)
    stream = Terminal() if terminal else io.StringIO()
    with Progress(1, "x", stream=stream) as p:
        p.step()
    assert bool(stream.getvalue()) == drawn


def test_missing_packages_are_reported_before_any_work():
    assert missing_packages({"numpy": "numpy", "no_such_module_for_wagogpu": "nosuch"}) == ["nosuch"]
    with pytest.raises(SystemExit) as e:
        require_packages("bench.x", {"no_such_module_for_wagogpu": "nosuch"}, "plot", "plotting")
    assert e.value.code == "bench.x: plotting needs nosuch: python3 -m pip install '.[plot]' (or pip install nosuch)"


def test_mandelbrot_says_pillow_is_missing_before_rendering(monkeypatch):
    import examples.mandelbrot.__main__ as mandelbrot

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "PIL" else real(name, *a))
    monkeypatch.setattr(mandelbrot, "run", lambda *a, **k: pytest.fail("rendered before reporting Pillow"))
    with pytest.raises(SystemExit) as e:
        mandelbrot.main(["--cpu", "--width", "8", "--height", "8"])
    assert e.value.code == ("examples.mandelbrot: writing the PNG (or --no-image) needs Pillow: "
                            "python3 -m pip install '.[examples]' (or pip install Pillow)")
