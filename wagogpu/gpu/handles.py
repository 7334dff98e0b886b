"""The device layer's plain records: handles, plans, results and statistics.

Kept apart from the device so that the layers above can name them (and import ``wagogpu.gpu``)
without loading wgpu's native library: nothing here touches wgpu.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .natives import Native

__all__ = ["BufferKind", "BufferHandle", "PieceSink", "ComputePipeline", "ExecutePlan", "ExecuteResult", "DeviceStats",
           "UploadStage"]


class BufferKind(enum.StrEnum):
    """What a BufferHandle is for; each kind has its own usage flags and size limit."""

    STORAGE = "storage"  # bound to a kernel; copy source and destination
    UNIFORM = "uniform"  # the 16-byte parameter block at binding 0
    STAGING = "staging"  # the caller's readback buffer (map for reading)


class BufferHandle:
    """A device buffer of ``kind``; ``nbytes`` is its real size.

    ``mapped`` is the host address of a staging buffer that read_mapped() left mapped (0
    otherwise: its first segment's); it stays valid until unmap(), release() or the next read
    through it.
    ``_ptr`` is the backend's buffer object (None once released), ``_native`` its registration
    in the device's NativeSet.

    A staging buffer made in pieces (create_staging(nbytes, pieces=k)) is k device buffers, one
    per consecutive byte range: a read copies and maps each in its own submission, so the first
    pieces can be read out while the later ones are still crossing PCIe. ``pieces`` lists
    (offset, bytes, native) for every piece (the first is ``_native``); ``segments`` lists
    (offset, host address, bytes) of each piece read_mapped() left mapped: the mapped words are
    contiguous per piece only, so a reader of a pieced staging goes by ``segments``.
    """

    __slots__ = ("id", "kind", "nbytes", "_ptr", "_native", "pieces", "segments", "__weakref__")

    def __init__(self, id: int, kind: BufferKind, nbytes: int, native: Any,
                 pieces: tuple[tuple[int, int, Any], ...] = ()) -> None:
        self.id = id
        self.kind = kind
        self.nbytes = nbytes
        self._native = native
        self._ptr = native.obj
        self.pieces = pieces or ((0, nbytes, native),)
        self.segments: tuple[tuple[int, int, int], ...] = ()

    @property
    def mapped(self) -> int:
        segments = self.segments
        return segments[0][1] if segments else 0

    @property
    def released(self) -> bool:
        return self._ptr is None

    def __repr__(self) -> str:
        state = " released" if self._ptr is None else ""
        return f"<BufferHandle {self.id} {self.kind} {self.nbytes} B{state}>"


class PieceSink(Protocol):
    """Who hears of a read_mapped() through a pieced staging, piece by piece, in order.

    ``submitted(pieces)`` comes once, after every piece's copy was submitted and before the first
    wait, with each piece's (offset, bytes) (the caller may prepare the first piece's destination
    while it crosses PCIe); ``piece()``
    comes for each piece as soon as it is mapped, with its offset in the source, its host address
    and bytes. ``final`` is True once every later piece is mapped as well: from there on the read
    cannot fail. A read that fails after some ``piece()`` calls raises DeviceFailure, and the
    sink must undo whatever it published from those pieces."""

    def submitted(self, pieces: Sequence[tuple[int, int]]) -> None: ...

    def piece(self, offset: int, address: int, nbytes: int, final: bool) -> None: ...


class ComputePipeline:
    """A compute pipeline with its explicit layout: uniform at binding 0, storage at 1..N."""

    __slots__ = ("id", "key", "bindings", "_ptr", "_bgl", "_natives", "__weakref__")

    def __init__(self, id: int, key: tuple[Any, ...], bindings: tuple[bool, ...], natives: Sequence[Any]) -> None:
        """``natives``: the pipeline, its bind group layout, pipeline layout and shader module."""
        self.id = id
        self.key = key
        self.bindings = bindings
        self._natives = tuple(natives)
        self._ptr = natives[0].obj
        self._bgl = natives[1].obj

    @property
    def released(self) -> bool:
        return self._ptr is None

    def __repr__(self) -> str:
        return f"<ComputePipeline {self.id} bindings={len(self.bindings)}{' released' if self._ptr is None else ''}>"


@dataclass(slots=True)
class ExecutePlan:
    """One GPU dispatch transaction (docs/design/abi.md §4.6 step 6).

    ``uploads`` are (buffer, byte_offset, array or UploadStage) written before the seeds (a
    stage is consumed: the plan's submission re-maps it for a later stage(), a failure frees it);
    ``seeds`` are (src, dst, byte_offset, nbytes) device copies at the same
    offset in both buffers, recorded before the compute pass; ``workgroups``
    (x, y) is the grid (x, y ≤ max-compute-workgroups-per-dimension).
    ``readahead`` (extension): storage buffers (each at most the device's
    ``tuning.readahead_max_bytes``) whose final
    contents are copied to mapped read buffers in the same submission, for a following read();
    ignored with ``separate_stages``.
    ``timestamps`` (extension): measure the compute pass with GPU timestamps
    (device_compute_s).  None, the default, means "in profile mode", i.e.
    when ``separate_stages`` is set: the timestamp resolve and readback add
    ~40 us to a dispatch on the H200, nearly doubling a resident dispatch.
    """

    pipeline: ComputePipeline
    uniform: BufferHandle
    params: bytes | None = None
    storage: Sequence[BufferHandle] = ()
    uploads: Sequence[tuple[BufferHandle, int, np.ndarray | UploadStage]] = ()
    seeds: Sequence[tuple[BufferHandle, BufferHandle, int, int]] = ()
    workgroups: tuple[int, int] = (1, 1)
    separate_stages: bool = False
    timestamps: bool | None = None
    readahead: Sequence[BufferHandle] = ()
    #: The bind group the device last found for these handles (set by the device): a kept plan
    #: uses it again while it lives, without building the cache key.
    group: Native | None = field(default=None, init=False, compare=False, repr=False)


@dataclass(slots=True)
class ExecuteResult:
    """Timings of one execute, in seconds of host wall time unless named device_.

    In one-submission mode ``upload_s`` is the host time to stage the upload
    bytes, ``seed_s`` the time to record the seed copies and ``compute_s``
    from submission to completion (it includes the GPU side of the copies).
    With ``separate_stages`` each is its own waited submission.
    ``device_compute_s`` is the compute pass measured by GPU timestamps.
    ``submitted``: the work reached the queue; ``hardware_submitted``: and the
    adapter is a hardware one (False on lavapipe).
    """

    upload_s: float
    seed_s: float
    compute_s: float
    total_s: float
    device_compute_s: float | None
    hardware_submitted: bool
    submitted: bool = True
    upload_bytes: int = 0
    seed_bytes: int = 0


@dataclass(slots=True)
class DeviceStats:
    """A snapshot of what the device holds and has done."""

    live_buffers: int
    live_bytes: int
    allocations_total: int
    pipeline_hits: int
    pipeline_misses: int
    pipelines_live: int
    bind_groups_live: int
    bind_group_hits: int
    bind_group_misses: int
    internal_staging_bytes: int
    submissions: int
    #: Buffers the device's pool created for itself (upload and readback helpers, read-ahead copies).
    pool_allocations: int = 0


class UploadStage:
    """A mapped upload buffer the caller fills before the dispatch that uploads it (extension).

    From stage() until it is passed in an ExecutePlan upload (which consumes it) or handed back
    with unstage(), the caller owns it and may write ``nbytes`` bytes at ``address``.  Filling it
    while copying into the CPU copy overlaps the PCIe write with the host copy.
    """

    __slots__ = ("_entry", "_ptr", "_window", "size", "nbytes", "address")

    def __init__(self, entry: Any, nbytes: int, address: int, window: Any) -> None:
        self._entry = entry  # the pool's PooledBuffer behind it
        self._ptr = entry.obj
        self._window = window  # the backend's keep-alive for the writable window at ``address``
        self.size = entry.size  # allocated bytes
        self.nbytes = nbytes  # bytes the caller asked for
        self.address = address  # host address the caller may write while it owns the stage (else 0)

    def __repr__(self) -> str:
        return f"<UploadStage {self.nbytes}/{self.size} B{' mapped' if self.address else ''}>"
