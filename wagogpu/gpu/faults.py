"""Fault injection: a test double the device consults at named stages.

The device still makes the real wgpu calls around an injected fault wherever
it can, so tests on lavapipe exercise the real code paths; the injector only
decides that a stage "fails" and the device raises exactly as it would for a
real failure at that point.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from .errors import FailureStage

__all__ = ["FaultInjector", "STAGES"]

#: Stages the device consults, in the order they can occur (every FailureStage but CLOSED):
#: alloc (create_* / stage -> DeviceAllocationError), pipeline (-> PipelineError), submit
#: (execute / read / write before submission), block (execute after submission: waits on
#: ``release``), wait, timeout (the deadline is treated as passed), lost, after_completion
#: (a validation error reported after the work ran), map and unmap (readback).
STAGES: tuple[FailureStage, ...] = tuple(s for s in FailureStage if s is not FailureStage.CLOSED)


class FaultInjector:
    """Decides which occurrences of which stages fail, and counts every stage reached.

    ``fail`` maps a stage to the 1-based occurrence(s) that fail:
    ``FaultInjector(fail={"submit": 1})`` fails the first submission only;
    ``{"map": [2, 3]}`` the second and third map.  ``fail_always`` names
    stages that fail every time.  ``counts[stage]`` is how often the stage
    was reached, ``failures[stage]`` how often it was made to fail.

    The "block" stage does not fail: when selected it sets ``blocked`` and
    waits on ``release`` (a ``threading.Event``) so a test can run close()
    concurrently with an execute that is stuck on the device.
    """

    def __init__(
        self,
        fail: Mapping[str, int | Iterable[int]] | None = None,
        fail_always: Iterable[str] = (),
        release: threading.Event | None = None,
    ) -> None:
        self._fail: dict[str, frozenset[int]] = {}
        for stage, which in (fail or {}).items():
            self._fail[self._check(stage)] = frozenset([which] if isinstance(which, int) else which)
        self._always = frozenset(self._check(s) for s in fail_always)
        self.counts: dict[str, int] = {s: 0 for s in STAGES}
        self.failures: dict[str, int] = {s: 0 for s in STAGES}
        self.blocked = threading.Event()
        self.release = release if release is not None else threading.Event()
        self._lock = threading.Lock()

    @staticmethod
    def _check(stage: str) -> FailureStage:
        if stage not in STAGES:
            raise ValueError(f"unknown fault stage {stage!r}; known: {', '.join(STAGES)}")
        return FailureStage(stage)

    def hit(self, stage: str) -> bool:
        """Record that ``stage`` was reached; True when this occurrence must fail."""
        with self._lock:
            n = self.counts[stage] = self.counts[stage] + 1
            failing = stage in self._always or n in self._fail.get(stage, ())
            if failing:
                self.failures[stage] += 1
            return failing

    def __repr__(self) -> str:
        reached = {str(k): v for k, v in self.counts.items() if v}
        return f"FaultInjector(fail={dict(self._fail)!r}, always={set(self._always)!r}, reached={reached!r})"
