"""Pending work: dispatches recorded into one open command encoder, submitted together and
confirmed by one wait (the pipelined path; ExecutePlan without separate stages or timestamps).

``enqueue`` records a plan into the open batch and returns its ticket (a sequence number)
without submitting: its uploads and parameter block as copies out of the upload ring (ring.py:
a later dispatch's parameters never overwrite an earlier one's before it ran), its seed copies, its dispatch (consecutive
dispatches share one compute pass while no copy comes between them) and its read-ahead copies.
``submit_open`` submits the open batch without waiting; ``flush`` submits it and waits for every
submitted batch, then reports the highest confirmed ticket or raises DeviceFailure.

Ordering: every other submission of the device (a waited execute, a read, a large write) submits
the open batch first (``DeviceCore.submit_pending``), and so does releasing a buffer or pipeline
the open batch records, since destroying a buffer an unsubmitted encoder uses would fail that
submission.  A queue write lands before the next submission as a whole; that is why the open
batch never uses them for its own uploads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import CELL_OK, MapCell
from .core import DeviceCore
from .errors import DeviceFailure, FailureStage
from .handles import BufferHandle, ExecutePlan, UploadStage
from .pool import BufferPool, PooledBuffer
from .readback import Readback
from .ring import PARAMS_BYTES, UploadRing, ring_bytes
from .uploads import Uploads

__all__ = ["PendingBatches"]

@dataclass(eq=False)
class OpenBatch:
    """The batch being recorded: its encoder, the pass left open and what it holds."""

    enc: Any
    cp: Any = None  # the compute pass left open for the next dispatch
    pipeline: Any = None  # what the open pass has set
    bind_group: Any = None
    last_ticket: int = 0
    dispatches: int = 0
    ring_used: int = 0
    used: list[PooledBuffer] = field(default_factory=list)  # pooled upload buffers it copies from
    ahead: dict[int, tuple[BufferHandle, PooledBuffer]] = field(default_factory=dict)  # read-ahead copies
    void: list[PooledBuffer] = field(default_factory=list)  # read-ahead copies dropped before submission
    plans: list[ExecutePlan] = field(default_factory=list)  # what it records (references() reads them)


@dataclass(eq=False, slots=True)
class SubmittedBatch:
    cells: list[MapCell]  # its work-done fence, then the maps of its read-ahead copies
    last_ticket: int


class PendingBatches:
    """The open batch and the submitted, unconfirmed ones of one device (called under its lock,
    except flush, which takes it)."""

    def __init__(self, core: DeviceCore, pool: BufferPool, uploads: Uploads, readback: Readback) -> None:
        self._core = core
        self._pool = pool
        self._uploads = uploads
        self._readback = readback
        self.open: OpenBatch | None = None
        self.submitted: list[SubmittedBatch] = []
        self._tickets = 0
        self.confirmed = 0  # the highest ticket whose work the device confirmed
        self.submitted_ticket = 0  # the highest ticket whose batch reached the queue
        #: A failure of a batch submitted on the way to another operation, raised by the next flush.
        self.failure: DeviceFailure | None = None
        self._ring = UploadRing(core)

    @property
    def last_ticket(self) -> int:
        return self._tickets

    def references(self, obj_id: int) -> bool:
        """The open batch records the handle or pipeline with this id (asked before a release,
        which is rare: the plans are searched then rather than indexed on every enqueue)."""
        batch = self.open
        if batch is None:
            return False
        for plan in batch.plans:
            if obj_id in (plan.pipeline.id, plan.uniform.id) or any(h.id == obj_id for h in plan.storage) \
                    or any(u[0].id == obj_id for u in plan.uploads) \
                    or any(obj_id in (src.id, dst.id) for src, dst, _o, _n in plan.seeds):
                return True
        return obj_id in batch.ahead

    # -------------------------------------------------------------- recording (lock held)

    def enqueue(self, plan: ExecutePlan, bind_group: Any, deadline: float) -> int:
        """Record ``plan`` (checked by the executor) into the open batch; returns its ticket."""
        need = self._ring.need(plan) if plan.uploads or plan.params is not None else 0
        batch = self.open
        if batch is not None and need and batch.ring_used + need > self._ring.size:
            self.submit_open()
            batch = None
        if batch is None:
            batch = self.open = OpenBatch(self._core.backend.encoder())
        errors = self._core.flags.errors
        if errors:
            del errors[:]
        batch.plans.append(plan)
        if need or plan.uploads:
            self._record_uploads(batch, plan, deadline)
        if plan.seeds:
            self._end_pass(batch)
            copy = self._core.backend.copy
            for src, dst, off, n in plan.seeds:
                if n:
                    copy(batch.enc, src._ptr, off, dst._ptr, off, n)
        self._record_dispatch(batch, plan, bind_group)
        if plan.readahead:
            self._record_ahead(batch, plan.readahead)
        ticket = self._tickets = self._tickets + 1
        batch.last_ticket = ticket
        batch.dispatches += 1
        if errors:
            raise DeviceFailure(FailureStage.SUBMIT, f"recording a pending dispatch: {self._core.take_error()}")
        return ticket

    def _record_uploads(self, batch: OpenBatch, plan: ExecutePlan, deadline: float) -> None:
        self._end_pass(batch)
        ring = self._ring
        stages = [(h, o, a) for h, o, a in plan.uploads if isinstance(a, UploadStage)]
        arrays = [(h, o, Uploads.checked_array(h, o, a)) for h, o, a in plan.uploads if not isinstance(a, UploadStage)]
        arrays = [item for item in arrays if item[2].nbytes]
        if stages:
            self._uploads.record(batch.enc, stages, deadline, batch.used)
        if arrays and not ring.arrays_bytes(plan, ring_bytes(PARAMS_BYTES) if plan.params is not None else 0):
            self._uploads.through_pool(batch.enc, arrays, deadline, batch.used)
            arrays = []
        if plan.params is not None:
            arrays.append((plan.uniform, 0, np.frombuffer(plan.params, dtype=np.uint32)))
        if arrays:
            batch.ring_used = ring.record(batch.enc, arrays, batch.ring_used)

    def _record_dispatch(self, batch: OpenBatch, plan: ExecutePlan, bind_group: Any) -> None:
        gx, gy = plan.workgroups
        if not (gx and gy):
            return
        backend = self._core.backend
        if batch.cp is None:
            batch.cp = backend.begin_pass(batch.enc)
            batch.pipeline = batch.bind_group = None
        pipeline = plan.pipeline._ptr
        new_pipeline = pipeline if pipeline is not batch.pipeline else None
        new_group = bind_group if bind_group is not batch.bind_group or new_pipeline is not None else None
        backend.pass_dispatch(batch.cp, new_pipeline, new_group, gx, gy)
        batch.pipeline, batch.bind_group = pipeline, bind_group

    def _end_pass(self, batch: OpenBatch) -> None:
        if batch.cp is not None:
            self._core.backend.end_pass(batch.cp)
            batch.cp = None

    def _record_ahead(self, batch: OpenBatch, handles: Any) -> None:
        self._end_pass(batch)
        for h, entry in self._readback.record_ahead(batch.enc, handles):
            old = batch.ahead.pop(h.id, None)
            if old is not None:
                batch.void.append(old[1])
            batch.ahead[h.id] = (h, entry)

    def invalidate(self, plan: ExecutePlan) -> None:
        """The plan may write these buffers: their read-ahead copies in the open batch are stale."""
        batch = self.open
        if batch is None or not batch.ahead:
            return
        for h in (*plan.storage, *(up[0] for up in plan.uploads), *(seed[1] for seed in plan.seeds)):
            item = batch.ahead.pop(h.id, None)
            if item is not None:
                batch.void.append(item[1])

    # -------------------------------------------------------------- submission (lock held)

    def submit_open(self) -> None:
        """Submit the open batch without waiting (a no-op when there is none)."""
        batch = self.open
        if batch is None:
            return
        self.open = None
        core = self._core
        backend = core.backend
        self._end_pass(batch)
        submitted = False
        try:
            if core.hit(FailureStage.SUBMIT):
                raise DeviceFailure(FailureStage.SUBMIT, "injected failure submitting a pending batch", False)
            del core.flags.errors[:]
            backend.submit(batch.enc)
            submitted = True
            cells = [backend.fence()]
            self._uploads.after_submit(batch.used)
            if batch.ahead:
                cells += self._readback.ahead_submitted(list(batch.ahead.values()))
            self.submitted.append(SubmittedBatch(cells, batch.last_ticket))
            self.submitted_ticket = batch.last_ticket
            for entry in batch.void:
                self._pool.give(entry)
        finally:
            if not submitted:
                backend.drop_encoder(batch.enc)
                self._pool.discard([*batch.used, *batch.void, *(e for _h, e in batch.ahead.values())])
        err = core.take_error()
        if err is not None:
            raise DeviceFailure(FailureStage.SUBMIT, f"submitting a pending batch: {err}", True)

    def submit_pending(self) -> None:
        """Submit the open batch on the way to another submission or a release (lock held); a
        failure is kept for the next flush to raise, and the pending batches are abandoned."""
        if self.open is None:
            return
        try:
            self.submit_open()
        except DeviceFailure as exc:
            self.failure = self.failure or exc
            self._failed()

    def abandon(self) -> None:
        """After a failure or at close: the open batch is dropped unsubmitted, the submitted ones
        are forgotten (their completion is unknown; the caller treats their work as lost). Their
        read-ahead maps are forgotten; their work-done fences are too only at close: after a
        timed-out wait a fence sits in the core's unfinished work, and settle() waits for it, so
        it must still resolve when the work is done."""
        core = self._core
        batch, self.open = self.open, None
        if batch is not None:
            self._end_pass(batch)
            core.backend.drop_encoder(batch.enc)
            if not core.closed:
                self._pool.discard([*batch.used, *batch.void, *(e for _h, e in batch.ahead.values())])
        for sub in self.submitted:
            fence, *maps = sub.cells
            for cell in maps:
                core.forget_map(cell)
            if core.closed:
                core.backend.forget(fence)
        self.submitted.clear()

    # -------------------------------------------------------------- waiting

    def flush(self, timeout: float) -> int:
        """Submit the open batch, wait for every submitted one and check the device; returns the
        highest confirmed ticket.  On DeviceFailure nothing more is confirmed and every pending
        batch is abandoned."""
        core = self._core
        deadline = time.perf_counter() + timeout
        core.acquire(timeout)
        try:
            failure, self.failure = self.failure, None
            if failure is not None:
                raise failure
            if self.open is None and not self.submitted:
                return self.confirmed
            try:
                self.submit_open()
            except DeviceFailure as exc:
                exc.submitted = exc.submitted or bool(self.submitted)
                self._failed()
                raise
            count = len(self.submitted)
            cells = [cell for sub in self.submitted for cell in sub.cells]
            fences = [sub.cells[0] for sub in self.submitted]
            last = self.submitted[-1].last_ticket
        finally:
            core.lock.release()
        try:
            self._wait(cells, fences, deadline)
        except DeviceFailure:
            with core.lock:
                self._failed()
            raise
        with core.lock:
            del self.submitted[:count]
            self._readback.reclaim()
        self.confirmed = max(self.confirmed, last)
        return self.confirmed

    def _wait(self, cells: list[MapCell], fences: list[MapCell], deadline: float) -> None:
        """Wait for the fences and read-ahead maps (with the fault injector's stages), then the
        checks after completion.  A read-ahead map that failed is the read's to report."""
        core = self._core
        if core.faults is not None:
            core.block()
            if core.hit(FailureStage.TIMEOUT):
                raise DeviceFailure(FailureStage.TIMEOUT, "injected: the wait for pending work exceeded its deadline",
                                    True, True)
            wait_fails = core.hit(FailureStage.WAIT)
        else:
            wait_fails = False
        core.wait(deadline, cells, "pending dispatches")
        failed = next((c for c in fences if c.status != CELL_OK), None)
        if failed is not None:
            raise DeviceFailure(FailureStage.WAIT, f"work-done fence failed: {failed.message}", True)
        if wait_fails:
            raise DeviceFailure(FailureStage.WAIT, "injected failure while waiting for pending dispatches", True)
        core.check_after_completion()

    def _failed(self) -> None:
        """A pending batch failed (lock held): what the batches touched has an unknown state."""
        self.abandon()
        if not self._core.closed:
            self._readback.drop_all()
