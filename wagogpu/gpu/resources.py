"""The caller's buffers: storage, uniform and readback staging handles, created checked and
released once.

Sizes round up to a multiple of 4 bytes (``handle.nbytes`` is the real size); a size that is not
a positive integer or exceeds the kind's device limit is a DeviceAllocationError before any
device call.  A released staging buffer goes to the pool, and the next create_staging() of the
same size takes it back (a budget-bound host re-creates its staging on every readback).
Called under the device lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backend import BackendError, Usage
from .core import DeviceCore
from .errors import DeviceAllocationError, FailureStage
from .handles import BufferHandle, BufferKind
from .pool import BufferPool, PooledBuffer, PoolKind

__all__ = ["BufferTable", "piece_ranges"]

#: Piece boundaries fall on multiples of this (copy offsets need 4; 256 keeps the host copies'
#: pieces aligned).
_PIECE_ALIGN = 256


def piece_ranges(nbytes: int, pieces: int, piece_min: int) -> list[tuple[int, int]]:
    """(offset, bytes) of each piece of an ``nbytes`` staging split in at most ``pieces`` pieces of
    at least ``piece_min`` bytes (a smaller piece costs a submission for little overlap)."""
    parts = max(1, min(pieces, nbytes // max(1, piece_min)))
    step = ((nbytes + parts - 1) // parts + _PIECE_ALIGN - 1) // _PIECE_ALIGN * _PIECE_ALIGN
    return [(offset, min(step, nbytes - offset)) for offset in range(0, nbytes, step)]

_USAGE = {BufferKind.STORAGE: Usage.STORAGE, BufferKind.UNIFORM: Usage.UNIFORM, BufferKind.STAGING: Usage.READBACK}
#: The device limit that bounds each kind's size.
_LIMITS: dict[BufferKind, Callable[[dict[str, int]], int]] = {
    BufferKind.STORAGE: lambda lim: min(lim["max-buffer-size"], lim["max-storage-buffer-binding-size"]),
    BufferKind.UNIFORM: lambda lim: lim["max-uniform-buffer-binding-size"],
    BufferKind.STAGING: lambda lim: lim["max-buffer-size"],
}


class BufferTable:
    """Every live BufferHandle of one device, and its byte and allocation counts."""

    def __init__(self, core: DeviceCore, pool: BufferPool) -> None:
        self._core = core
        self._pool = pool
        self._limits = {kind: limit(core.backend.limits) for kind, limit in _LIMITS.items()}
        self._handles: dict[int, BufferHandle] = {}
        self.live_bytes = 0
        self.allocations = 0

    def create(self, kind: BufferKind, nbytes: int, pieces: int = 1, piece_min: int = 1) -> BufferHandle:
        """A buffer of ``kind``; a staging buffer with ``pieces`` > 1 is made of up to that many
        device buffers of at least ``piece_min`` bytes each (BufferHandle.pieces)."""
        core = self._core
        size = self._checked_size(kind, nbytes)
        if core.closed or core.flags.lost:
            raise DeviceAllocationError(f"cannot allocate a {kind} buffer: device "
                                        f"{'closed' if core.closed else 'lost'}", size)
        if core.hit(FailureStage.ALLOC):
            raise DeviceAllocationError(f"injected allocation failure ({kind}, {nbytes} bytes)", size)
        made: list[tuple[int, int, Any]] = []
        try:
            for offset, n in piece_ranges(size, pieces if kind is BufferKind.STAGING else 1, piece_min):
                made.append((offset, n, self._native(kind, n)))
        except DeviceAllocationError:
            for _offset, n, native in made:
                self._pool.give(PooledBuffer(native, n, PoolKind.READBACK))
            raise
        handle = BufferHandle(core.new_id(), kind, size, made[0][2], tuple(made) if len(made) > 1 else ())
        self._handles[handle.id] = handle
        self.live_bytes += size
        return handle

    def _native(self, kind: BufferKind, size: int) -> Any:
        """One device buffer: a pooled staging of exactly this size, or a new one."""
        recycled = self._pool.take(PoolKind.READBACK, size, exact=True) if kind is BufferKind.STAGING else None
        if recycled is not None:
            return self._pool.adopt(recycled)
        try:
            native = self._core.backend.create_buffer(size, _USAGE[kind])
        except BackendError as exc:
            raise DeviceAllocationError(f"{kind} buffer of {size} bytes: {exc}", size) from None
        self.allocations += 1
        return native

    def _checked_size(self, kind: BufferKind, nbytes: int) -> int:
        try:
            n = int(nbytes)
        except (TypeError, ValueError):
            raise DeviceAllocationError(f"{kind} buffer size must be an integer, not {nbytes!r}") from None
        if n <= 0:
            raise DeviceAllocationError(f"{kind} buffer of {n} bytes: size must be positive", n)
        size = (n + 3) & ~3
        if size > self._limits[kind]:
            raise DeviceAllocationError(f"{kind} buffer of {n} bytes exceeds the device limit of "
                                        f"{self._limits[kind]} bytes", n)
        return size

    def release(self, handle: BufferHandle) -> bool:
        """Forget a handle; False when it was not live here (released before, or the device closed).
        The caller has dropped whatever else refers to it; a staging buffer is unmapped and pooled."""
        handle._ptr = None
        segments, handle.segments = handle.segments, ()
        if self._handles.pop(handle.id, None) is None or self._core.closed:
            return False
        self.live_bytes -= handle.nbytes
        if handle.kind is BufferKind.STAGING and not self._core.flags.lost:
            if segments:  # the pieces read_mapped mapped (all those the read covered)
                for _offset, _n, native in handle.pieces[:len(segments)]:
                    self._core.backend.unmap(native.obj)
            for _offset, n, native in handle.pieces:
                self._pool.give(PooledBuffer(native, n, PoolKind.READBACK))
        else:
            for _offset, _n, native in handle.pieces:
                self._core.natives.release(native)
        return True

    @property
    def live(self) -> int:
        return len(self._handles)

    def limit(self, kind: BufferKind) -> int:
        return self._limits[kind]

    def close(self) -> None:
        """The device is closing (its NativeSet frees the buffers): mark every handle released."""
        for handle in self._handles.values():
            handle._ptr = None
            handle.segments = ()
        self._handles.clear()
        self.live_bytes = 0
