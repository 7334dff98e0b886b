"""What the long examples and every benchmark share: a progress line on stderr, and optional
packages checked before any work.

The progress line is drawn only when stderr is a terminal, so a pipe, a log file or CI sees nothing
of it (stdout, where benchmarks write their JSONL, is never touched). WAGOGPU_PROGRESS=0 turns it
off on a terminal too, =1 on where stderr is not one.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from types import TracebackType
from typing import TextIO

PROGRESS_ENV = "WAGOGPU_PROGRESS"
#: Seconds between redraws (drawing costs a write to the terminal; loops may step thousands of times).
REDRAW_SECONDS = 0.1


def progress_wanted(stream: TextIO) -> bool:
    setting = os.environ.get(PROGRESS_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """``with Progress(total, "render") as p: ... p.step("tile 3")``: a bar, the count and what runs."""

    def __init__(self, total: int, title: str = "", stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = progress_wanted(self.stream) if enabled is None else enabled
        self.total = max(1, total)
        self.title = title
        self.done = 0
        self._drawn = 0.0
        self._started = time.perf_counter()

    def step(self, what: str = "", count: int = 1) -> None:
        self.done += count
        now = time.perf_counter()
        if self.enabled and (now - self._drawn >= REDRAW_SECONDS or self.done >= self.total):
            self._drawn = now
            self._draw(what, now - self._started)

    def _draw(self, what: str, seconds: float) -> None:
        width = 24
        filled = min(width, width * self.done // self.total)
        line = f"{self.title} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {seconds:5.1f}s {what}"
        self.stream.write("\r" + line[:118].ljust(118))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r" + " " * 118 + "\r")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def missing_packages(needed: dict[str, str]) -> list[str]:
    """The distributions whose module (``{module: distribution}``) is not importable here."""
    return [dist for module, dist in needed.items() if importlib.util.find_spec(module) is None]


def require_packages(program: str, needed: dict[str, str], extra: str, why: str) -> None:
    """Exit with one line naming what to install, before any work, when a package is missing."""
    missing = missing_packages(needed)
    if missing:
        sys.exit(f"{program}: {why} needs {', '.join(missing)}: python3 -m pip install '.[{extra}]' "
                 f"(or pip install {' '.join(missing)})")
