"""Getting bytes onto the device: queue writes, the pooled upload buffer, and upload stages.

A batch of at most ``tuning.queue_write_max`` bytes goes through the queue's own write (no map
round trip).  A larger one is copied, on several threads (the copy releases the GIL), into a
mapped upload buffer from the pool and recorded as one copy command per upload; on the H200 that
buffer lives in VRAM behind the BAR, so the host copy *is* the PCIe transfer.  An upload stage
is such a buffer lent to the caller, who fills it ahead of the dispatch (overlapping the PCIe
write with its own copies).  After the submission every pooled buffer it used is asked back
mapped, which resolves while the submission runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..memcopy import copy_bytes
from .backend import BackendError
from .core import DeviceCore
from .errors import DeviceAllocationError, DeviceFailure, FailureStage
from .handles import BufferHandle, ExecutePlan, UploadStage
from .pool import BufferPool, PooledBuffer

__all__ = ["Uploads"]

#: Each upload in a pooled buffer starts at a multiple of this (copy offsets need 4; 256 keeps
#: the parallel copies' pieces aligned).
_ALIGN = 256


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) & ~(_ALIGN - 1)


class Uploads:
    """Uploads of one device; ``record`` is called with the device lock held."""

    def __init__(self, core: DeviceCore, pool: BufferPool, invalidate: Callable[[int], None]) -> None:
        self._core = core
        self._pool = pool
        self._invalidate = invalidate  # drops a buffer's read-ahead copy before a write
        self._lent: set[UploadStage] = set()  # stages the caller owns

    # -------------------------------------------------------------- recording

    def record(self, enc: Any, uploads: Sequence[tuple[BufferHandle, int, Any]], deadline: float,
               used: list[PooledBuffer]) -> int:
        """Record ``uploads`` (arrays or UploadStages); returns their bytes.

        A stage is unmapped, recorded as a copy into ``enc`` and its buffer appended to ``used``;
        so is the pooled buffer a large batch of arrays goes through.  The caller re-maps the
        ``used`` buffers once the submission is in, or frees them if it never is.  ``enc`` None
        (a write outside a dispatch) sends every array through the queue.
        """
        items: list[tuple[BufferHandle, int, np.ndarray]] = []
        stages: list[tuple[BufferHandle, int, UploadStage]] = []
        array_bytes = 0
        for handle, offset, data in uploads:  # every check before anything is consumed
            if isinstance(data, UploadStage):
                self._check_stage(handle, offset, data, enc)
                stages.append((handle, offset, data))
            else:
                arr = self.checked_array(handle, offset, data)
                if arr.nbytes:
                    items.append((handle, offset, arr))
                    array_bytes += arr.nbytes
        total = array_bytes
        for handle, offset, stage in stages:
            self._consume(stage)
            used.append(stage._entry)
            self._core.backend.copy(enc, stage._ptr, 0, handle._ptr, offset, stage.nbytes)
            total += stage.nbytes
        if items:
            if enc is None or array_bytes <= self._core.tuning.queue_write_max:
                write = self._core.backend.write_buffer
                for handle, offset, arr in items:
                    write(handle._ptr, offset, arr, arr.nbytes)
            else:
                self.through_pool(enc, items, deadline, used)
        return total

    @staticmethod
    def checked_array(handle: BufferHandle, offset: int, data: Any) -> np.ndarray:
        arr = data if isinstance(data, np.ndarray) else np.asarray(data, dtype=np.uint32)  # lists are words
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        n = arr.nbytes
        if n and handle._ptr is None:
            raise DeviceFailure(FailureStage.SUBMIT, f"upload into a released buffer {handle!r}")
        if n and (offset < 0 or offset % 4 or n % 4 or offset + n > handle.nbytes):
            raise DeviceFailure(FailureStage.SUBMIT, f"upload of {n} bytes at offset {offset} does not fit "
                                                     f"{handle!r} (offsets and sizes must be multiples of 4)")
        return arr

    def through_pool(self, enc: Any, items: list[tuple[BufferHandle, int, np.ndarray]], deadline: float,
                      used: list[PooledBuffer]) -> None:
        """Copy the arrays into one mapped pooled buffer and record a copy command per array."""
        backend = self._core.backend
        need = sum(_aligned(arr.nbytes) for _, _, arr in items)
        try:
            entry = self._pool.mapped_upload(need, deadline, "the upload buffer's map")
        except BackendError as exc:
            raise DeviceFailure(FailureStage.SUBMIT, f"upload buffer of {need} bytes: {exc}") from None
        used.append(entry)
        base, window = backend.write_window(entry.obj, entry.size)
        if base == 0:
            raise DeviceFailure(FailureStage.SUBMIT, "the upload buffer has no mapped range")
        threads = self._core.tuning.upload_copy_threads
        pos = 0
        for _, _, arr in items:
            copy_bytes(base + pos, arr.__array_interface__["data"][0], arr.nbytes, threads)
            pos += _aligned(arr.nbytes)
        backend.flush_window(entry.obj, window, pos)
        backend.unmap(entry.obj)
        pos = 0
        for handle, offset, arr in items:
            backend.copy(enc, entry.obj, pos, handle._ptr, offset, arr.nbytes)
            pos += _aligned(arr.nbytes)

    def after_submit(self, used: list[PooledBuffer]) -> None:
        """The submission is in: ask its upload buffers back mapped, pooled (lock held)."""
        for entry in used:
            self._pool.give_remapped(entry)

    def unsubmitted(self, used: list[PooledBuffer]) -> None:
        """Recorded, never submitted: their contents were never copied; freed (lock held)."""
        for entry in used:
            self._pool.free(entry)

    # -------------------------------------------------------------- stages

    def stage(self, nbytes: int, timeout: float) -> UploadStage:
        """A mapped upload buffer of at least ``nbytes`` for the caller to fill; a pooled one
        (waiting for its re-map if its dispatch just finished) or a new one."""
        core = self._core
        nbytes = int(nbytes)
        if nbytes <= 0 or nbytes % 4:
            raise DeviceAllocationError(f"an upload stage of {nbytes} bytes: size must be a positive multiple of 4")
        deadline = time.perf_counter() + timeout
        if not core.lock.acquire(timeout=max(0.0, timeout)):
            raise DeviceAllocationError("the device lock was not free before the deadline", nbytes)
        try:
            if core.closed or core.flags.lost:
                raise DeviceAllocationError("cannot stage an upload: device closed or lost", nbytes)
            if core.hit(FailureStage.ALLOC):
                raise DeviceAllocationError(f"injected allocation failure (stage, {nbytes} bytes)", nbytes)
            try:
                entry = self._pool.mapped_upload(nbytes, deadline, "an upload stage's map")
            except DeviceFailure:
                raise DeviceAllocationError("an upload stage did not map in time", nbytes) from None
            except BackendError as exc:
                raise DeviceAllocationError(f"an upload stage of {nbytes} bytes: {exc}", nbytes) from None
            address, window = core.backend.write_window(entry.obj, entry.size)
            if address == 0:
                self._pool.free(entry)
                raise DeviceAllocationError("an upload stage has no mapped range", nbytes)
            stage = UploadStage(entry, nbytes, address, window)
            self._lent.add(stage)
            return stage
        finally:
            core.lock.release()

    def unstage(self, stage: UploadStage) -> None:
        """Take back a stage that will not be uploaded: still mapped, pooled for the next stage()
        (lock held)."""
        if stage in self._lent and stage.address:
            self._lent.discard(stage)
            stage.address = 0
            stage._window = None
            self._pool.give(stage._entry)

    def return_unrecorded(self, plan: ExecutePlan) -> None:
        """After execute, failed or not: the plan's stages it never recorded go back (lock held)."""
        for _handle, _offset, item in plan.uploads:
            if isinstance(item, UploadStage):
                self.unstage(item)

    def _check_stage(self, handle: BufferHandle, offset: int, stage: UploadStage, enc: Any) -> None:
        if enc is None or stage not in self._lent or not stage.address:
            raise DeviceFailure(FailureStage.SUBMIT, f"{stage!r} cannot be uploaded here (not owned by the caller)")
        if handle._ptr is None or offset < 0 or offset % 4 or offset + stage.nbytes > handle.nbytes:
            raise DeviceFailure(FailureStage.SUBMIT, f"{stage!r} does not fit {handle!r} at offset {offset}")

    def _consume(self, stage: UploadStage) -> None:
        """The stage's bytes become its buffer's contents; the caller owns it no more."""
        backend = self._core.backend
        self._lent.discard(stage)
        backend.flush_window(stage._ptr, stage._window, stage.nbytes)
        backend.unmap(stage._ptr)
        stage.address = 0
        stage._window = None

    # -------------------------------------------------------------- write outside a dispatch

    def write(self, dst: BufferHandle, byte_offset: int, array: np.ndarray, timeout: float) -> None:
        """Upload ``array`` into ``dst`` at ``byte_offset`` (ordered before any later submission;
        not waited for)."""
        core = self._core
        deadline = time.perf_counter() + timeout
        core.acquire(timeout)
        try:
            core.check_usable()
            if core.hit(FailureStage.SUBMIT):
                raise DeviceFailure(FailureStage.SUBMIT, "injected submission failure", False)
            arr = np.ascontiguousarray(array if isinstance(array, np.ndarray) else np.asarray(array, np.uint32))
            core.submit_pending()  # a queue write lands before the next submission: pending work first
            self._invalidate(dst.id)
            backend = core.backend
            del core.flags.errors[:]
            enc = backend.encoder() if arr.nbytes > core.tuning.queue_write_max else None
            used: list[PooledBuffer] = []
            submitted = False
            try:
                self.record(enc, [(dst, int(byte_offset), arr)], deadline, used)
                if enc is not None:
                    backend.submit(enc)
                    enc, submitted = None, True
                    self.after_submit(used)
            finally:
                if enc is not None:
                    backend.drop_encoder(enc)
                if not submitted:
                    self.unsubmitted(used)
            err = core.take_error()
            if err is not None:
                raise DeviceFailure(FailureStage.SUBMIT, err, submitted)
        finally:
            core.lock.release()

    def close(self) -> None:
        """The device is closing: no stage is the caller's to write any more."""
        for stage in self._lent:
            stage.address = 0
            stage._window = None
        self._lent.clear()
