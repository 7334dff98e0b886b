"""The device layer: buffers, pipelines, one-submission dispatches and readbacks.

The host (buffers.py) owns states, versions and byte budgets; this module only
moves bytes and runs work, fast, and says exactly when something failed:

* every native call happens under the device lock with a closed check, so
  close() from another thread never frees objects a call is using;
* errors are caught with wgpu error scopes (validation, out-of-memory) plus
  the device's uncaptured-error callback; wgpu-native reports them
  synchronously at the call that caused them;
* waiting is a poll loop with a deadline (wgpuDevicePoll without blocking),
  so a timeout bounds every wait for the GPU; a single native call that
  blocks inside the driver cannot be interrupted (documented in README.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _native as nat
from ..memcopy import copy_bytes
from ._native import ffi, lib
from .adapters import AdapterInfo, _enumerate, rank_adapters
from .errors import DeviceAllocationError, DeviceFailure, GpuUnavailable, PipelineError
from .faults import FaultInjector
from .handles import BufferHandle, ComputePipeline, DeviceStats, ExecutePlan, ExecuteResult, UploadStage

__all__ = ["GpuDevice", "BufferHandle", "ComputePipeline", "ExecutePlan", "ExecuteResult", "DeviceStats"]

_log = logging.getLogger("wagogpu.gpu")
_perf = time.perf_counter
_NULL = ffi.NULL

#: Uploads up to this size go through wgpuQueueWriteBuffer (no map round trip);
#: larger ones through a reused mapped staging buffer and a parallel memcpy.
QUEUE_WRITE_MAX = 1 << 20
#: Smallest mapped upload staging buffer; sizes grow by powers of two.
UPLOAD_STAGING_MIN = 1 << 20
#: A staging buffer larger than this is released after use instead of kept.
UPLOAD_STAGING_KEEP_MAX = 256 << 20
#: Host copy threads: writes into the upload staging cross PCIe (it lives in
#: VRAM through the BAR on the H200) and saturate with few threads; copies
#: out of the readback staging are host-memory bound and like more.
UPLOAD_COPY_THREADS = 8
READ_COPY_THREADS = 8
#: Reads at least READ_SPLIT_MIN bytes can be split in READ_SPLIT_PARTS pipelined
#: parts (see read()).  Off by default: on the H200 (DMA 0.84 ms, copy-out
#: 1.09 ms for 40 MB) two parts measured 1.86-1.99 ms against 1.93-2.0 ms for
#: one, three or four parts were slower (copying out of the helpers' fresh
#: mappings is slower), and helpers are memory the host's budget does not see.
#: Worth it where the DMA is slow (older PCIe).
READ_SPLIT_MIN = 8 << 20
READ_SPLIT_PARTS = 1
#: Spin on the device this long before backing off with sleeps.
SPIN_SECONDS = 0.005
#: Read-ahead (extension): an output named in ExecutePlan.readahead of at most this many bytes is
#: copied into a mapped read buffer inside the dispatch's own submission, so a read() of it right
#: after needs no second submission and wait (one GPU round trip, ~40 us on the H200, saved).
READAHEAD_MAX_BYTES = 1 << 20
#: At most this many read-ahead buffers (mapped or idle) are kept.
READAHEAD_KEEP = 8
#: Upload stages (see stage()) kept mapped for reuse after their dispatch; more are freed.
STAGE_KEEP = 2
#: A released readback staging buffer at least this big is kept (one at a time) and handed out
#: again by the next create_staging() of the same size: on the H200 host freeing a 40 MB one
#: took ~6 ms and creating one up to ~30 ms, while a budget-bound host re-creates it every call.
RECYCLE_STAGING_MIN = 1 << 20
#: Bind groups kept per device (keyed by pipeline and buffer handles).
BIND_GROUP_CACHE = 256
#: close() waits this long for a thread that is inside a native call.
CLOSE_LOCK_SECONDS = 2.0
#: Wrap execute/read/write in error scopes too.  Off by default: wgpu-native
#: reports every error synchronously at the call that caused it, and without
#: a scope it reaches this device's uncaptured-error callback, which records
#: it just the same; two push/pop pairs cost ~6 us per dispatch on the H200
#: host.  Resource and pipeline creation always use scopes.
HOT_PATH_SCOPES = False
#: Send the 16-byte parameter block through the upload staging buffer when a
#: dispatch uploads anyway (saves wgpu's per-call staging allocation of a queue write).
PARAMS_VIA_STAGING = True

# Native entry points bound once (attribute lookups on the cffi lib cost time).
_poll = lib.wgpuDevicePoll
_write_buffer = lib.wgpuQueueWriteBuffer
_create_encoder = lib.wgpuDeviceCreateCommandEncoder
_begin_compute = lib.wgpuCommandEncoderBeginComputePass
_set_pipeline = lib.wgpuComputePassEncoderSetPipeline
_set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
_dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
_end_pass = lib.wgpuComputePassEncoderEnd
_release_pass = lib.wgpuComputePassEncoderRelease
_copy_b2b = lib.wgpuCommandEncoderCopyBufferToBuffer
_resolve = lib.wgpuCommandEncoderResolveQuerySet
_finish = lib.wgpuCommandEncoderFinish
_release_encoder = lib.wgpuCommandEncoderRelease
_submit = lib.wgpuQueueSubmit
_work_done = lib.wgpuQueueOnSubmittedWorkDone
_release_cmd = lib.wgpuCommandBufferRelease
_map_async = lib.wgpuBufferMapAsync
_mapped_range = lib.wgpuBufferGetMappedRange
_const_mapped_range = lib.wgpuBufferGetConstMappedRange
_unmap = lib.wgpuBufferUnmap
_push_scope = lib.wgpuDevicePushErrorScope
_pop_scope = lib.wgpuDevicePopErrorScope
_FILTER_VALIDATION = lib.WGPUErrorFilter_Validation
_FILTER_OOM = lib.WGPUErrorFilter_OutOfMemory
# (wgpu-native 29 panics on WGPUErrorFilter_Internal; internal errors reach the uncaptured callback.)

# cffi callbacks must outlive every device that may call them.
_keepalive: list[Any] = []


def _addr(ptr: Any) -> int:
    return int(ffi.cast("uintptr_t", ptr))


class _Readahead:
    """A mapped copy of a storage buffer taken at the end of a dispatch (see READAHEAD_MAX_BYTES)."""

    __slots__ = ("ptr", "size", "nbytes", "cell")

    def __init__(self, ptr: Any, size: int, nbytes: int) -> None:
        self.ptr = ptr
        self.size = size  # allocated bytes
        self.nbytes = nbytes  # bytes copied from the source
        self.cell: nat.MapCell | None = None


class _Staging:
    """The device's own mapped upload staging buffer (MAP_WRITE | COPY_SRC), reused."""

    __slots__ = ("ptr", "size", "mapped", "cell")

    def __init__(self, ptr: Any, size: int) -> None:
        self.ptr = ptr
        self.size = size
        self.mapped = True  # created mapped
        self.cell: nat.MapCell | None = None  # pending re-map after a submission


@dataclass
class _Flags:
    """State the native callbacks write; kept apart so callbacks hold no device reference."""

    lost: bool = False
    lost_reason: str = ""
    closing: bool = False
    errors: list[str] = field(default_factory=list)
    popped: list[tuple[int, int, str]] = field(default_factory=list)


