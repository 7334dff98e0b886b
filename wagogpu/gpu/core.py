"""What every part of one device shares: the backend, the lock and closed flag, fault injection,
tuning, and the waits.

Every native call happens under ``lock`` after a closed check, so close() from another thread
never frees objects a call is using.  Waiting is a poll loop with a deadline (the backend's poll
never blocks), taking the lock per poll so close() can get in between; a single native call that
blocks inside the driver cannot be interrupted (README.md's table says what is bounded).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence

from .adapters import AdapterInfo
from .backend import Backend, MapCell
from .errors import DeviceFailure, FailureStage
from .faults import FaultInjector
from .tuning import DeviceTuning

__all__ = ["DeviceCore"]

_MAX_NAP = 0.002


def _nothing() -> None:
    """No pending batch to submit."""


class DeviceCore:
    """The shared state of one open device and the checks and waits every part uses."""

    def __init__(self, backend: Backend, info: AdapterInfo, faults: FaultInjector | None,
                 tuning: DeviceTuning) -> None:
        self.backend = backend
        self.natives = backend.natives
        self.flags = backend.flags
        self.info = info
        self.faults = faults
        self.tuning = tuning
        self.hardware = not info.is_software
        self.lock = threading.RLock()
        self.closed = False
        self._ids = itertools.count(1)
        #: Completion cells of submitted work that a wait gave up on (a timeout): the device may
        #: still be running it. settled() and close() look here before anything else reaches the
        #: queue, since on some drivers (lavapipe) a submission blocks until that work is done.
        self.unfinished: list[MapCell] = []
        self._submit_pending: Callable[[], None] = _nothing

    def attach_pending(self, submit: Callable[[], None]) -> None:
        """Name the open pending batch's submit (batch.py; the device assembles its parts once)."""
        self._submit_pending = submit

    def submit_pending(self) -> None:
        """Submit the open pending batch first: every other submission calls this (lock held), so
        work reaches the queue in the order it was recorded."""
        self._submit_pending()

    def new_id(self) -> int:
        """Ids of handles and pipelines (bind groups and read-ahead copies are keyed by them)."""
        return next(self._ids)

    def hit(self, stage: FailureStage) -> bool:
        """The fault injector's verdict for ``stage`` (False without an injector)."""
        faults = self.faults
        return faults is not None and faults.hit(stage)

    def acquire(self, timeout: float) -> None:
        """Take the device lock within ``timeout`` (the wait counts against the caller's deadline).
        A free lock is taken without a timed wait: CPython's timed acquire costs about 0.3 us more
        even when the lock is free, and every execute, enqueue and read comes through here."""
        lock = self.lock
        if not lock.acquire(False) and not lock.acquire(timeout=max(0.0, timeout)):
            raise self.lock_timeout()

    @staticmethod
    def lock_timeout() -> DeviceFailure:
        return DeviceFailure(FailureStage.TIMEOUT, "the device lock was not free before the deadline", False, True)

    def check_usable(self, submitted: bool = False) -> None:
        if self.closed:
            raise DeviceFailure(FailureStage.CLOSED, "the device is closed", submitted)
        if self.flags.lost:
            raise DeviceFailure(FailureStage.LOST, self.flags.lost_reason or "the device is lost", submitted)

    def take_error(self) -> str | None:
        """The first error wgpu reported since the last take (outside error scopes), cleared."""
        errors = self.flags.errors
        if not errors:
            return None
        msg = errors[0]
        del errors[:]
        return msg

    def check_after_completion(self) -> None:
        """After the device reported the work done: a loss or an error wgpu reported since means
        the work's results cannot be trusted (the injected stages first, for the fault tests)."""
        if self.hit(FailureStage.LOST):
            raise self.lose("injected: the device reports loss")
        if self.flags.lost:
            raise DeviceFailure(FailureStage.LOST, self.flags.lost_reason or "the device was lost", True)
        if self.hit(FailureStage.AFTER_COMPLETION):
            raise DeviceFailure(FailureStage.AFTER_COMPLETION, "injected validation error reported after completion",
                                True)
        err = self.take_error()
        if err is not None:
            raise DeviceFailure(FailureStage.AFTER_COMPLETION, err, True)

    def lose(self, message: str) -> DeviceFailure:
        """Mark the device lost (an injected loss) and return the failure to raise."""
        self.flags.lost = True
        self.flags.lost_reason = "injected device loss"
        return DeviceFailure(FailureStage.LOST, message, True)

    def wait(self, deadline: float, cells: Sequence[MapCell], what: str = "work") -> None:
        """Poll until every cell (work-done fence or buffer map) resolved, or the deadline passes.

        Spins for tuning.spin_seconds, then sleeps with growing back-off.  A cell that resolves
        with an error status is left for the caller to report.
        """
        lock = self.lock
        poll = self.backend.poll
        flags = self.flags
        spin_until = time.perf_counter() + self.tuning.spin_seconds
        nap = 0.00005
        while True:
            for c in cells:
                if not c.status:
                    break
            else:
                return
            with lock:
                if self.closed:
                    raise DeviceFailure(FailureStage.CLOSED, f"the device was closed while waiting for {what}", True)
                poll()
            if flags.lost:
                raise DeviceFailure(FailureStage.LOST, flags.lost_reason or "the device was lost", True)
            now = time.perf_counter()
            if now > deadline:
                if any(not c.status for c in cells):
                    self.left_unfinished(cells)
                    raise DeviceFailure(FailureStage.TIMEOUT, f"{what} not complete before the deadline", True, True)
                return
            if now > spin_until:
                time.sleep(min(nap, max(0.0, deadline - now)))
                nap = min(nap * 2, _MAX_NAP)

    def left_unfinished(self, cells: Sequence[MapCell]) -> None:
        """A wait gave up on ``cells``: remember the ones not resolved yet."""
        with self.lock:
            self.unfinished += [c for c in cells if not c.status]

    def forget_map(self, cell: MapCell) -> None:
        """A map no longer wanted (its buffer is being freed, lock held): the backend drops its
        callback, and no wait for unfinished work counts on it any more (that work's own fence,
        kept in ``unfinished``, still does)."""
        self.backend.forget(cell)
        if cell in self.unfinished:
            self.unfinished.remove(cell)

    def pending(self) -> bool:
        """Whether work a wait gave up on may still be running (lock held; polls once)."""
        if self.unfinished:
            self.backend.poll()
            self.unfinished = [c for c in self.unfinished if not c.status]
        return bool(self.unfinished)

    def settled(self, deadline: float) -> bool:
        """Poll, submitting nothing, until the work waits gave up on is done: True then, False
        when the deadline passes first or the device is closed or lost."""
        nap = 0.0002
        while True:
            with self.lock:
                if self.closed or self.flags.lost:
                    return False
                if not self.pending():
                    return True
            now = time.perf_counter()
            if now >= deadline:
                return False
            time.sleep(min(nap, deadline - now))
            nap = min(nap * 2, _MAX_NAP)

    def block(self) -> None:
        """The "block" fault stage: stay here until the test releases it (or the device closes)."""
        faults = self.faults
        if faults is None or not faults.hit(FailureStage.BLOCK):
            return
        faults.blocked.set()
        while not faults.release.wait(0.01):
            if self.closed:
                break
        if self.closed:
            raise DeviceFailure(FailureStage.CLOSED, "the device was closed while the dispatch was blocked", True)
