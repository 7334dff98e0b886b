"""The small interface the device's logic is written against (api.py chooses between its two
implementations).

``_native.py`` implements it on wgpu-native's C API through wgpu-py's cffi handle, with
pre-built structs and entry points looked up once (the fast path, tested with wgpu-py 0.32);
``_public.py`` on wgpu-py's public API (slower, and only what that API offers: no GPU
timestamps, no device-loss report).  The pool, transfers, execute and waits above it are the
same for both.  Backend objects (buffers, pipelines, encoders) are opaque to the device.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import wgpu

from .adapters import AdapterInfo, BackendName
from .natives import Native, NativeSet

__all__ = ["DeviceApi", "Backend", "BackendError", "BackendFlags", "MapCell", "CELL_OK", "Usage", "LIMIT_NAMES",
           "BackendModule", "PUBLIC_ENV"]

#: Set to 1 to run every device on wgpu-py's public API.
PUBLIC_ENV = "WAGOGPU_PUBLIC_WGPU"
#: MapCell.status of a resolved map or fence (wgpu-native's *_Success); other non-zero values fail.
CELL_OK = 1
#: The limits a device reports in ``GpuDevice.limits`` (wgpu's hyphenated names).
LIMIT_NAMES = ("max-buffer-size", "max-storage-buffer-binding-size", "max-storage-buffers-per-shader-stage",
               "max-bindings-per-bind-group", "max-compute-workgroups-per-dimension",
               "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
               "max-uniform-buffer-binding-size")


class DeviceApi(enum.StrEnum):
    """Which implementation of the backend interface a device runs on."""

    RAW = "raw"  # wgpu-native's C API (wgpu-py 0.32's cffi handle)
    PUBLIC = "public"  # wgpu-py's public API


class Usage(enum.IntFlag):
    """The buffer usages the device creates, from wgpu's own flags."""

    STORAGE = int(wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)
    UNIFORM = int(wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    READBACK = int(wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
    UPLOAD = int(wgpu.BufferUsage.MAP_WRITE | wgpu.BufferUsage.COPY_SRC)
    QUERY_RESOLVE = int(wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    RING = int(wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)  # pending batches' small uploads


class BackendError(Exception):
    """A resource could not be created; nothing of it is left allocated.  ``str()`` is wgpu's report."""


class MapCell:
    """Result slot of one map or work-done fence: ``status`` 0 until it resolved, then CELL_OK
    or a failure status with ``message``."""

    __slots__ = ("key", "status", "message")

    def __init__(self, key: int) -> None:
        self.key = key
        self.status = 0
        self.message = ""


@dataclass
class BackendFlags:
    """State the backend's callbacks write; kept apart so callbacks hold no device reference."""

    lost: bool = False
    lost_reason: str = ""
    closing: bool = False
    #: Errors wgpu reported outside an error scope, in order (the hot paths read and clear it).
    errors: list[str] = field(default_factory=list)


class Backend(abc.ABC):
    """One open wgpu device, as the device's logic sees it.

    Creation calls are checked (error scopes or exceptions) and raise BackendError (PipelineError
    for pipelines) with nothing left allocated; every object they make is registered in
    ``natives``.  Recording calls do not raise: wgpu reports their errors synchronously and they
    land in ``flags.errors``, which the caller checks after the submission.  None of it is
    thread-safe: the device calls it under its lock.
    """

    api: DeviceApi
    flags: BackendFlags
    natives: NativeSet
    limits: dict[str, int]
    has_timestamps: bool
    has_f64: bool = False  # the device has adapters.F64_FEATURES
    submissions: int = 0

    # -- resources
    @abc.abstractmethod
    def create_buffer(self, size: int, usage: int, mapped: bool = False) -> Native: ...

    @abc.abstractmethod
    def create_pipeline(self, wgsl: str, read_only: tuple[bool, ...], entry_point: str) -> tuple[Native, ...]:
        """(pipeline, bind group layout, pipeline layout, shader module); raises PipelineError."""

    @abc.abstractmethod
    def create_bind_group(self, layout: Any, uniform: Any, storage: Sequence[Any]) -> Native: ...

    # -- recording and the one submit helper
    @abc.abstractmethod
    def write_buffer(self, buf: Any, offset: int, data: np.ndarray | bytes, nbytes: int) -> None:
        """Queue write (ordered before the next submission; data is copied before it returns)."""

    #: A new command encoder (an attribute: on the raw backend the C function itself, no Python frame).
    encoder: Callable[[], Any]
    #: copy(enc, src, src_offset, dst, dst_offset, nbytes): record a buffer-to-buffer copy.
    copy: Callable[[Any, Any, int, Any, int, int], Any]
    #: Let the device run resolved callbacks; never blocks.
    poll: Callable[[], Any]

    @abc.abstractmethod
    def dispatch(self, enc: Any, pipeline: Any, bind_group: Any, gx: int, gy: int, timestamps: bool) -> None:
        """One compute pass of gx x gy workgroups (timestamped, resolved and copied out when asked)."""

    # A pending batch keeps one compute pass open over several dispatches (no copy between them).
    @abc.abstractmethod
    def begin_pass(self, enc: Any) -> Any:
        """Open a compute pass on ``enc`` (no timestamps); nothing else may be recorded on ``enc``
        until end_pass."""

    @abc.abstractmethod
    def pass_dispatch(self, cp: Any, pipeline: Any, bind_group: Any, gx: int, gy: int) -> None:
        """Record one dispatch in an open pass; ``pipeline`` or ``bind_group`` None: keep the one set."""

    @abc.abstractmethod
    def end_pass(self, cp: Any) -> None:
        """End and release an open pass."""

    @abc.abstractmethod
    def submit(self, enc: Any) -> None:
        """Finish, submit and release ``enc``: the one place work reaches the queue."""

    @abc.abstractmethod
    def fence(self) -> MapCell:
        """A cell that resolves once all work submitted so far is done."""

    @abc.abstractmethod
    def drop_encoder(self, enc: Any) -> None:
        """Release an encoder that will not be submitted."""

    # -- mapping
    @abc.abstractmethod
    def map(self, buf: Any, write: bool, offset: int, size: int) -> MapCell: ...

    @abc.abstractmethod
    def forget(self, cell: MapCell) -> None:
        """The cell's callback is no longer wanted (its buffer is being freed)."""

    @abc.abstractmethod
    def read_address(self, buf: Any, offset: int, size: int) -> int:
        """Host address of a buffer mapped for reading (0: not available); valid until unmap."""

    @abc.abstractmethod
    def write_window(self, buf: Any, size: int) -> tuple[int, Any]:
        """(host address, keep-alive) of ``size`` writable bytes for a buffer mapped for writing."""

    @abc.abstractmethod
    def flush_window(self, buf: Any, window: Any, nbytes: int) -> None:
        """Make the first ``nbytes`` written through ``window`` the buffer's contents (before unmap)."""

    #: End a buffer's mapping (an attribute, like copy).
    unmap: Callable[[Any], Any]

    # -- timestamps (has_timestamps only)
    @abc.abstractmethod
    def timestamp_cell(self) -> MapCell:
        """After a submission whose dispatch took timestamps: map them for reading."""

    @abc.abstractmethod
    def timestamp_seconds(self) -> float | None:
        """The timestamped pass's device time once timestamp_cell() resolved (None: unusable)."""

    @abc.abstractmethod
    def reset_timestamps(self) -> None:
        """After a failure: drop timestamp state that may be pending."""

    @abc.abstractmethod
    def close(self) -> None:
        """Free every registered native object, then the device itself."""


class BackendModule(Protocol):
    """What each backend module offers: adapter enumeration and device opening."""

    def enumerate_adapters(self, backends: frozenset[BackendName] | None) -> list[tuple[Any, AdapterInfo]]:
        """The adapters of ``backends`` (None: every backend, in list_adapters() order)."""

    def open_backend(self, adapter: Any, info: AdapterInfo) -> Backend:
        """Request a device on an enumerated adapter; raises GpuUnavailable."""