class GpuDevice:
    """An open wgpu device with the small API the host builds on (see the package docstring)."""

    # ------------------------------------------------------------------ open

    def __init__(self, adapter: Any, info: AdapterInfo, device_ptr: Any, flags: _Flags,
                 faults: FaultInjector | None, open_seconds: float) -> None:
        self._adapter = adapter  # keeps wgpu-py's adapter (and its native handle) alive
        self.info = info
        self.open_seconds = open_seconds
        self._faults = faults
        self._flags = flags
        self._D = device_ptr
        self._Q = lib.wgpuDeviceGetQueue(device_ptr)
        self._lock = threading.RLock()
        self._closed = False
        limits = ffi.new("WGPULimits *")
        lib.wgpuDeviceGetLimits(device_ptr, limits)
        self.limits = {
            "max-buffer-size": int(limits.maxBufferSize),
            "max-storage-buffer-binding-size": int(limits.maxStorageBufferBindingSize),
            "max-storage-buffers-per-shader-stage": int(limits.maxStorageBuffersPerShaderStage),
            "max-bindings-per-bind-group": int(limits.maxBindingsPerBindGroup),
            "max-compute-workgroups-per-dimension": int(limits.maxComputeWorkgroupsPerDimension),
            "max-compute-invocations-per-workgroup": int(limits.maxComputeInvocationsPerWorkgroup),
            "max-compute-workgroup-size-x": int(limits.maxComputeWorkgroupSizeX),
            "max-uniform-buffer-binding-size": int(limits.maxUniformBufferBindingSize),
        }
        self._max_storage = min(self.limits["max-buffer-size"], self.limits["max-storage-buffer-binding-size"])
        self._max_groups = self.limits["max-compute-workgroups-per-dimension"]
        self.has_timestamps = bool(lib.wgpuDeviceHasFeature(device_ptr, lib.WGPUFeatureName_TimestampQuery))
        self._ts_period_ns = float(lib.wgpuQueueGetTimestampPeriod(self._Q)) if self.has_timestamps else 0.0
        self._software = info.is_software

        self._next_id = 1
        self._buffers: dict[int, BufferHandle] = {}
        self._live_bytes = 0
        self._allocations = 0
        self._pipelines: dict[tuple[Any, ...], ComputePipeline] = {}
        self._pipeline_hits = 0
        self._pipeline_misses = 0
        self._bind_groups: dict[tuple[int, ...], Any] = {}
        self._bg_hits = 0
        self._bg_misses = 0
        self._submissions = 0
        self._staging: _Staging | None = None
        self._read_helpers: list[tuple[Any, int]] = []
        self._recycled_staging: tuple[Any, int] | None = None  # (raw buffer, size), see RECYCLE_STAGING_MIN
        self._readahead: dict[int, _Readahead] = {}  # source buffer id -> mapped copy
        self._readahead_idle: list[_Readahead] = []  # unmapped, ready for the next copy
        self._stages_idle: list[UploadStage] = []  # mapped or re-mapping, ready for stage()
        self._stages_live: set[UploadStage] = set()  # every stage not yet freed
        self.readahead_hits = 0
        #: Phase split of the last staged upload (seconds): acquire (incl. waiting for the re-map), copy, unmap.
        self.last_upload_timing: dict[str, float] = {}
        #: Phase split of the last successful read(): submit, wait (first part), copy (seconds), total, parts.
        self.last_read_timing: dict[str, float] = {}

        # Reused native structs for the hot path (callback infos are passed by value).
        self._cmds = ffi.new("WGPUCommandBuffer[1]")
        self._map_info = nat.new_map_info()
        self._fence_info = nat.new_work_done_info()
        self._pass_desc = ffi.new("WGPUComputePassDescriptor *")
        self._pass_desc_ts = ffi.new("WGPUComputePassDescriptor *")
        self._pop_info = ffi.new("WGPUPopErrorScopeCallbackInfo *")
        popped = flags.popped

        @ffi.callback("void(WGPUPopErrorScopeStatus, WGPUErrorType, WGPUStringView, void *, void *)")
        def on_pop(status: int, etype: int, message: Any, u1: Any, u2: Any) -> None:
            try:
                text = nat.c_str(message) if etype != nat.ERROR_NONE else ""
            except Exception:
                text = "(unreadable error message)"
            popped.append((int(status), int(etype), text))

        _keepalive.append(on_pop)
        self._pop_info.mode = lib.WGPUCallbackMode_AllowSpontaneous
        self._pop_info.callback = on_pop

        self._ts_query = self._ts_resolve = self._ts_read = None
        self._ts_cell: nat.MapCell | None = None
        self._ts_writes = None
        if self.has_timestamps:
            self._init_timestamps()

    def _init_timestamps(self) -> None:
        qd = ffi.new("WGPUQuerySetDescriptor *")
        qd.type = lib.WGPUQueryType_Timestamp
        qd.count = 2
        self._ts_query = lib.wgpuDeviceCreateQuerySet(self._D, qd)
        self._ts_resolve = self._raw_buffer(256, nat.USAGE_QUERY_RESOLVE | nat.USAGE_COPY_SRC)
        self._ts_read = self._raw_buffer(16, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST)
        self._ts_writes = ffi.new("WGPUPassTimestampWrites *")
        self._ts_writes.querySet = self._ts_query
        self._ts_writes.beginningOfPassWriteIndex = 0
        self._ts_writes.endOfPassWriteIndex = 1
        self._pass_desc_ts.timestampWrites = self._ts_writes

    @classmethod
    def open(
        cls,
        power_preference: str = "high-performance",
        allow_software_adapter: bool = False,
        faults: FaultInjector | None = None,
    ) -> GpuDevice:
        """Open the best allowed adapter with its real limits (and timestamps when offered).

        Raises GpuUnavailable(reason) when no adapter is found, only software
        adapters are and they are not allowed, or every device request fails.
        """
        t0 = _perf()
        try:
            found = _enumerate()
        except Exception as exc:
            raise GpuUnavailable(f"wgpu could not enumerate adapters: {exc}") from exc
        candidates, why = rank_adapters(found, power_preference, allow_software_adapter)
        if not candidates:
            raise GpuUnavailable(why)
        failures = []
        for adapter, info in candidates:
            try:
                ptr, flags = _request_device(adapter, "timestamp-query" in info.features)
            except GpuUnavailable as exc:
                failures.append(f"{info.summary()}: {exc.reason}")
                continue
            return cls(adapter, info, ptr, flags, faults, _perf() - t0)
        raise GpuUnavailable("device request failed on every adapter: " + "; ".join(failures))

    # ------------------------------------------------------------ internals

    def _check_usable(self, submitted: bool = False) -> None:
        if self._closed:
            raise DeviceFailure("closed", "the device is closed", submitted)
        if self._flags.lost:
            raise DeviceFailure("lost", self._flags.lost_reason or "the device is lost", submitted)

    def _push(self) -> int:
        """Push validation and out-of-memory scopes; returns a mark into the uncaptured-error list."""
        _push_scope(self._D, _FILTER_OOM)
        _push_scope(self._D, _FILTER_VALIDATION)
        return len(self._flags.errors)

    def _hot_push(self) -> None:
        """Start error capture for a hot path: scopes if HOT_PATH_SCOPES, else the uncaptured list."""
        if HOT_PATH_SCOPES:
            self._push()
        del self._flags.errors[:]

    def _hot_pop(self) -> str | None:
        if HOT_PATH_SCOPES:
            return self._pop()
        errors = self._flags.errors
        if not errors:
            return None
        msg = errors[0]
        del errors[:]
        return msg

    def _pop(self, mark: int = 0) -> str | None:
        """Pop the two scopes of _push; the first error message, if any (also uncaptured ones since ``mark``)."""
        popped = self._flags.popped
        del popped[:]
        _pop_scope(self._D, self._pop_info[0])
        _pop_scope(self._D, self._pop_info[0])
        msg = None
        for status, etype, text in popped:
            if etype != nat.ERROR_NONE and status == nat.STATUS_SUCCESS:
                msg = f"{nat.ERROR_NAMES.get(etype, 'error')}: {text}"
                break
            if status != nat.STATUS_SUCCESS and msg is None:
                msg = f"error scope could not be popped (status {status})"
        if len(popped) < 2 and msg is None:
            msg = "error scope callback did not run"
        errors = self._flags.errors
        if len(errors) > mark:
            if msg is None:
                msg = errors[mark]
            del errors[mark:]
        return msg

    def _raw_buffer(self, size: int, usage: int, mapped: bool = False) -> Any:
        desc = ffi.new("WGPUBufferDescriptor *")
        desc.usage = usage
        desc.size = size
        desc.mappedAtCreation = bool(mapped)
        return lib.wgpuDeviceCreateBuffer(self._D, desc)

    def _checked_buffer(self, size: int, usage: int, mapped: bool = False) -> tuple[Any, str | None]:
        """_raw_buffer inside error scopes: (buffer, None), or (NULL, the error) with nothing left allocated."""
        mark = self._push()
        ptr = self._raw_buffer(size, usage, mapped)
        err = self._pop(mark)
        if err is None and ptr != _NULL:
            return ptr, None
        if ptr != _NULL:
            self._free_raw_buffer(ptr)
        return _NULL, err or "no buffer returned"

    @staticmethod
    def _free_raw_buffer(ptr: Any) -> None:
        lib.wgpuBufferDestroy(ptr)
        lib.wgpuBufferRelease(ptr)

    def _fence(self) -> nat.MapCell:
        """Ask for a callback when all submitted work is done (lock held)."""
        cell = nat.new_cell()
        info = self._fence_info
        info.userdata1 = ffi.cast("void *", cell.key)
        _work_done(self._Q, info[0])
        return cell

    def _map(self, buf: Any, mode: int, offset: int, size: int) -> nat.MapCell:
        """wgpuBufferMapAsync with a fresh cell (lock held)."""
        cell = nat.new_cell()
        info = self._map_info
        info.userdata1 = ffi.cast("void *", cell.key)
        _map_async(buf, mode, offset, size, info[0])
        return cell

    def _new_id(self) -> int:
        n = self._next_id
        self._next_id = n + 1
        return n

    def _wait(self, deadline: float, cells: Sequence[nat.MapCell], what: str = "work") -> None:
        """Poll until every cell (work-done fence or buffer map) resolved, or the deadline passes.

        Spins for SPIN_SECONDS (a dispatch usually finishes in microseconds),
        then sleeps with growing back-off; each poll is a non-blocking native
        call taken under the lock, so close() can interleave.  A cell that
        resolves with an error status is left for the caller to report.
        """
        lock = self._lock
        D = self._D
        flags = self._flags
        spin_until = _perf() + SPIN_SECONDS
        nap = 0.00005
        while True:
            for c in cells:
                if not c.status:
                    break
            else:
                return
            with lock:
                if self._closed:
                    raise DeviceFailure("closed", f"the device was closed while waiting for {what}", True)
                _poll(D, 0, _NULL)
            if flags.lost:
                raise DeviceFailure("lost", flags.lost_reason or "the device was lost", True)
            now = _perf()
            if now > deadline:
                for c in cells:
                    if not c.status:
                        raise DeviceFailure("timeout", f"{what} not complete before the deadline", True, True)
                return
            if now > spin_until:
                time.sleep(min(nap, max(0.0, deadline - now)))
                nap = min(nap * 2, 0.002)

    def _readahead_drop(self, buf_id: int, keep: bool = True) -> None:
        """Forget the read-ahead copy of buffer ``buf_id`` (lock held); its buffer is kept for reuse."""
        ra = self._readahead.pop(buf_id, None)
        if ra is None:
            return
        cell, ra.cell = ra.cell, None
        if cell is not None and not cell.status:
            nat.forget_cell(cell)  # never resolved (a failed submission): the buffer's state is unknown
            keep = False
        elif cell is not None and cell.status == nat.STATUS_SUCCESS:
            _unmap(ra.ptr)
        if keep and len(self._readahead_idle) + len(self._readahead) < READAHEAD_KEEP:
            self._readahead_idle.append(ra)
        else:
            self._free_raw_buffer(ra.ptr)

    def _readahead_take(self, nbytes: int) -> _Readahead:
        """An unmapped read-ahead buffer of at least ``nbytes`` (lock held)."""
        idle = self._readahead_idle
        for i, ra in enumerate(idle):
            if ra.size >= nbytes:
                ra = idle.pop(i)
                ra.nbytes = nbytes
                return ra
        size = max(4096, (nbytes + 4095) & ~4095)
        return _Readahead(self._raw_buffer(size, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST), size, nbytes)

    def _discard_transients(self) -> None:
        """After a failure: drop mapped/pending helper buffers whose state is now unknown."""
        with self._lock:
            if self._closed:
                return
            for buf_id in list(self._readahead):
                self._readahead_drop(buf_id, keep=False)
            st, self._staging = self._staging, None
            if st is not None:
                if st.cell is not None:
                    nat.forget_cell(st.cell)
                self._free_raw_buffer(st.ptr)
            self._free_idle_stages()
            if self.has_timestamps and self._ts_cell is not None:
                nat.forget_cell(self._ts_cell)
                self._ts_cell = None
                self._free_raw_buffer(self._ts_read)
                self._ts_read = self._raw_buffer(16, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST)

    # -------------------------------------------------------------- buffers

    def _create(self, kind: str, nbytes: int, usage: int, limit: int) -> BufferHandle:
        try:
            nbytes = int(nbytes)
        except (TypeError, ValueError):
            raise DeviceAllocationError(f"{kind} buffer size must be an integer, not {nbytes!r}") from None
        if nbytes <= 0:
            raise DeviceAllocationError(f"{kind} buffer of {nbytes} bytes: size must be positive", nbytes)
        size = (nbytes + 3) & ~3
        if size > limit:
            raise DeviceAllocationError(
                f"{kind} buffer of {nbytes} bytes exceeds the device limit of {limit} bytes", nbytes)
        with self._lock:
            if self._closed or self._flags.lost:
                raise DeviceAllocationError(f"cannot allocate a {kind} buffer: device "
                                            f"{'closed' if self._closed else 'lost'}", nbytes)
            if self._faults is not None and self._faults.hit("alloc"):
                raise DeviceAllocationError(f"injected allocation failure ({kind}, {nbytes} bytes)", nbytes)
            recycled = self._recycled_staging
            if kind == "staging" and recycled is not None and recycled[1] == size:
                ptr = recycled[0]
                self._recycled_staging = None
            else:
                ptr, err = self._checked_buffer(size, usage)
                if err is not None:
                    raise DeviceAllocationError(f"{kind} buffer of {nbytes} bytes: {err}", nbytes)
                self._allocations += 1
            h = BufferHandle(self._new_id(), kind, size, ptr)
            self._buffers[h.id] = h
            self._live_bytes += size
            return h

    def create_storage(self, nbytes: int) -> BufferHandle:
        """A STORAGE | COPY_SRC | COPY_DST buffer (size rounded up to 4 bytes)."""
        return self._create("storage", nbytes, nat.USAGE_STORAGE | nat.USAGE_COPY_SRC | nat.USAGE_COPY_DST,
                            self._max_storage)

    def create_uniform(self, nbytes: int = 16) -> BufferHandle:
        """A UNIFORM | COPY_DST buffer for the 16-byte parameter block."""
        return self._create("uniform", nbytes, nat.USAGE_UNIFORM | nat.USAGE_COPY_DST,
                            self.limits["max-uniform-buffer-binding-size"])

    def create_staging(self, nbytes: int) -> BufferHandle:
        """A MAP_READ | COPY_DST readback buffer; the host keeps and reuses it."""
        return self._create("staging", nbytes, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST,
                            self.limits["max-buffer-size"])

    def release(self, handle: BufferHandle | ComputePipeline) -> None:
        """Free a buffer (or a pipeline) now; idempotent, and a no-op after close()."""
        if isinstance(handle, ComputePipeline):
            self.release_pipeline(handle)
            return
        with self._lock:
            ptr = handle._ptr
            if ptr is None:
                return
            handle._ptr = None
            if self._buffers.pop(handle.id, None) is None or self._closed:
                handle.mapped = 0
                return
            self._live_bytes -= handle.nbytes
            self._readahead_drop(handle.id)
            self._drop_bind_groups(lambda key: handle.id in key[1:])
            if handle.kind == "staging" and handle.nbytes >= RECYCLE_STAGING_MIN and not self._flags.lost:
                if handle.mapped:
                    _unmap(ptr)
                old, self._recycled_staging = self._recycled_staging, (ptr, handle.nbytes)
                if old is not None:
                    self._free_raw_buffer(old[0])
            else:
                self._free_raw_buffer(ptr)
            handle.mapped = 0

    # ------------------------------------------------------------ pipelines

    def pipeline(self, wgsl: str, bindings: Sequence[bool], entry_point: str = "main") -> ComputePipeline:
        """The compute pipeline for ``wgsl``; cached by its text (and binding kinds).

        ``bindings[i]`` is True when storage binding i+1 is read-only; binding
        0 is the 16-byte uniform.  Invalid WGSL raises PipelineError with
        wgpu's message (caught by an error scope, not logged).
        """
        binds = tuple(bool(b) for b in bindings)
        key = (wgsl, binds, entry_point)
        with self._lock:
            if self._closed:
                raise PipelineError("the device is closed")
            p = self._pipelines.get(key)
            if p is not None:
                self._pipeline_hits += 1
                return p
            self._pipeline_misses += 1
            if self._faults is not None and self._faults.hit("pipeline"):
                raise PipelineError("injected pipeline creation failure")
            if len(binds) > self.limits["max-storage-buffers-per-shader-stage"]:
                raise PipelineError(f"{len(binds)} storage bindings exceed the device limit of "
                                    f"{self.limits['max-storage-buffers-per-shader-stage']}")
            p = self._build_pipeline(wgsl, binds, entry_point, key)
            self._pipelines[key] = p
            return p

    def _build_pipeline(self, wgsl: str, binds: tuple[bool, ...], entry_point: str,
                        key: tuple[Any, ...]) -> ComputePipeline:
        D = self._D
        keep: list[Any] = []
        mark = self._push()
        src = ffi.new("WGPUShaderSourceWGSL *")
        src.chain.sType = lib.WGPUSType_ShaderSourceWGSL
        keep.append(nat.string_view(src.code, wgsl))
        smd = ffi.new("WGPUShaderModuleDescriptor *")
        smd.nextInChain = ffi.cast("WGPUChainedStruct *", src)
        module = lib.wgpuDeviceCreateShaderModule(D, smd)

        entries = ffi.new("WGPUBindGroupLayoutEntry[]", len(binds) + 1)
        entries[0].binding = 0
        entries[0].visibility = nat.STAGE_COMPUTE
        entries[0].buffer.type = lib.WGPUBufferBindingType_Uniform
        entries[0].buffer.minBindingSize = 16
        for i, ro in enumerate(binds, 1):
            entries[i].binding = i
            entries[i].visibility = nat.STAGE_COMPUTE
            entries[i].buffer.type = (lib.WGPUBufferBindingType_ReadOnlyStorage if ro
                                      else lib.WGPUBufferBindingType_Storage)
        bgld = ffi.new("WGPUBindGroupLayoutDescriptor *")
        bgld.entryCount = len(binds) + 1
        bgld.entries = entries
        bgl = lib.wgpuDeviceCreateBindGroupLayout(D, bgld)

        layouts = ffi.new("WGPUBindGroupLayout[1]", [bgl])
        pld = ffi.new("WGPUPipelineLayoutDescriptor *")
        pld.bindGroupLayoutCount = 1
        pld.bindGroupLayouts = layouts
        layout = lib.wgpuDeviceCreatePipelineLayout(D, pld)

        cpd = ffi.new("WGPUComputePipelineDescriptor *")
        cpd.layout = layout
        cpd.compute.module = module
        keep.append(nat.string_view(cpd.compute.entryPoint, entry_point))
        ptr = lib.wgpuDeviceCreateComputePipeline(D, cpd)
        err = self._pop(mark)
        if err is not None:
            for obj, rel in ((ptr, lib.wgpuComputePipelineRelease), (layout, lib.wgpuPipelineLayoutRelease),
                             (bgl, lib.wgpuBindGroupLayoutRelease), (module, lib.wgpuShaderModuleRelease)):
                if obj != _NULL:
                    rel(obj)
            raise PipelineError(err)
        return ComputePipeline(self._new_id(), key, binds, ptr, bgl, layout, module)

    def release_pipeline(self, pipeline: ComputePipeline) -> None:
        """Free a pipeline and its cached bind groups; idempotent."""
        with self._lock:
            ptr = pipeline._ptr
            if ptr is None:
                return
            pipeline._ptr = None
            if self._pipelines.get(pipeline.key) is pipeline:
                del self._pipelines[pipeline.key]
            if self._closed:
                return
            self._drop_bind_groups(lambda key: key[0] == pipeline.id)
            lib.wgpuComputePipelineRelease(ptr)
            lib.wgpuPipelineLayoutRelease(pipeline._layout)
            lib.wgpuBindGroupLayoutRelease(pipeline._bgl)
            lib.wgpuShaderModuleRelease(pipeline._module)

    # ---------------------------------------------------------- bind groups

    def _drop_bind_groups(self, match: Any) -> None:
        for key in [k for k in self._bind_groups if match(k)]:
            lib.wgpuBindGroupRelease(self._bind_groups.pop(key))

    def _bind_group(self, pipe: ComputePipeline, uniform: BufferHandle, storage: Sequence[BufferHandle]) -> Any:
        key = (pipe.id, uniform.id, *[s.id for s in storage])
        bg = self._bind_groups.get(key)
        if bg is not None:
            self._bg_hits += 1
            return bg
        self._bg_misses += 1
        if pipe._ptr is None:
            raise DeviceFailure("submit", "the pipeline was released")
        if len(storage) != len(pipe.bindings):
            raise DeviceFailure("submit", f"the pipeline has {len(pipe.bindings)} storage bindings, "
                                          f"the plan binds {len(storage)} buffers")
        if uniform._ptr is None or uniform.kind != "uniform":
            raise DeviceFailure("submit", f"binding 0 needs a live uniform buffer, got {uniform!r}")
        entries = ffi.new("WGPUBindGroupEntry[]", len(storage) + 1)
        entries[0].binding = 0
        entries[0].buffer = uniform._ptr
        entries[0].size = nat.WHOLE_SIZE
        for i, s in enumerate(storage, 1):
            if s._ptr is None or s.kind != "storage":
                raise DeviceFailure("submit", f"storage binding {i} needs a live storage buffer, got {s!r}")
            entries[i].binding = i
            entries[i].buffer = s._ptr
            entries[i].size = nat.WHOLE_SIZE
        desc = ffi.new("WGPUBindGroupDescriptor *")
        desc.layout = pipe._bgl
        desc.entryCount = len(storage) + 1
        desc.entries = entries
        mark = self._push()
        bg = lib.wgpuDeviceCreateBindGroup(self._D, desc)
        err = self._pop(mark)
        if err is not None:
            if bg != _NULL:
                lib.wgpuBindGroupRelease(bg)
            raise DeviceFailure("submit", f"bind group: {err}")
        if len(self._bind_groups) >= BIND_GROUP_CACHE:
            old = next(iter(self._bind_groups))
            lib.wgpuBindGroupRelease(self._bind_groups.pop(old))
        self._bind_groups[key] = bg
        return bg

    # -------------------------------------------------------------- uploads

    def _acquire_staging(self, nbytes: int, deadline: float) -> _Staging:
        """The mapped upload staging buffer, at least ``nbytes`` long (lock held)."""
        st = self._staging
        if st is not None and st.size < nbytes:
            self._staging = None
            if st.cell is not None:
                nat.forget_cell(st.cell)
            self._free_raw_buffer(st.ptr)
            st = None
        if st is not None and not st.mapped:
            cell = st.cell
            if cell is not None and not cell.status:
                self._wait(deadline, (cell,), "the upload staging map")
            st.cell = None
            if cell is None or cell.status != nat.STATUS_SUCCESS:
                self._staging = None
                self._free_raw_buffer(st.ptr)
                st = None
            else:
                st.mapped = True
        if st is None:
            size = UPLOAD_STAGING_MIN
            while size < nbytes:
                size *= 2
            size = min(size, self.limits["max-buffer-size"])
            if size < nbytes:
                raise DeviceFailure("submit", f"upload of {nbytes} bytes exceeds max-buffer-size")
            ptr, err = self._checked_buffer(size, nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC, mapped=True)
            if err is not None:
                raise DeviceFailure("submit", f"upload staging of {size} bytes: {err}")
            st = self._staging = _Staging(ptr, size)
        return st

    def stage(self, nbytes: int, timeout: float = 5.0) -> UploadStage:
        """A mapped upload buffer of at least ``nbytes`` for the caller to fill (see UploadStage).

        Reuses a kept stage (waiting for its re-map if its dispatch just finished) or creates
        one; raises DeviceAllocationError when none can be had.
        """
        nbytes = int(nbytes)
        if nbytes <= 0 or nbytes % 4:
            raise DeviceAllocationError(f"an upload stage of {nbytes} bytes: size must be a positive multiple of 4")
        deadline = _perf() + timeout
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            raise DeviceAllocationError("the device lock was not free before the deadline", nbytes)
        try:
            if self._closed or self._flags.lost:
                raise DeviceAllocationError("cannot stage an upload: device closed or lost", nbytes)
            if self._faults is not None and self._faults.hit("alloc"):
                raise DeviceAllocationError(f"injected allocation failure (stage, {nbytes} bytes)", nbytes)
            idle = self._stages_idle
            pick = min((sg for sg in idle if sg.size >= nbytes), key=lambda sg: sg.size, default=None)
            if pick is not None:
                idle.remove(pick)
                cell, pick._cell = pick._cell, None
                if cell is not None:
                    if not cell.status:
                        try:
                            self._wait(deadline, (cell,), "an upload stage's map")
                        except DeviceFailure:
                            nat.forget_cell(cell)
                            self._free_stage(pick)
                            raise DeviceAllocationError("an upload stage did not map in time", nbytes) from None
                    if cell.status != nat.STATUS_SUCCESS:
                        self._free_stage(pick)
                        pick = None
            if pick is None:
                size = (nbytes + 4095) & ~4095
                if size > self.limits["max-buffer-size"]:
                    raise DeviceAllocationError(f"an upload stage of {nbytes} bytes exceeds max-buffer-size", nbytes)
                ptr, err = self._checked_buffer(size, nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC, mapped=True)
                if err is not None:
                    raise DeviceAllocationError(f"an upload stage of {size} bytes: {err}", nbytes)
                pick = UploadStage(ptr, size)
                self._stages_live.add(pick)
            base = _addr(_mapped_range(pick._ptr, 0, pick.size))
            if base == 0:
                self._free_stage(pick)
                raise DeviceAllocationError("an upload stage has no mapped range", nbytes)
            pick.nbytes = nbytes
            pick.address = base
            return pick
        finally:
            self._lock.release()

    def unstage(self, stage: UploadStage) -> None:
        """Hand back a stage that will not be uploaded (it stays mapped for the next stage())."""
        with self._lock:
            if stage in self._stages_live and stage.address:
                self._pool_stage(stage)

    def _pool_stage(self, stage: UploadStage) -> None:
        """A mapped stage nobody owns: keep it for the next stage() or free it (lock held)."""
        stage.address = 0
        if self._closed or len(self._stages_idle) >= STAGE_KEEP:
            self._free_stage(stage)
        else:
            self._stages_idle.append(stage)

    def _free_stage(self, stage: UploadStage) -> None:
        """(lock held)"""
        stage.address = 0
        if stage in self._stages_live:
            self._stages_live.discard(stage)
            if stage._cell is not None and not stage._cell.status:
                nat.forget_cell(stage._cell)
            stage._cell = None
            if not self._closed:
                self._free_raw_buffer(stage._ptr)

    def _free_idle_stages(self) -> None:
        """(lock held)"""
        for sg in self._stages_idle:
            self._free_stage(sg)
        self._stages_idle.clear()

    def _record_uploads(self, enc: Any, uploads: Sequence[tuple[BufferHandle, int, Any]],
                        deadline: float, stages: list[UploadStage] | None = None) -> tuple[int, _Staging | None]:
        """Record uploads; returns (bytes, staging buffer used or None).

        An UploadStage item is unmapped, recorded as a copy into ``enc`` and appended to
        ``stages`` (the caller re-maps or frees it once the submission is in).  Of the array
        items, a batch of at most QUEUE_WRITE_MAX bytes (or any batch when ``enc`` is None) goes
        through wgpuQueueWriteBuffer; a larger one is copied, on several threads, into the
        device's mapped staging buffer and recorded as copies into ``enc``.
        """
        items: list[tuple[BufferHandle, int, np.ndarray, int]] = []
        total = 0
        staged: list[tuple[BufferHandle, int, UploadStage]] = []
        for h, off, arr in uploads:
            if isinstance(arr, UploadStage):
                if enc is None or stages is None or arr not in self._stages_live or not arr.address:
                    raise DeviceFailure("submit", f"{arr!r} cannot be uploaded here (not owned by the caller)")
                if h._ptr is None or off < 0 or off % 4 or off + arr.nbytes > h.nbytes:
                    raise DeviceFailure("submit", f"{arr!r} does not fit {h!r} at offset {off}")
                staged.append((h, off, arr))
                continue
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr, dtype=np.uint32)  # lists and the like are words
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            n = arr.nbytes
            if n == 0:
                continue
            if h._ptr is None:
                raise DeviceFailure("submit", f"upload into a released buffer {h!r}")
            if off < 0 or off % 4 or n % 4 or off + n > h.nbytes:
                raise DeviceFailure("submit", f"upload of {n} bytes at offset {off} does not fit "
                                              f"{h!r} (offsets and sizes must be multiples of 4)")
            total += n
            items.append((h, off, arr, n))
        for h, off, sg in staged:
            _unmap(sg._ptr)
            sg.address = 0
            assert stages is not None
            stages.append(sg)
            _copy_b2b(enc, sg._ptr, 0, h._ptr, off, sg.nbytes)
            total += sg.nbytes
        if not items:
            return total, None
        if enc is None or sum(item[3] for item in items) <= QUEUE_WRITE_MAX:
            Q = self._Q
            for h, off, arr, n in items:
                _write_buffer(Q, h._ptr, off, ffi.from_buffer(arr), n)
            return total, None
        need = 0
        for item in items:
            need += (item[3] + 255) & ~255
        ta = _perf()
        st = self._acquire_staging(need, deadline)
        base = _addr(_mapped_range(st.ptr, 0, st.size))
        tb = _perf()
        if base == 0:
            raise DeviceFailure("submit", "upload staging buffer has no mapped range")
        pos = 0
        for h, off, arr, n in items:
            if n < (1 << 20):
                ffi.memmove(ffi.cast("char *", base + pos), ffi.from_buffer(arr), n)
            else:
                copy_bytes(base + pos, arr.__array_interface__["data"][0], n, UPLOAD_COPY_THREADS)
            pos += (n + 255) & ~255
        tc = _perf()
        _unmap(st.ptr)
        st.mapped = False
        self.last_upload_timing = {"acquire": tb - ta, "copy": tc - tb, "unmap": _perf() - tc}
        pos = 0
        for h, off, arr, n in items:
            _copy_b2b(enc, st.ptr, pos, h._ptr, off, n)
            pos += (n + 255) & ~255
        return total, st

    def _remap_stages(self, stages: list[UploadStage]) -> None:
        """After the submission that uploaded them: ask for the stages back (they map once it is
        done) and keep up to STAGE_KEEP of them for the next stage() (lock held)."""
        for sg in stages:
            if len(self._stages_idle) < STAGE_KEEP:
                sg._cell = self._map(sg._ptr, nat.MAP_WRITE, 0, sg.size)
                self._stages_idle.append(sg)
            else:
                self._free_stage(sg)  # wgpu defers the free until the submission is done
        stages.clear()

    def _return_unrecorded(self, plan: ExecutePlan, stages: list[UploadStage]) -> None:
        """After execute, failed or not (lock held): stages recorded but not submitted are freed;
        stages of the plan never recorded are still mapped and go back to the pool."""
        for sg in stages:
            self._free_stage(sg)
        stages.clear()
        for _h, _off, item in plan.uploads:
            if isinstance(item, UploadStage) and item.address and item in self._stages_live:
                self._pool_stage(item)

    def _remap_staging(self, st: _Staging | None) -> None:
        """Ask for the staging buffer back right after submission: it resolves during the wait."""
        if st is None:
            return
        if st.size > UPLOAD_STAGING_KEEP_MAX:
            # Too big to keep around: drop it once this submission is done (wgpu defers the free).
            if self._staging is st:
                self._staging = None
            self._free_raw_buffer(st.ptr)
            return
        st.cell = self._map(st.ptr, nat.MAP_WRITE, 0, st.size)

    # -------------------------------------------------------------- execute

    def execute(self, plan: ExecutePlan, timeout: float) -> ExecuteResult:
        """Run one dispatch transaction and wait for it; raises DeviceFailure on any failure.

        One submission holds the parameter write, the uploads, the seed
        copies and the compute pass (unless ``plan.separate_stages``).
        Upload arrays are copied before execute returns; the caller may
        reuse them at once.
        """
        t0 = _perf()
        deadline = t0 + timeout
        faults = self._faults
        lock = self._lock
        if not lock.acquire(timeout=max(0.0, timeout)):
            raise DeviceFailure("timeout", "the device lock was not free before the deadline", False, True)
        submitted = False
        stages: list[UploadStage] = []  # recorded from plan.uploads; re-mapped once submitted
        try:
            if self._closed or self._flags.lost:
                self._check_usable()
            gx, gy = plan.workgroups
            mg = self._max_groups
            if not (0 <= gx <= mg and 0 <= gy <= mg):
                raise DeviceFailure("submit", f"workgroups {plan.workgroups} exceed "
                                              f"max-compute-workgroups-per-dimension {mg}")
            pipe = plan.pipeline
            uniform = plan.uniform
            bg = self._bind_group(pipe, uniform, plan.storage)
            params = plan.params
            if params is not None and len(params) != 16:
                raise DeviceFailure("submit", f"params must be 16 bytes, got {len(params)}")
            if faults is not None and faults.hit("submit"):
                raise DeviceFailure("submit", "injected submission failure", False)
            if plan.separate_stages:
                return self._execute_staged(plan, bg, t0, deadline)
            seeds = plan.seeds
            for src, dst, off, n in seeds:
                if src._ptr is None or dst._ptr is None or off % 4 or n % 4 or off + n > min(src.nbytes, dst.nbytes):
                    raise DeviceFailure("submit", f"seed {src!r} -> {dst!r} [{off}, +{n}) is invalid")
            ts = plan.timestamps and self.has_timestamps and gx > 0 and gy > 0
            if self._readahead:
                # Anything this submission may write loses its read-ahead copy.
                for h in (*plan.storage, *(up[0] for up in plan.uploads), *(seed[1] for seed in seeds)):
                    self._readahead_drop(h.id)
            ahead: list[tuple[BufferHandle, _Readahead]] = []
            errors = self._flags.errors
            if HOT_PATH_SCOPES:
                self._push()
            del errors[:]
            st = None
            enc = None
            up_bytes = seed_bytes = 0
            try:
                enc = _create_encoder(self._D, _NULL)
                uploads = plan.uploads
                if params is not None:
                    if PARAMS_VIA_STAGING and uploads:
                        uploads = [*uploads, (uniform, 0, np.frombuffer(params, dtype=np.uint32))]
                    else:
                        _write_buffer(self._Q, uniform._ptr, 0, params, 16)
                if uploads:
                    up_bytes, st = self._record_uploads(enc, uploads, deadline, stages)
                    if uploads is not plan.uploads:
                        up_bytes -= 16  # the parameter block rode along; report plan uploads only
                t1 = _perf()
                for src, dst, off, n in seeds:
                    if n:
                        _copy_b2b(enc, src._ptr, off, dst._ptr, off, n)
                        seed_bytes += n
                t2 = _perf()
                if gx and gy:
                    cp = _begin_compute(enc, self._pass_desc_ts if ts else self._pass_desc)
                    _set_pipeline(cp, pipe._ptr)
                    _set_bind_group(cp, 0, bg, 0, _NULL)
                    _dispatch(cp, gx, gy, 1)
                    _end_pass(cp)
                    _release_pass(cp)
                if ts:
                    _resolve(enc, self._ts_query, 0, 2, self._ts_resolve, 0)
                    _copy_b2b(enc, self._ts_resolve, 0, self._ts_read, 0, 16)
                for h in plan.readahead:
                    if h._ptr is not None and h.nbytes <= READAHEAD_MAX_BYTES:
                        ra = self._readahead_take(h.nbytes)
                        ahead.append((h, ra))
                        _copy_b2b(enc, h._ptr, 0, ra.ptr, 0, h.nbytes)
                cmd = _finish(enc, _NULL)
                _release_encoder(enc)
                enc = None
                cmds = self._cmds
                cmds[0] = cmd
                _submit(self._Q, 1, cmds)
                submitted = True
                self._submissions += 1
                _release_cmd(cmd)
                fence = self._fence()
                cells: tuple[nat.MapCell, ...] = (fence,)
                if st is not None:
                    self._remap_staging(st)
                if stages:
                    self._remap_stages(stages)
                if ts:
                    cell = self._ts_cell = self._map(self._ts_read, nat.MAP_READ, 0, 16)
                    cells = (fence, cell)
                for h, ra in ahead:
                    ra.cell = self._map(ra.ptr, nat.MAP_READ, 0, ra.nbytes)
                    self._readahead[h.id] = ra
                    cells = (*cells, ra.cell)
                ahead.clear()
            finally:
                if enc is not None:  # a Python-side check raised mid-recording
                    _release_encoder(enc)
                for _h, ra in ahead:  # recorded but never submitted
                    self._free_raw_buffer(ra.ptr)
                err = self._hot_pop() if (HOT_PATH_SCOPES or errors) else None
            if err is not None:
                raise DeviceFailure("submit", err, submitted)
        except DeviceFailure:
            if submitted:
                self._discard_transients()
            raise
        finally:
            self._return_unrecorded(plan, stages)
            lock.release()

        try:
            wait_fails = False
            if faults is not None:
                self._maybe_block(faults)
                if faults.hit("timeout"):
                    raise DeviceFailure("timeout", "injected: the wait exceeded its deadline", True, True)
                wait_fails = faults.hit("wait")
            self._wait(deadline, cells, "the dispatch")
            if fence.status != nat.STATUS_SUCCESS:
                raise DeviceFailure("wait", f"work-done fence failed: {fence.message}", True)
            if wait_fails:
                raise DeviceFailure("wait", "injected failure while waiting for the dispatch", True)
            t3 = _perf()
            if faults is not None or self._flags.lost or errors:
                self._after_completion(faults)
            device_s = self._read_timestamps() if ts else None
        except DeviceFailure:
            self._discard_transients()
            raise
        return ExecuteResult(t1 - t0, t2 - t1, t3 - t2, _perf() - t0, device_s, not self._software,
                             True, up_bytes, seed_bytes)

    def _maybe_block(self, faults: FaultInjector) -> None:
        """The "block" stage: stay inside execute until released (or the device closes)."""
        if not faults.hit("block"):
            return
        faults.blocked.set()
        while not faults.release.wait(0.01):
            if self._closed:
                break
        if self._closed:
            raise DeviceFailure("closed", "the device was closed while the dispatch was blocked", True)

    def _after_completion(self, faults: FaultInjector | None) -> None:
        if faults is not None and faults.hit("lost"):
            self._flags.lost = True
            self._flags.lost_reason = "injected device loss"
            raise DeviceFailure("lost", "injected: the device reports loss", True)
        if self._flags.lost:
            raise DeviceFailure("lost", self._flags.lost_reason or "the device was lost", True)
        if faults is not None and faults.hit("after_completion"):
            raise DeviceFailure("after_completion", "injected validation error reported after completion", True)
        errors = self._flags.errors
        if errors:
            msg = errors[0]
            del errors[:]
            raise DeviceFailure("after_completion", msg, True)

    def _read_timestamps(self) -> float | None:
        with self._lock:
            self._check_usable(True)
            cell, self._ts_cell = self._ts_cell, None
            if cell is None or cell.status != nat.STATUS_SUCCESS:
                raise DeviceFailure("after_completion", f"timestamp readback failed: "
                                                        f"{cell.message if cell else 'no map'}", True)
            p = _const_mapped_range(self._ts_read, 0, 16)
            if p == _NULL:
                _unmap(self._ts_read)
                return None
            begin, end = ffi.cast("uint64_t *", p)[0:2]
            _unmap(self._ts_read)
        if end < begin:
            return None
        return (end - begin) * self._ts_period_ns * 1e-9

    def _execute_staged(self, plan: ExecutePlan, bg: Any, t0: float, deadline: float) -> ExecuteResult:
        """Profile mode: uploads, seeds and compute as separate waited submissions (lock held)."""
        D = self._D
        faults = self._faults
        submitted = False
        t_up = t_seed = t_comp = 0.0
        up_bytes = seed_bytes = 0
        ts = False
        try:
            for stage in ("upload", "seed", "compute"):
                ts = (stage == "compute" and self.has_timestamps and plan.timestamps is not False
                      and plan.workgroups[0] > 0 and plan.workgroups[1] > 0)
                s0 = _perf()
                self._hot_push()
                st = None
                stages: list[UploadStage] = []
                enc = None
                cells: tuple[nat.MapCell, ...] = ()
                try:
                    enc = _create_encoder(D, _NULL)
                    if stage == "upload":
                        if plan.params is not None:
                            _write_buffer(self._Q, plan.uniform._ptr, 0, plan.params, 16)
                        up_bytes, st = self._record_uploads(enc, plan.uploads, deadline, stages)
                    elif stage == "seed":
                        for src, dst, off, n in plan.seeds:
                            if src._ptr is None or dst._ptr is None or off % 4 or n % 4 \
                                    or off + n > min(src.nbytes, dst.nbytes):
                                raise DeviceFailure("submit", f"seed {src!r} -> {dst!r} [{off}, +{n}) is invalid",
                                                    submitted)
                            if n:
                                _copy_b2b(enc, src._ptr, off, dst._ptr, off, n)
                                seed_bytes += n
                    else:
                        gx, gy = plan.workgroups
                        if gx and gy:
                            cp = _begin_compute(enc, self._pass_desc_ts if ts else self._pass_desc)
                            _set_pipeline(cp, plan.pipeline._ptr)
                            _set_bind_group(cp, 0, bg, 0, _NULL)
                            _dispatch(cp, gx, gy, 1)
                            _end_pass(cp)
                            _release_pass(cp)
                        if ts:
                            _resolve(enc, self._ts_query, 0, 2, self._ts_resolve, 0)
                            _copy_b2b(enc, self._ts_resolve, 0, self._ts_read, 0, 16)
                    cmd = _finish(enc, _NULL)
                    _release_encoder(enc)
                    enc = None
                    self._cmds[0] = cmd
                    _submit(self._Q, 1, self._cmds)
                    submitted = True
                    self._submissions += 1
                    _release_cmd(cmd)
                    fence = self._fence()
                    cells = (fence,)
                    self._remap_staging(st)
                    self._remap_stages(stages)
                    if ts:
                        cell = self._ts_cell = self._map(self._ts_read, nat.MAP_READ, 0, 16)
                        cells = (fence, cell)
                finally:
                    if enc is not None:
                        _release_encoder(enc)
                    self._return_unrecorded(plan, stages)
                    err = self._hot_pop()
                if err is not None:
                    raise DeviceFailure("submit", f"{stage} submission: {err}", submitted)
                if stage == "compute" and faults is not None:
                    self._lock.release()
                    try:
                        self._maybe_block(faults)
                    finally:
                        self._lock.acquire()
                    if faults.hit("timeout"):
                        raise DeviceFailure("timeout", "injected: the wait exceeded its deadline", True, True)
                    if faults.hit("wait"):
                        self._wait(deadline, cells, "the dispatch")
                        raise DeviceFailure("wait", "injected failure while waiting for the dispatch", True)
                self._wait(deadline, cells, f"the {stage} submission")
                if cells[0].status != nat.STATUS_SUCCESS:
                    raise DeviceFailure("wait", f"work-done fence failed: {cells[0].message}", True)
                dt = _perf() - s0
                if stage == "upload":
                    t_up = dt
                elif stage == "seed":
                    t_seed = dt
                else:
                    t_comp = dt
            self._after_completion(faults)
            device_s = self._read_timestamps() if ts else None
        except DeviceFailure:
            if submitted:
                self._discard_transients()
            raise
        return ExecuteResult(upload_s=t_up, seed_s=t_seed, compute_s=t_comp, total_s=_perf() - t0,
                             device_compute_s=device_s, hardware_submitted=not self._software,
                             submitted=True, upload_bytes=up_bytes, seed_bytes=seed_bytes)

    # --------------------------------------------------------- read / write

    def read(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
             out: np.ndarray | None = None) -> np.ndarray:
        """Copy ``nbytes`` of ``src`` through the caller's ``staging`` buffer into a uint32 array.

        Returns a fresh array the caller owns, or ``out`` (extension: a
        C-contiguous writable array of exactly ``nbytes`` bytes, e.g. a view
        of the host's CPU copy) filled in place.  On an unmap failure after
        the copy the DeviceFailure carries the data in ``.data``.
        See read_mapped() for a read that leaves the words in the mapped staging buffer.

        With READ_SPLIT_PARTS > 1, reads of READ_SPLIT_MIN bytes or more go
        in several submissions, all but the last part through internal helper
        staging buffers, so copying one part out overlaps the next one's DMA.
        """
        return self._read(src, staging, nbytes, timeout, out, False)

    def read_mapped(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float) -> int:
        """Read like read(), but leave the words in ``staging``, mapped: returns their host address
        (also ``staging.mapped``), valid until unmap(staging), release(staging) or the next read
        through it.  Saves the copy out when the caller copies the words once, elsewhere, anyway."""
        return self._read(src, staging, nbytes, timeout, None, True)

    def unmap(self, staging: BufferHandle) -> None:
        """End the mapping read_mapped() left on ``staging`` (no-op when there is none)."""
        with self._lock:
            if staging.mapped and staging._ptr is not None and not self._closed:
                _unmap(staging._ptr)
            staging.mapped = 0

    def _read(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
              out: np.ndarray | None, keep: bool) -> Any:
        t0 = _perf()
        deadline = t0 + timeout
        faults = self._faults
        nbytes = int(nbytes)
        if out is not None:
            if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable
                    and out.nbytes == nbytes):
                raise ValueError(f"out must be a writable C-contiguous array of {nbytes} bytes")
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            raise DeviceFailure("timeout", "the device lock was not free before the deadline", False, True)
        # parts: (buffer, byte offset in src / out / buffer, nbytes)
        try:
            self._check_usable()
            if nbytes <= 0 or nbytes % 4 or src._ptr is None or staging._ptr is None \
                    or staging.kind != "staging" or nbytes > src.nbytes or nbytes > staging.nbytes:
                raise DeviceFailure("submit", f"cannot read {nbytes} bytes of {src!r} through {staging!r}")
            if faults is not None and faults.hit("submit"):
                raise DeviceFailure("submit", "injected submission failure", False)
            if staging.mapped:
                _unmap(staging._ptr)
                staging.mapped = 0
            ahead = self._readahead.pop(src.id, None)
            if ahead is not None and (keep or ahead.nbytes < nbytes or ahead.cell is None
                                      or ahead.cell.status != nat.STATUS_SUCCESS):
                self._readahead[src.id] = ahead
                self._readahead_drop(src.id)
                ahead = None
            if ahead is not None:
                # The dispatch that wrote src already copied it out and mapped the copy.
                parts = [(ahead.ptr, 0, nbytes)]
                cells = [ahead.cell]
                ahead.cell = None
                self.readahead_hits += 1
            else:
                parts = [(staging._ptr, 0, nbytes)] if keep else self._read_parts(nbytes, staging._ptr)
        except DeviceFailure:
            self._lock.release()
            raise
        if ahead is None:
            return self._read_submitted(src, staging, nbytes, deadline, t0, parts, out, keep)
        self._lock.release()
        return self._read_finish(src, staging, nbytes, deadline, t0, parts, cells, out, ahead)

    def _read_submitted(self, src: BufferHandle, staging: BufferHandle, nbytes: int, deadline: float,
                        t0: float, parts: list[tuple[Any, int, int]], out: np.ndarray | None,
                        keep: bool = False) -> Any:
        """read(): submit the copies of ``parts`` and finish (entered with the lock held)."""
        submitted = False
        cells: list[nat.MapCell] = []
        try:
            self._hot_push()
            try:
                for buf, off, n in parts:
                    enc = _create_encoder(self._D, _NULL)
                    _copy_b2b(enc, src._ptr, off, buf, off if buf is staging._ptr else 0, n)
                    cmd = _finish(enc, _NULL)
                    _release_encoder(enc)
                    self._cmds[0] = cmd
                    _submit(self._Q, 1, self._cmds)
                    submitted = True
                    self._submissions += 1
                    _release_cmd(cmd)
                    cells.append(self._map(buf, nat.MAP_READ, off if buf is staging._ptr else 0, n))
            finally:
                err = self._hot_pop()
            if err is not None:
                raise DeviceFailure("submit", err, submitted)
        except DeviceFailure:
            if submitted and len(parts) > 1:
                self._drop_read_helper()
            raise
        finally:
            self._lock.release()
        return self._read_finish(src, staging, nbytes, deadline, t0, parts, cells, out, None, keep)

    def _read_finish(self, src: BufferHandle, staging: BufferHandle, nbytes: int, deadline: float,
                     t0: float, parts: list[tuple[Any, int, int]], cells: list[nat.MapCell],
                     out: np.ndarray | None, ahead: _Readahead | None, keep: bool = False) -> Any:
        """read(): wait for each part's map, copy it out and unmap it (lock not held).
        With ``keep`` (one part, the caller's staging): leave it mapped and return its address."""
        faults = self._faults
        t1 = _perf()
        t2 = t3 = t1
        copy_s = 0.0
        unmap_err: str | None = None
        done = 0  # parts whose mapping was consumed (copied and unmapped)
        try:
            if faults is not None and faults.hit("timeout"):
                raise DeviceFailure("timeout", "injected: the readback wait exceeded its deadline", True, True)
            for i, (buf, off, n) in enumerate(parts):
                self._wait(deadline, (cells[i],), "the readback")
                if i == 0:
                    t2 = _perf()
                    if faults is not None and faults.hit("lost"):
                        self._flags.lost = True
                        self._flags.lost_reason = "injected device loss"
                        raise DeviceFailure("lost", "injected: the device reports loss", True)
                with self._lock:
                    self._check_usable(True)
                    map_fault = i == 0 and faults is not None and faults.hit("map")
                    if cells[i].status != nat.STATUS_SUCCESS or map_fault:
                        raise DeviceFailure("map", "injected map failure" if map_fault else cells[i].message, True)
                    boff = off if buf is staging._ptr else 0
                    p = _const_mapped_range(buf, boff, n)
                    if p == _NULL:
                        raise DeviceFailure("map", "the mapped range is not available", True)
                    if keep:
                        staging.mapped = _addr(p)
                        done = 1
                        break
                    t3 = _perf()
                    if out is None:
                        out = np.empty(nbytes // 4, dtype=np.uint32)
                    if n < (1 << 20):
                        ffi.memmove(ffi.cast("char *", ffi.from_buffer(out)) + off, p, n)
                    else:
                        copy_bytes(out.__array_interface__["data"][0] + off, _addr(p), n, READ_COPY_THREADS)
                    copy_s += _perf() - t3
                    self._hot_push()
                    _unmap(buf)
                    err = self._hot_pop()
                    done = i + 1
                    if err is not None and unmap_err is None:
                        unmap_err = err
        except DeviceFailure:
            self._settle_read(parts[done:], cells[done:], staging, deadline, ahead)
            raise
        self.last_read_timing = {"submit": t1 - t0, "wait": t2 - t1, "copy": copy_s,
                                 "total": _perf() - t0, "parts": float(len(parts))}
        if keep:
            return staging.mapped
        if faults is not None and faults.hit("unmap"):
            unmap_err = unmap_err or "injected unmap failure"
        if ahead is not None:
            with self._lock:
                if unmap_err is None and not self._closed and len(self._readahead_idle) < READAHEAD_KEEP:
                    self._readahead_idle.append(ahead)
                elif not self._closed:
                    self._free_raw_buffer(ahead.ptr)
        if unmap_err is not None:
            if len(parts) > 1:
                self._drop_read_helper()
            raise DeviceFailure("unmap", unmap_err, True, data=out)
        assert out is not None
        return out

    def _read_parts(self, nbytes: int, staging: Any) -> list[tuple[Any, int, int]]:
        """Split a read into (buffer, offset, nbytes) parts: helpers first, the caller's staging last.

        Below READ_SPLIT_MIN, or if a helper cannot be allocated, one part
        through the caller's staging buffer.
        """
        k = READ_SPLIT_PARTS if nbytes >= READ_SPLIT_MIN else 1
        if k <= 1:
            return [(staging, 0, nbytes)]
        step = (nbytes // k + 255) & ~255
        need = [step] * (k - 1)
        helpers = self._read_helpers
        if len(helpers) != k - 1 or any(size < step for _, size in helpers):
            self._drop_read_helper()
            mark = self._push()
            made = [(self._raw_buffer(step, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST), step) for _ in need]
            if self._pop(mark) is not None:
                for ptr, _ in made:
                    self._free_raw_buffer(ptr)
                return [(staging, 0, nbytes)]
            helpers = self._read_helpers = made
        parts = [(ptr, i * step, step) for i, (ptr, _) in enumerate(helpers)]
        last = (k - 1) * step
        parts.append((staging, last, nbytes - last))
        return parts

    def _drop_read_helper(self) -> None:
        with self._lock:
            helpers, self._read_helpers = self._read_helpers, []
            if not self._closed:
                for ptr, _ in helpers:
                    self._free_raw_buffer(ptr)

    def _settle_read(self, parts: list[tuple[Any, int, int]], cells: list[nat.MapCell],
                     staging: BufferHandle, deadline: float, ahead: _Readahead | None = None) -> None:
        """After a failed read: unmap what did map (within the deadline), drop the helper."""
        try:
            self._wait(deadline, cells, "the readback cleanup")
        except DeviceFailure:
            pass
        with self._lock:
            if self._closed:
                return
            for (buf, off, n), cell in zip(parts, cells):
                if cell.status == nat.STATUS_SUCCESS:
                    _unmap(buf)
            del self._flags.errors[:]
            if ahead is not None:
                self._free_raw_buffer(ahead.ptr)
                return
        if len(parts) > 1 or (parts and parts[0][0] is not staging._ptr):
            self._drop_read_helper()

    def write(self, dst: BufferHandle, byte_offset: int, array: np.ndarray, timeout: float = 5.0) -> None:
        """Upload ``array`` into ``dst`` at ``byte_offset`` outside execute (the legacy path).

        The write is ordered before any later submission; it is not waited for.
        """
        deadline = _perf() + timeout
        faults = self._faults
        if not self._lock.acquire(timeout=max(0.0, timeout)):
            raise DeviceFailure("timeout", "the device lock was not free before the deadline", False, True)
        try:
            self._check_usable()
            if faults is not None and faults.hit("submit"):
                raise DeviceFailure("submit", "injected submission failure", False)
            arr = np.ascontiguousarray(array if isinstance(array, np.ndarray) else np.asarray(array, np.uint32))
            self._readahead_drop(dst.id)
            big = arr.nbytes > QUEUE_WRITE_MAX
            submitted = False
            enc = None
            self._hot_push()
            try:
                enc = _create_encoder(self._D, _NULL) if big else None
                _, st = self._record_uploads(enc, [(dst, int(byte_offset), arr)], deadline)
                if enc is not None:
                    cmd = _finish(enc, _NULL)
                    _release_encoder(enc)
                    enc = None
                    self._cmds[0] = cmd
                    _submit(self._Q, 1, self._cmds)
                    submitted = True
                    self._submissions += 1
                    _release_cmd(cmd)
                    self._remap_staging(st)
            finally:
                if enc is not None:
                    _release_encoder(enc)
                err = self._hot_pop()
            if err is not None:
                raise DeviceFailure("submit", err, submitted)
        finally:
            self._lock.release()

    # ---------------------------------------------------------------- state

    def is_lost(self) -> bool:
        """True once the device reported loss (or a "lost" fault was injected)."""
        return self._flags.lost

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> DeviceStats:
        st = self._staging
        return DeviceStats(
            live_buffers=len(self._buffers),
            live_bytes=self._live_bytes,
            allocations_total=self._allocations,
            pipeline_hits=self._pipeline_hits,
            pipeline_misses=self._pipeline_misses,
            pipelines_live=len(self._pipelines),
            bind_groups_live=len(self._bind_groups),
            bind_group_hits=self._bg_hits,
            bind_group_misses=self._bg_misses,
            internal_staging_bytes=(st.size if st is not None else 0)
            + (self._recycled_staging[1] if self._recycled_staging is not None else 0)
            + sum(size for _, size in self._read_helpers)
            + sum(ra.size for ra in [*self._readahead.values(), *self._readahead_idle])
            + sum(sg.size for sg in self._stages_live),
            submissions=self._submissions,
        )

    def trim(self) -> None:
        """Release the device's own spare buffers (upload staging and stages, read helper, recycled
        readback staging); call under memory pressure."""
        self._drop_read_helper()
        with self._lock:
            if self._closed:
                return
            st = self._staging
            if st is not None and (st.mapped or (st.cell is not None and st.cell.status)):
                self._staging = None
                self._free_raw_buffer(st.ptr)
            self._free_idle_stages()
            recycled, self._recycled_staging = self._recycled_staging, None
            if recycled is not None:
                self._free_raw_buffer(recycled[0])

    def close(self) -> None:
        """Release everything this device created; idempotent.

        Never waits on a thread blocked in execute: that thread notices the
        closed flag at its next poll and raises DeviceFailure("closed").  If a
        thread is stuck inside a native call for CLOSE_LOCK_SECONDS the native
        objects are left to the process exit instead of being freed under it.
        """
        if self._closed:
            return
        self._closed = True
        self._flags.closing = True
        if not self._lock.acquire(timeout=CLOSE_LOCK_SECONDS):
            _log.warning("GpuDevice.close: a native call did not return within %.1f s; "
                         "leaving its objects to process exit", CLOSE_LOCK_SECONDS)
            return
        try:
            for bg in self._bind_groups.values():
                lib.wgpuBindGroupRelease(bg)
            self._bind_groups.clear()
            for p in list(self._pipelines.values()):
                ptr, p._ptr = p._ptr, None
                if ptr is not None:
                    lib.wgpuComputePipelineRelease(ptr)
                    lib.wgpuPipelineLayoutRelease(p._layout)
                    lib.wgpuBindGroupLayoutRelease(p._bgl)
                    lib.wgpuShaderModuleRelease(p._module)
            self._pipelines.clear()
            for h in list(self._buffers.values()):
                ptr, h._ptr = h._ptr, None
                if ptr is not None:
                    self._free_raw_buffer(ptr)
            self._buffers.clear()
            self._live_bytes = 0
            st, self._staging = self._staging, None
            if st is not None:
                self._free_raw_buffer(st.ptr)
            helpers, self._read_helpers = self._read_helpers, []
            for ptr, _ in helpers:
                self._free_raw_buffer(ptr)
            if self._recycled_staging is not None:
                self._free_raw_buffer(self._recycled_staging[0])
                self._recycled_staging = None
            for ra in [*self._readahead.values(), *self._readahead_idle]:
                self._free_raw_buffer(ra.ptr)
            for sg in self._stages_live:
                sg.address = 0
                self._free_raw_buffer(sg._ptr)
            self._stages_live.clear()
            self._stages_idle.clear()
            self._readahead.clear()
            self._readahead_idle.clear()
            if self.has_timestamps:
                self._free_raw_buffer(self._ts_resolve)
                self._free_raw_buffer(self._ts_read)
                # No wgpuQuerySetDestroy: in wgpu-native 29 destroy + release panics (double registry removal).
                lib.wgpuQuerySetRelease(self._ts_query)
            lib.wgpuQueueRelease(self._Q)
            lib.wgpuDeviceDestroy(self._D)
            lib.wgpuDeviceRelease(self._D)
            self._adapter = None
        finally:
            self._lock.release()

    def __enter__(self) -> GpuDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("lost" if self._flags.lost else "open")
        return f"<GpuDevice {self.info.summary()} {state}>"


def _request_device(adapter: Any, want_timestamps: bool) -> tuple[Any, _Flags]:
    """Request a device on a wgpu-py adapter with the adapter's own limits and our callbacks."""
    A = adapter._internal
    flags = _Flags()
    limits = ffi.new("WGPULimits *")
    if lib.wgpuAdapterGetLimits(A, limits) != nat.STATUS_SUCCESS:
        raise GpuUnavailable("the adapter did not report its limits")

    @ffi.callback("void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)")
    def on_lost(dev: Any, reason: int, message: Any, u1: Any, u2: Any) -> None:
        if flags.closing:
            return
        try:
            text = nat.c_str(message)
        except Exception:
            text = ""
        flags.lost_reason = f"device lost (reason {int(reason)}): {text}".strip()
        flags.lost = True

    @ffi.callback("void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)")
    def on_error(dev: Any, etype: int, message: Any, u1: Any, u2: Any) -> None:
        try:
            text = nat.c_str(message)
        except Exception:
            text = "(unreadable error message)"
        flags.errors.append(f"{nat.ERROR_NAMES.get(int(etype), 'error')}: {text}")

    result: dict[str, Any] = {}

    @ffi.callback("void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)")
    def on_device(status: int, device: Any, message: Any, u1: Any, u2: Any) -> None:
        result["status"] = int(status)
        result["device"] = device
        try:
            result["message"] = nat.c_str(message)
        except Exception:
            result["message"] = ""

    _keepalive.extend((on_lost, on_error, on_device))
    desc = ffi.new("WGPUDeviceDescriptor *")
    feats = ffi.new("WGPUFeatureName[]", [lib.WGPUFeatureName_TimestampQuery] if want_timestamps else [0])
    desc.requiredFeatureCount = 1 if want_timestamps else 0
    desc.requiredFeatures = feats
    desc.requiredLimits = limits
    desc.deviceLostCallbackInfo.mode = lib.WGPUCallbackMode_AllowSpontaneous
    desc.deviceLostCallbackInfo.callback = on_lost
    desc.uncapturedErrorCallbackInfo.callback = on_error
    info = ffi.new("WGPURequestDeviceCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowProcessEvents
    info.callback = on_device
    try:
        lib.wgpuAdapterRequestDevice(A, desc, info[0])
        lib.wgpuInstanceProcessEvents(nat.get_wgpu_instance())
    except Exception as exc:
        raise GpuUnavailable(f"device request raised: {exc}") from exc
    if result.get("status") != nat.STATUS_SUCCESS or result.get("device") in (None, _NULL):
        raise GpuUnavailable(f"device request failed: {result.get('message') or result.get('status', 'no answer')}")
    return result["device"], flags
