"""GpuDevice: one open wgpu device with the small API the buffer layer builds on.

The host (the buffer layer) owns buffer states, versions and byte budgets; the device only moves
bytes and runs work, fast, and says exactly when something failed.  It is assembled from parts,
each one concept: the shared core (lock, waits, faults: core.py), the backend (_native.py or
_public.py behind backend.py), the buffer table (resources.py), the helper-buffer pool
(pool.py), pipelines and bind groups (pipelines.py), uploads and stages (uploads.py), readbacks
and read-ahead copies (readback.py) and the dispatch transaction (execute.py).  Every native
object is registered in the backend's NativeSet when made and freed there once (natives.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import numpy as np

from ..diagnostics import LoopLimits
from .adapters import AdapterChoice, AdapterInfo, BackendName, select_adapters
from .api import load_api
from .backend import Backend, BackendFlags, DeviceApi
from .batch import PendingBatches
from .core import DeviceCore
from .errors import GpuUnavailable, PipelineError
from .execute import Executor
from .faults import FaultInjector
from .handles import (BufferHandle, BufferKind, ComputePipeline, DeviceStats, ExecutePlan, ExecuteResult, PieceSink,
                      UploadStage)
from .pipelines import Pipelines
from .pool import BufferPool
from .probe import probed_limits
from .readback import Readback
from .resources import BufferTable
from .tuning import DeviceTuning
from .uploads import Uploads
from .warmup import WarmUp

__all__ = ["GpuDevice", "BufferHandle", "ComputePipeline", "ExecutePlan", "ExecuteResult", "DeviceStats"]

_log = logging.getLogger("wagogpu.gpu")


class GpuDevice:
    """An open wgpu device (see the module docstring); open one with GpuDevice.open()."""

    def __init__(self, backend: Backend, info: AdapterInfo, faults: FaultInjector | None, tuning: DeviceTuning,
                 open_seconds: float) -> None:
        self.info = info
        self.api: DeviceApi = backend.api
        self.tuning = tuning
        self.open_seconds = open_seconds
        self.limits = dict(backend.limits)
        self._loop_limits: LoopLimits | None = None
        core = self._core = DeviceCore(backend, info, faults, tuning)
        self._pool = BufferPool(core)
        self._buffers = BufferTable(core, self._pool)
        self._pipelines = Pipelines(core)
        self._readback = Readback(core, self._pool)
        self._uploads = Uploads(core, self._pool, self._readback.drop)
        batches = PendingBatches(core, self._pool, self._uploads, self._readback)
        core.attach_pending(batches.submit_pending)
        self._executor = Executor(core, self._pipelines, self._uploads, self._readback, self._pool, batches)
        self._warmup = WarmUp(core)

    @classmethod
    def open(
        cls,
        power_preference: str = "high-performance",
        allow_software_adapter: bool = False,
        adapter: int | str | None = None,
        backend: BackendName | str | None = None,
        faults: FaultInjector | None = None,
        tuning: DeviceTuning | None = None,
        api: DeviceApi | str | None = None,
    ) -> GpuDevice:
        """Open the best allowed adapter (or the one ``adapter`` names: an index as list_adapters()
        numbers them, or a case-insensitive piece of its name; ``backend`` restricts either to
        one API) with its real limits, and timestamps when offered.  ``api`` forces the raw or
        the public wgpu path (default: raw unless WAGOGPU_PUBLIC_WGPU=1 or wgpu is not the
        tested version).

        Raises AdapterNotFound when the adapter or backend matches nothing (the message lists
        what exists), GpuUnavailable when no adapter is found, only software adapters are and
        they are not allowed, or every device request fails; ValueError for malformed arguments.
        """
        t0 = time.perf_counter()
        if tuning is None:
            tuning = DeviceTuning()
        elif not isinstance(tuning, DeviceTuning):
            raise TypeError(f"tuning must be a DeviceTuning, not {type(tuning).__name__}")
        choice = AdapterChoice(adapter, backend, power_preference, allow_software_adapter)
        _kind, module = load_api(api)
        try:
            candidates = select_adapters(module.enumerate_adapters, choice)
        except GpuUnavailable:
            raise
        except Exception as exc:  # no loader, a driver failing in enumeration ...
            raise GpuUnavailable(f"wgpu could not enumerate adapters: {exc}") from exc
        failures = []
        for handle, info in candidates:
            try:
                opened = module.open_backend(handle, info)
            except GpuUnavailable as exc:
                failures.append(f"{info.summary()}: {exc.reason}")
                continue
            return cls(opened, info, faults, tuning, time.perf_counter() - t0)
        raise GpuUnavailable("device request failed on every adapter: " + "; ".join(failures))

    # -------------------------------------------------------------- buffers

    def create_storage(self, nbytes: int) -> BufferHandle:
        """A STORAGE | COPY_SRC | COPY_DST buffer (size rounded up to 4 bytes)."""
        with self._core.lock:
            return self._buffers.create(BufferKind.STORAGE, nbytes)

    def create_uniform(self, nbytes: int = 16) -> BufferHandle:
        """A UNIFORM | COPY_DST buffer for the 16-byte parameter block."""
        with self._core.lock:
            return self._buffers.create(BufferKind.UNIFORM, nbytes)

    def create_staging(self, nbytes: int, pieces: int = 1, piece_min: int = 1 << 20) -> BufferHandle:
        """A MAP_READ | COPY_DST readback buffer; the host keeps and reuses it. With ``pieces`` > 1
        it is up to that many buffers of at least ``piece_min`` bytes (BufferHandle.pieces): a read
        through it is a pipeline, each piece read out while the next crosses PCIe."""
        with self._core.lock:
            return self._buffers.create(BufferKind.STAGING, nbytes, pieces, piece_min)

    def release(self, handle: BufferHandle | ComputePipeline) -> None:
        """Free a buffer (or a pipeline) now; idempotent, and a no-op after close()."""
        if isinstance(handle, ComputePipeline):
            self.release_pipeline(handle)
            return
        with self._core.lock:
            if handle._ptr is not None and not self._core.closed:
                if self._executor.batches.references(handle.id):
                    self._core.submit_pending()  # destroying a buffer an unsubmitted batch uses fails it
                self._readback.drop(handle.id)
                self._pipelines.forget_buffer(handle.id)
            self._buffers.release(handle)

    # -------------------------------------------------------------- pipelines

    def pipeline(self, wgsl: str, bindings: Sequence[bool], entry_point: str = "main",
                 warm: bool = False) -> ComputePipeline:
        """The compute pipeline for ``wgsl``, cached by its text and binding kinds.

        ``bindings[i]`` is True when storage binding i+1 is read-only; binding 0 is the 16-byte
        uniform.  Invalid WGSL raises PipelineError with wgpu's message (not logged).  ``warm``:
        a newly built pipeline is run once (count 0) before this returns, so that the driver's
        first use of it is paid here rather than by the first dispatch (warmup.py).
        """
        with self._core.lock:
            misses = self._pipelines.misses
            pipeline = self._pipelines.get(wgsl, bindings, entry_point)
            if warm and self._pipelines.misses != misses:
                try:
                    self._warmup.run(pipeline, self.tuning.warmup_seconds)
                except PipelineError:
                    self._pipelines.release(pipeline)
                    raise
            return pipeline

    def release_pipeline(self, pipeline: ComputePipeline) -> None:
        """Free a pipeline and its cached bind groups; idempotent."""
        with self._core.lock:
            if self._executor.batches.references(pipeline.id):
                self._core.submit_pending()
            self._pipelines.release(pipeline)

    # -------------------------------------------------------------- work and transfers

    def execute(self, plan: ExecutePlan, timeout: float) -> ExecuteResult:
        """Run one dispatch transaction and wait for it; raises DeviceFailure on any failure.
        Upload arrays are copied before execute returns; the caller may reuse them at once."""
        return self._executor.execute(plan, timeout)

    def enqueue(self, plan: ExecutePlan, timeout: float) -> int:
        """Record a dispatch transaction into the open pending batch, unsubmitted and unwaited
        (batch.py); returns its ticket.  Raises DeviceFailure, after which every pending ticket is
        lost.  Upload arrays are copied before it returns."""
        return self._executor.enqueue(plan, timeout)

    def submit_pending(self) -> None:
        """Submit the open pending batch without waiting (the GPU starts on it)."""
        self._executor.submit_pending()

    def flush(self, timeout: float) -> int:
        """Submit the open pending batch and wait for every submitted one: the highest confirmed
        ticket.  DeviceFailure: no ticket above ``confirmed_ticket`` will ever be confirmed."""
        return self._executor.flush(timeout)

    @property
    def confirmed_ticket(self) -> int:
        return self._executor.batches.confirmed

    @property
    def submitted_ticket(self) -> int:
        """The highest ticket whose batch was submitted (not proof that it ran)."""
        return self._executor.batches.submitted_ticket

    @property
    def pending_tickets(self) -> int:
        """Tickets enqueued and not yet confirmed."""
        batches = self._executor.batches
        return batches.last_ticket - batches.confirmed

    def read(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
             out: np.ndarray | None = None) -> np.ndarray:
        """Copy ``nbytes`` of ``src`` through the caller's ``staging`` buffer into a uint32 array:
        a fresh one, or ``out`` (a writable C-contiguous array of exactly ``nbytes`` bytes) filled
        in place.  On an unmap failure after the copy the DeviceFailure carries the data."""
        return self._readback.read(src, staging, nbytes, timeout, out)

    def read_mapped(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
                    sink: PieceSink | None = None) -> int:
        """Read like read(), but leave the words in ``staging``, mapped: returns their host address
        (also ``staging.mapped``; ``staging.segments`` per piece of a pieced staging), valid until
        unmap(staging), release(staging) or the next read through it. ``sink`` hears of each
        piece as soon as it is mapped (PieceSink)."""
        return self._readback.read_mapped(src, staging, nbytes, timeout, sink)

    def unmap(self, staging: BufferHandle) -> None:
        """End the mapping read_mapped() left on ``staging`` (no-op when there is none)."""
        self._readback.unmap(staging)

    def write(self, dst: BufferHandle, byte_offset: int, array: np.ndarray, timeout: float = 5.0) -> None:
        """Upload ``array`` into ``dst`` at ``byte_offset`` outside execute (the legacy path);
        ordered before any later submission, not waited for."""
        self._uploads.write(dst, byte_offset, array, timeout)

    def stage(self, nbytes: int, timeout: float = 5.0) -> UploadStage:
        """A mapped upload buffer of at least ``nbytes`` for the caller to fill (see UploadStage);
        DeviceAllocationError when none can be had."""
        return self._uploads.stage(nbytes, timeout)

    def unstage(self, stage: UploadStage) -> None:
        """Hand back a stage that will not be uploaded (it stays mapped for the next stage())."""
        with self._core.lock:
            self._uploads.unstage(stage)

    # -------------------------------------------------------------- state

    def settle(self, timeout: float) -> bool:
        """Wait, submitting nothing, until the work that timed-out waits left on the device is done:
        True then (the device can be read again without blocking), False when ``timeout`` passes
        first or the device is closed or lost.  On some drivers (lavapipe) a submission blocks in
        the driver until the work before it is done, so call this before reading after a timeout."""
        return self._core.settled(time.perf_counter() + max(0.0, timeout))

    def is_lost(self) -> bool:
        """True once the device reported loss (or a "lost" fault was injected)."""
        return self._core.flags.lost

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def has_timestamps(self) -> bool:
        return self._core.backend.has_timestamps

    @property
    def loop_limits(self) -> LoopLimits:
        """What this adapter does to long shader loops (gpu/probe.py): measured on first use, once
        per adapter in the process. Its ``budget`` is what a one-loop kernel may use here."""
        limits = self._loop_limits
        if limits is None:
            limits = self._loop_limits = probed_limits(self)
        return limits

    @property
    def has_f64(self) -> bool:
        """The device runs f64 shaders (it was opened with adapters.F64_FEATURES)."""
        return self._core.backend.has_f64

    @property
    def readahead_hits(self) -> int:
        """Reads served by a read-ahead copy."""
        return self._readback.hits

    @property
    def _faults(self) -> FaultInjector | None:
        return self._core.faults

    @_faults.setter
    def _faults(self, faults: FaultInjector | None) -> None:
        """Tests swap the injector of an open device (the host opened it)."""
        self._core.faults = faults

    @property
    def _flags(self) -> BackendFlags:
        return self._core.flags

    @property
    def loss_flags(self) -> BackendFlags:
        """The flags the backend's callbacks write, kept for the device's life: ``lost`` turns True
        when the device reports loss (or a loss is injected), as is_lost() answers; a check run on
        every import reads it without a call."""
        return self._core.flags

    @property
    def stats(self) -> DeviceStats:
        """A snapshot of counters; never waits for the device lock."""
        p = self._pipelines
        return DeviceStats(
            live_buffers=self._buffers.live, live_bytes=self._buffers.live_bytes,
            allocations_total=self._buffers.allocations, pipeline_hits=p.hits, pipeline_misses=p.misses,
            pipelines_live=p.live, bind_groups_live=p.groups_live, bind_group_hits=p.group_hits,
            bind_group_misses=p.group_misses, internal_staging_bytes=self._pool.owned_bytes,
            submissions=self._core.backend.submissions, pool_allocations=self._pool.allocations)

    def trim(self) -> None:
        """Free the pool's idle helper buffers (upload buffers, idle stages, released stagings);
        call under memory pressure."""
        with self._core.lock:
            if not self._core.closed:
                self._pool.trim()

    def close(self) -> None:
        """Release everything this device created; idempotent.

        Never waits on a thread blocked in execute: that thread notices the closed flag at its
        next poll and raises DeviceFailure("closed").  If a thread is stuck inside a native call
        for tuning.close_lock_seconds, the native objects are left to process exit instead.
        Never waits for work still running after a timeout either: releasing the device waits in
        the driver until its queue is idle (on lavapipe, as long as a runaway kernel runs), so
        then the objects are freed now and the device itself is released on a daemon thread.
        """
        core = self._core
        if core.closed:
            return
        core.closed = True
        core.flags.closing = True
        if not core.lock.acquire(timeout=self.tuning.close_lock_seconds):
            _log.warning("GpuDevice.close: a native call did not return within %.1f s; "
                         "leaving its objects to process exit", self.tuning.close_lock_seconds)
            core.natives.abandon()
            return
        try:
            self._executor.batches.abandon()
            self._pipelines.close()
            self._buffers.close()
            self._uploads.close()
            self._readback.copies.clear()
            self._readback.retired.clear()
            self._pool.close()
            if core.pending():
                core.natives.release_all()
                threading.Thread(target=core.backend.close, name="wagogpu-device-release", daemon=True).start()
            else:
                core.backend.close()
        finally:
            core.lock.release()

    def __enter__(self) -> GpuDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._core.closed else ("lost" if self._core.flags.lost else "open")
        return f"<GpuDevice {self.info.summary()} {state} ({self.api})>"

