"""Pipelined dispatches not yet confirmed by the device, and the one way to settle them.

With Config(pipelined=True) a dispatch of a kernel that cannot raise the error word commits its
outputs when it is recorded (the device runs work in the order it was recorded, so every later
dispatch, upload and readback sees them) and returns 0 before the device ran it. What it owes is
kept here until the next point that needs the device's answer settles it: a readback (copy-back,
scalar access, partial set, fallback), freeing a pending output, a waited dispatch, a snapshot,
close, or a bound of PipelineTuning. Settling waits for the device; a failure marks the outputs
of every unconfirmed dispatch CONTENTS_LOST (never partial), then quarantines the runtime.
Runs under the host lock; knows buffers and the device, not Wasm.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..abi import accessor as acc
from ..abi.table import Status
from ..diagnostics import BufferOperation
from ..gpu import DeviceFailure
from .records import Buffer
from .tuning import PipelineTuning
from .table import InstanceBuffers

if TYPE_CHECKING:  # pragma: no cover  (type-only: the residency owns its pending work and hands itself in)
    from .residency import Residency



@dataclass(eq=False, slots=True)
class PendingDispatch:
    """One dispatch that returned 0 before the device confirmed it."""

    ticket: int  # the device's ticket for it (GpuDevice.enqueue)
    op: BufferOperation  # its record, updated when it is submitted and confirmed
    inst: InstanceBuffers
    outputs: tuple[Buffer, ...]  # the buffers it committed


class PendingWork:
    """The unconfirmed pipelined dispatches of one residency, oldest first."""

    def __init__(self, residency: Residency, tuning: PipelineTuning | None = None) -> None:
        self.res = residency
        self.tuning = tuning or PipelineTuning()
        self.dispatches: deque[PendingDispatch] = deque()
        self.nbytes = 0
        self.settle_by = 0.0  # when the oldest unconfirmed dispatch passes tuning.max_seconds
        self.recorded = 0  # dispatches recorded since the last submission
        self._writers: dict[int, int] = {}  # id(Buffer) -> unconfirmed dispatches writing it
        self.lost_sequences: list[int] = []

    def __bool__(self) -> bool:
        return bool(self.dispatches)

    def writes(self, buf: Buffer) -> bool:
        """An unconfirmed dispatch wrote buf."""
        return id(buf) in self._writers

    def due(self, nbytes: int) -> bool:
        """Recording nbytes more would pass a bound: settle first."""
        if not self.dispatches:
            return False
        t = self.tuning
        return (len(self.dispatches) >= t.max_dispatches or self.nbytes + nbytes > t.max_bytes
                or time.perf_counter() > self.settle_by)

    def add(self, ticket: int, op: BufferOperation, inst: InstanceBuffers, outputs: tuple[Buffer, ...],
            nbytes: int) -> None:
        if not self.dispatches:
            self.settle_by = time.perf_counter() + self.tuning.max_seconds
        self.dispatches.append(PendingDispatch(ticket, op, inst, outputs))
        self.nbytes += nbytes
        writers = self._writers
        for buf in outputs:
            writers[id(buf)] = writers.get(id(buf), 0) + 1
        self.recorded += 1
        if self.recorded >= self.tuning.submit_every:
            self.recorded = 0
            self.res.live.submit_pending()

    # -- settling ----------------------------------------------------------------------------
    def settle(self, deadline: float) -> Status:
        """Wait for every unconfirmed dispatch. OK when they are confirmed, or when they failed
        (their outputs are CONTENTS_LOST, the runtime quarantined: the caller goes on with the
        buffers' new states); CANCELLED when the wait passed the deadline."""
        if not self.dispatches:
            return Status.OK
        res = self.res
        device = res.device
        if device is None or res.quarantined or device.closed:
            self.lose(res.quarantine_reason or "the device closed with pipelined dispatches unconfirmed")
            return Status.OK
        try:
            confirmed = device.flush(max(0.0, deadline - time.perf_counter()))
        except DeviceFailure as exc:
            self.lose(f"a pipelined dispatch failed at {exc.stage}: {exc.message}", device.submitted_ticket)
            return Status.CANCELLED if exc.timed_out or time.perf_counter() >= deadline else Status.OK
        self._confirm(confirmed)
        return Status.OK

    def _confirm(self, confirmed: int) -> None:
        hardware = self.res.device is not None and not self.res.live.info.is_software
        dispatches = self.dispatches
        while dispatches and dispatches[0].ticket <= confirmed:
            done = dispatches.popleft()
            done.op.hardware_submitted = hardware
            done.op.confirmed = True
            self._forget(done)
        if not dispatches:
            self.nbytes = 0
            self.recorded = 0

    def _forget(self, done: PendingDispatch) -> None:
        writers = self._writers
        for buf in done.outputs:
            left = writers[id(buf)] - 1
            if left:
                writers[id(buf)] = left
            else:
                del writers[id(buf)]

    def lose(self, reason: str, submitted_ticket: int = 0) -> None:
        """The device will never confirm the pending dispatches: each output still holding what
        one of them wrote becomes CONTENTS_LOST (a live buffer that is not CPU-current; a later
        full set made the others CPU-current), then the runtime is quarantined (marked first, so
        that a quarantine reading committed contents back never reads theirs)."""
        res = self.res
        hardware = res.device is not None and not res.device.info.is_software
        for pending in self.dispatches:
            pending.op.transfer_counts_complete = False
            pending.op.hardware_submitted = hardware and pending.ticket <= submitted_ticket
            self.lost_sequences.append(pending.op.sequence)
            inst = pending.inst
            for buf in pending.outputs:
                if not inst.closed and inst.buffers.get(buf.handle) is buf:
                    _mark_lost(buf)
        self.dispatches.clear()
        self._writers.clear()
        self.nbytes = 0
        self.recorded = 0
        res.counts_incomplete()
        if not res.quarantined:  # (inside a quarantine already under way, the marks are all it needs)
            res.quarantine(reason)


def _mark_lost(buf: Buffer) -> None:
    record = buf.record
    flags = record.flags
    if not flags & acc.CPU_CURRENT:
        record.flags = (flags | acc.LOST) & ~(acc.GPU_CURRENT | acc.DIRTY)
