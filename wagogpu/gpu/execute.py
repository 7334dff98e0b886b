"""One dispatch transaction: parameters, uploads, seed copies, the compute pass and read-ahead
copies in one submission, then one wait (docs/design/abi.md §4.6 step 6); or, with ``enqueue``, the same
recorded into the open pending batch without submitting or waiting (batch.py).

The hot path is a resident dispatch: no uploads, no parameters, a cached bind group; it makes
the backend's few native calls on pre-built structs and adds no Python work of its own beyond
the checks.  Profile mode (``plan.separate_stages``) makes the uploads, the seeds and the
compute pass three waited submissions so each can be timed.  Any failure raises DeviceFailure;
after one that follows submission, every pooled buffer the submission used and every read-ahead
copy is dropped (their state is unknown), and the host quarantines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .backend import CELL_OK, BackendError, MapCell
from .batch import PendingBatches
from .core import DeviceCore
from .errors import DeviceFailure, FailureStage
from .handles import ExecutePlan, ExecuteResult
from .pipelines import Pipelines
from .pool import BufferPool, PooledBuffer
from .readback import Readback
from .uploads import Uploads

__all__ = ["Executor"]


#: Profile mode's stages and whether a plan gives each work to submit.
_STAGE_WORK: dict[str, Callable[[ExecutePlan], bool]] = {
    "upload": lambda plan: bool(plan.uploads),
    "seed": lambda plan: any(n for _src, _dst, _off, n in plan.seeds),
    "compute": lambda plan: bool(plan.workgroups[0] and plan.workgroups[1]),
}


class Executor:
    """Runs ExecutePlans on one device."""

    def __init__(self, core: DeviceCore, pipelines: Pipelines, uploads: Uploads, readback: Readback,
                 pool: BufferPool, batches: PendingBatches) -> None:
        self._core = core
        self._pipelines = pipelines
        self._uploads = uploads
        self._readback = readback
        self._pool = pool
        self._max_groups = core.backend.limits["max-compute-workgroups-per-dimension"]
        self.batches = batches
        self._stage_recorders: tuple[tuple[str, Callable[..., int]], ...] = (
            ("upload", self._record_upload_stage), ("seed", self._record_seed_stage),
            ("compute", self._record_compute_stage))

    def execute(self, plan: ExecutePlan, timeout: float) -> ExecuteResult:
        """Run one dispatch transaction and wait for it (see the module docstring)."""
        t0 = time.perf_counter()
        deadline = t0 + timeout
        core = self._core
        core.acquire(timeout)
        if not (plan.uploads or plan.params is not None or plan.seeds or plan.readahead or plan.separate_stages
                or plan.timestamps or core.faults is not None):
            return self._execute_pass(plan, t0, deadline)
        used: list[PooledBuffer] = []  # pooled upload buffers the submission uses
        try:
            bind_group = self._checked(plan)
            if plan.separate_stages:
                return self._staged(plan, bind_group, t0, deadline)
            gx, gy = plan.workgroups
            ts = bool(plan.timestamps) and core.backend.has_timestamps and gx > 0 and gy > 0
            cells, t1, t2, up_bytes, seed_bytes = self._submit(plan, bind_group, ts, deadline, used)
        except DeviceFailure as exc:
            if exc.submitted:
                self._discard(used)
            raise
        finally:
            if plan.uploads:
                self._uploads.return_unrecorded(plan)
            core.lock.release()
        t3, device_s = self._completed(cells, deadline, used, ts)
        return ExecuteResult(t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t0, device_s, core.hardware, True,
                             up_bytes, seed_bytes)

    def _completed(self, cells: list[MapCell], deadline: float, used: list[PooledBuffer],
                   ts: bool) -> tuple[float, float | None]:
        """Wait for a submitted transaction (lock not held): (when it was seen done, the GPU
        timestamps' compute seconds when ``ts``). A failure from here on leaves the submission's
        buffers in an unknown state: they and every read-ahead copy are discarded."""
        core = self._core
        try:
            if core.faults is not None:
                self._faulty_wait(cells, deadline)
            else:
                core.wait(deadline, cells, "the dispatch")
            if cells[0].status != CELL_OK:
                raise DeviceFailure(FailureStage.WAIT, f"work-done fence failed: {cells[0].message}", True)
            done = time.perf_counter()
            if core.faults is not None or core.flags.lost or core.flags.errors:
                core.check_after_completion()
            return done, self._timestamps() if ts else None
        except DeviceFailure:
            with core.lock:
                self._discard(used)
            raise

    def _execute_pass(self, plan: ExecutePlan, t0: float, deadline: float) -> ExecuteResult:
        """execute() of a plan that is a compute pass alone (no uploads, parameters, seeds,
        read-ahead, stages or timestamps; no fault injector): a resident dispatch's. The same
        checks, native calls and failure handling, and the same wait (_completed), without the
        general path's bookkeeping for what it does not have (lock held on entry, released here)."""
        core = self._core
        backend = core.backend
        try:
            bind_group = self._checked(plan)
            core.submit_pending()  # pending dispatches run first
            if self._readback.copies:
                self._readback.invalidate(plan)
            errors = core.flags.errors
            del errors[:]
            t1 = time.perf_counter()
            gx, gy = plan.workgroups
            enc = backend.encoder()
            try:
                if gx and gy:
                    backend.dispatch(enc, plan.pipeline._ptr, bind_group, gx, gy, False)
            except BaseException:
                backend.drop_encoder(enc)
                raise
            backend.submit(enc)
            cells = [backend.fence()]
            if errors:
                raise DeviceFailure(FailureStage.SUBMIT, core.take_error() or "", True)
        except DeviceFailure as exc:
            if exc.submitted:
                self._discard([])
            raise
        finally:
            core.lock.release()
        t2, _ = self._completed(cells, deadline, [], False)
        return ExecuteResult(t1 - t0, 0.0, t2 - t1, time.perf_counter() - t0, None, core.hardware, True, 0, 0)

    def enqueue(self, plan: ExecutePlan, timeout: float) -> int:
        """Record one dispatch transaction into the open pending batch without submitting it
        (batch.py); returns its ticket.  A DeviceFailure abandons every pending batch."""
        core = self._core
        deadline = time.perf_counter() + timeout
        core.acquire(timeout)
        try:
            if plan.separate_stages or plan.timestamps:
                raise DeviceFailure(FailureStage.SUBMIT, "a pending dispatch has no separate stages or timestamps")
            bind_group = self._checked(plan)
            if self._readback.copies:
                self._readback.invalidate(plan)
            batches = self.batches
            if batches.open is not None and batches.open.ahead:
                batches.invalidate(plan)
            try:
                return batches.enqueue(plan, bind_group, deadline)
            except DeviceFailure:
                batches.abandon()
                self._readback.drop_all()
                raise
            finally:
                if plan.uploads:
                    self._uploads.return_unrecorded(plan)
        finally:
            core.lock.release()

    def submit_pending(self) -> None:
        """Submit the open pending batch without waiting; a failure is raised by the next flush."""
        with self._core.lock:
            self.batches.submit_pending()

    def flush(self, timeout: float) -> int:
        """Submit and wait for every pending batch; the highest confirmed ticket (DeviceFailure)."""
        return self.batches.flush(timeout)

    def _checked(self, plan: ExecutePlan) -> Any:
        """Every check of the plan before anything is recorded; returns its bind group."""
        core = self._core
        if core.closed or core.flags.lost:
            core.check_usable()
        gx, gy = plan.workgroups
        most = self._max_groups
        if not (0 <= gx <= most and 0 <= gy <= most):
            raise DeviceFailure(FailureStage.SUBMIT, f"workgroups {plan.workgroups} exceed "
                                                     f"max-compute-workgroups-per-dimension {most}")
        group = plan.group  # (a kept plan's group while it lives: Pipelines.group)
        if group is not None and group.obj is not None:
            self._pipelines.group_hits += 1
        else:
            plan.group = group = self._pipelines.group(plan.pipeline, plan.uniform, plan.storage)
        bind_group = group.obj
        if plan.params is not None and len(plan.params) != 16:
            raise DeviceFailure(FailureStage.SUBMIT, f"params must be 16 bytes, got {len(plan.params)}")
        faults = core.faults
        if faults is not None and faults.hit(FailureStage.SUBMIT):
            raise DeviceFailure(FailureStage.SUBMIT, "injected submission failure", False)
        if plan.seeds:
            for src, dst, off, n in plan.seeds:
                if src._ptr is None or dst._ptr is None or off % 4 or n % 4 or off + n > min(src.nbytes, dst.nbytes):
                    raise DeviceFailure(FailureStage.SUBMIT, f"seed {src!r} -> {dst!r} [{off}, +{n}) is invalid")
        return bind_group

    def _submit(self, plan: ExecutePlan, bind_group: Any, ts: bool, deadline: float,
                used: list[PooledBuffer]) -> tuple[list[MapCell], float, float, int, int]:
        """Record and submit the whole transaction (lock held): (cells to wait for, upload end,
        seed end, upload bytes, seed bytes)."""
        core = self._core
        backend = core.backend
        readback = self._readback
        core.submit_pending()  # pending dispatches run first; the queue writes below follow them
        if readback.copies:
            readback.invalidate(plan)
        del core.flags.errors[:]
        ahead: list[Any] = []
        submitted = False
        enc = backend.encoder()
        try:
            up_bytes = self._record_uploads(enc, plan, deadline, used) if plan.uploads or plan.params else 0
            t1 = time.perf_counter()
            seed_bytes = self._record_seed_stage(enc, plan, deadline, used) if plan.seeds else 0
            t2 = time.perf_counter()
            gx, gy = plan.workgroups
            if gx and gy:
                backend.dispatch(enc, plan.pipeline._ptr, bind_group, gx, gy, ts)
            if plan.readahead:
                ahead = readback.record_ahead(enc, plan.readahead)
            backend.submit(enc)
            enc, submitted = None, True
            cells = [backend.fence()]
            if used:
                self._uploads.after_submit(used)
            if ts:
                cells.append(backend.timestamp_cell())
            if ahead:
                cells += readback.ahead_submitted(ahead)
        finally:
            if enc is not None:  # a check raised mid-recording
                backend.drop_encoder(enc)
            if not submitted:
                self._uploads.unsubmitted(used)
                for _h, entry in ahead:
                    self._pool.give(entry)
        if core.flags.errors:
            raise DeviceFailure(FailureStage.SUBMIT, core.take_error() or "", True)
        return cells, t1, t2, up_bytes, seed_bytes

    def _record_uploads(self, enc: Any, plan: ExecutePlan, deadline: float, used: list[PooledBuffer]) -> int:
        """The plan's uploads and its parameter block (which rides along with the uploads when
        there are any, saving the queue write's own staging allocation)."""
        uploads = plan.uploads
        params = plan.params
        if params is not None:
            if uploads and self._core.tuning.params_via_staging:
                uniform = [(plan.uniform, 0, np.frombuffer(params, dtype=np.uint32))]
                return self._uploads.record(enc, [*uploads, *uniform], deadline, used) - len(params)
            self._core.backend.write_buffer(plan.uniform._ptr, 0, params, 16)
        return self._uploads.record(enc, uploads, deadline, used) if uploads else 0

    def _record_upload_stage(self, enc: Any, plan: ExecutePlan, deadline: float, used: list[PooledBuffer]) -> int:
        if plan.params is not None:
            self._core.backend.write_buffer(plan.uniform._ptr, 0, plan.params, 16)
        return self._uploads.record(enc, plan.uploads, deadline, used)

    def _record_seed_stage(self, enc: Any, plan: ExecutePlan, deadline: float, used: list[PooledBuffer]) -> int:
        copy = self._core.backend.copy
        seed_bytes = 0
        for src, dst, off, n in plan.seeds:
            if n:
                copy(enc, src._ptr, off, dst._ptr, off, n)
                seed_bytes += n
        return seed_bytes

    def _record_compute_stage(self, enc: Any, plan: ExecutePlan, deadline: float, used: list[PooledBuffer],
                              bind_group: Any = None, ts: bool = False) -> int:
        gx, gy = plan.workgroups
        if gx and gy:
            self._core.backend.dispatch(enc, plan.pipeline._ptr, bind_group, gx, gy, ts)
        return 0

    def _staged(self, plan: ExecutePlan, bind_group: Any, t0: float, deadline: float) -> ExecuteResult:
        """Profile mode: uploads, seeds and compute as separate waited submissions (lock held); a
        stage without work submits nothing and reports no time (a parameter block alone is a
        queue write that rides with the compute submission)."""
        core = self._core
        gx, gy = plan.workgroups
        ts = plan.timestamps is not False and core.backend.has_timestamps and gx > 0 and gy > 0
        took = dict.fromkeys(_STAGE_WORK, 0.0)
        moved = dict.fromkeys(_STAGE_WORK, 0)
        used: list[PooledBuffer] = []
        submitted = False
        core.submit_pending()
        try:
            for name, record in self._stage_recorders:
                s0 = time.perf_counter()
                if not _STAGE_WORK[name](plan):
                    if name == "upload" and plan.params is not None:  # rides with the compute submission
                        core.backend.write_buffer(plan.uniform._ptr, 0, plan.params, 16)
                        took[name] = time.perf_counter() - s0
                    continue  # no empty submission, no time for work not done
                extra = {"bind_group": bind_group, "ts": ts} if name == "compute" else {}
                cells, moved[name] = self._submit_stage(name, record, plan, deadline, used, extra)
                submitted = True
                if name == "compute" and core.faults is not None:
                    self._staged_faults(cells, deadline)
                core.wait(deadline, cells, f"the {name} submission")
                if cells[0].status != CELL_OK:
                    raise DeviceFailure(FailureStage.WAIT, f"work-done fence failed: {cells[0].message}", True)
                took[name] = time.perf_counter() - s0
            self._core.check_after_completion()
            device_s = self._timestamps() if ts else None
        except DeviceFailure as exc:
            if submitted or exc.submitted:
                self._discard(used)
            raise
        return ExecuteResult(upload_s=took["upload"], seed_s=took["seed"], compute_s=took["compute"],
                             total_s=time.perf_counter() - t0, device_compute_s=device_s,
                             hardware_submitted=core.hardware, submitted=True, upload_bytes=moved["upload"],
                             seed_bytes=moved["seed"])

    def _submit_stage(self, name: str, record: Callable[..., int], plan: ExecutePlan, deadline: float,
                      used: list[PooledBuffer], extra: dict[str, Any]) -> tuple[list[MapCell], int]:
        """Record one profile-mode stage and submit it with a fence (lock held)."""
        core = self._core
        backend = core.backend
        del core.flags.errors[:]
        mine: list[PooledBuffer] = []
        submitted = False
        enc = backend.encoder()
        try:
            moved = record(enc, plan, deadline, mine, **extra)
            backend.submit(enc)
            enc, submitted = None, True
            cells = [backend.fence()]
            used += mine
            self._uploads.after_submit(mine)
            if extra.get("ts"):
                cells.append(backend.timestamp_cell())
        finally:
            if enc is not None:
                backend.drop_encoder(enc)
            if not submitted:
                self._uploads.unsubmitted(mine)
            if plan.uploads:
                self._uploads.return_unrecorded(plan)
        err = core.take_error()
        if err is not None:
            raise DeviceFailure(FailureStage.SUBMIT, f"{name} submission: {err}", True)
        return cells, moved

    # -------------------------------------------------------------- waiting and after it

    def _faulty_wait(self, cells: list[MapCell], deadline: float) -> None:
        """The wait with the fault injector's stages: block, timeout, wait (lock not held)."""
        core = self._core
        core.block()
        if core.hit(FailureStage.TIMEOUT):
            core.left_unfinished(cells)
            raise DeviceFailure(FailureStage.TIMEOUT, "injected: the wait exceeded its deadline", True, True)
        wait_fails = core.hit(FailureStage.WAIT)
        core.wait(deadline, cells, "the dispatch")
        if wait_fails and cells[0].status == CELL_OK:
            raise DeviceFailure(FailureStage.WAIT, "injected failure while waiting for the dispatch", True)

    def _staged_faults(self, cells: list[MapCell], deadline: float) -> None:
        """Profile mode's compute stage under the fault injector (lock held; released to block)."""
        core = self._core
        core.lock.release()
        try:
            core.block()
        finally:
            core.lock.acquire()
        if core.hit(FailureStage.TIMEOUT):
            core.left_unfinished(cells)
            raise DeviceFailure(FailureStage.TIMEOUT, "injected: the wait exceeded its deadline", True, True)
        if core.hit(FailureStage.WAIT):
            core.wait(deadline, cells, "the dispatch")
            raise DeviceFailure(FailureStage.WAIT, "injected failure while waiting for the dispatch", True)

    def _timestamps(self) -> float | None:
        core = self._core
        with core.lock:
            core.check_usable(True)
            try:
                return core.backend.timestamp_seconds()
            except BackendError as exc:
                raise DeviceFailure(FailureStage.AFTER_COMPLETION, str(exc), True) from None

    def _discard(self, used: list[PooledBuffer]) -> None:
        """After a failure that followed submission (lock held): what the submission touched has an
        unknown state and is not reused."""
        if self._core.closed:
            return
        self._pool.discard(used)
        self._readback.drop_all()
        self._core.backend.reset_timestamps()
