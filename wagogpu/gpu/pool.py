"""The device's one pool of helper buffers, keyed by kind and size, with one keep policy.

Two kinds of buffer serve the transfers: UPLOAD buffers (map-write, copy source) carry large
uploads and the upload stages the caller fills, READBACK buffers (map-read, copy destination)
carry read-ahead copies and the caller's released readback staging.  Creating and freeing them
is what costs (on the H200 host up to ~30 ms to create and ~6 ms to free a 40 MB buffer), so a
buffer done with goes back here and the next request of its kind and about its size takes it.

The keep policy: at most ``tuning.pool_keep_buffers`` idle buffers of each kind and
``tuning.pool_keep_bytes`` idle bytes in all; past either the oldest idle ones are freed (a
buffer larger than the byte cap is never kept).  Idle upload buffers are mapped, or on their way
back to mapped (``cell``: the re-map requested right after the submission that used them, which
resolves while that submission runs); idle readback buffers are unmapped.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from .backend import CELL_OK, BackendError, MapCell, Usage
from .core import DeviceCore
from .natives import Native

__all__ = ["PoolKind", "PooledBuffer", "BufferPool", "size_class"]

#: Smallest pooled buffer: sizes round up to 4 KiB pages at least.
_PAGE = 4096


class PoolKind(enum.StrEnum):
    UPLOAD = "upload"
    READBACK = "readback"


_USAGE = {PoolKind.UPLOAD: Usage.UPLOAD, PoolKind.READBACK: Usage.READBACK}


def size_class(nbytes: int) -> int:
    """The size a pooled buffer for ``nbytes`` is created with: a multiple of 4 KiB and of an
    eighth of the size's power of two, so a request is never rounded up by more than 12.5%
    (and slightly different sizes share a buffer)."""
    step = max(_PAGE, 1 << max(0, nbytes.bit_length() - 4))
    return -(-nbytes // step) * step


class PooledBuffer:
    """A helper buffer the pool created or adopted; ``cell`` is its pending re-map, if any."""

    __slots__ = ("native", "size", "kind", "cell")

    def __init__(self, native: Native, size: int, kind: PoolKind) -> None:
        self.native = native
        self.size = size
        self.kind = kind
        self.cell: MapCell | None = None

    @property
    def obj(self) -> Any:
        return self.native.obj

    def __repr__(self) -> str:
        return f"<PooledBuffer {self.kind} {self.size} B{' pending' if self.cell is not None else ''}>"


class BufferPool:
    """Idle helper buffers and the accounting of every one the pool owns (idle or lent out).
    Called under the device lock."""

    def __init__(self, core: DeviceCore) -> None:
        self._core = core
        self._backend = core.backend
        self._idle: OrderedDict[int, PooledBuffer] = OrderedDict()  # oldest first
        self._owned: dict[int, PooledBuffer] = {}  # idle and lent out
        self._forget_idle()
        self.allocations = 0

    # -------------------------------------------------------------- lending

    def take(self, kind: PoolKind, nbytes: int, exact: bool = False) -> PooledBuffer | None:
        """The smallest idle buffer of ``kind`` that fits ``nbytes`` (at most twice its size
        class; exactly ``nbytes`` with ``exact``), now lent out; None when there is none."""
        most = nbytes if exact else 2 * size_class(nbytes)
        best = None
        for entry in self._idle.values():
            if entry.kind is kind and nbytes <= entry.size <= most and (best is None or entry.size < best.size):
                best = entry
        if best is not None:
            self._unpark(best)
        return best

    def create(self, kind: PoolKind, nbytes: int, exact: bool = False) -> PooledBuffer:
        """A new buffer of ``kind``, lent out (upload buffers are created mapped); BackendError."""
        size = nbytes if exact else size_class(nbytes)
        if size > self._backend.limits["max-buffer-size"]:
            raise BackendError(f"{size} bytes exceed max-buffer-size")
        native = self._backend.create_buffer(size, _USAGE[kind], mapped=kind is PoolKind.UPLOAD)
        self.allocations += 1
        entry = PooledBuffer(native, size, kind)
        self._owned[id(entry)] = entry
        return entry

    def mapped_upload(self, nbytes: int, deadline: float, what: str) -> PooledBuffer:
        """An upload buffer of at least ``nbytes``, mapped: an idle one once its re-map resolved
        (waiting for it until ``deadline``; DeviceFailure), else a new one (BackendError)."""
        entry = self.take(PoolKind.UPLOAD, nbytes)
        while entry is not None and entry.cell is not None:
            cell = entry.cell
            if not cell.status:
                try:
                    self._core.wait(deadline, (cell,), what)
                except BaseException:
                    self.free(entry)
                    raise
            entry.cell = None
            if cell.status != CELL_OK:
                self.free(entry)
                entry = self.take(PoolKind.UPLOAD, nbytes)
        return entry if entry is not None else self.create(PoolKind.UPLOAD, nbytes)

    def adopt(self, entry: PooledBuffer) -> Native:
        """Hand a lent buffer over for good (it becomes a caller's handle): the pool forgets it."""
        self._owned.pop(id(entry), None)
        return entry.native

    # -------------------------------------------------------------- returning

    def give(self, entry: PooledBuffer) -> None:
        """A buffer its user is done with: kept idle by the keep policy, or freed."""
        if self._core.closed or entry.obj is None or entry.size > self._core.tuning.pool_keep_bytes:
            self.free(entry)
            return
        self._owned[id(entry)] = entry
        self._park(entry)
        self._evict(entry.kind)

    def _evict(self, kind: PoolKind) -> None:
        """Free the oldest idle buffers until the keep policy holds again: those of ``kind`` past
        the count, then the oldest of any kind while the idle bytes are over the cap."""
        tuning = self._core.tuning
        over = self._idle_count[kind] - tuning.pool_keep_buffers
        if over > 0:
            for old in self.idle(kind)[:over]:
                self.free(old)
        while self._idle_bytes > tuning.pool_keep_bytes and self._idle:
            self.free(next(iter(self._idle.values())))

    def _forget_idle(self) -> None:
        """No idle buffer. The keep policy's counts (asked on every give) are kept as _idle changes:
        here, _park and _unpark."""
        self._idle.clear()
        self._idle_bytes = 0
        self._idle_count = dict.fromkeys(PoolKind, 0)

    def _park(self, entry: PooledBuffer) -> None:
        """``entry`` idle (the newest), counted."""
        if id(entry) not in self._idle:
            self._idle[id(entry)] = entry
            self._idle_bytes += entry.size
            self._idle_count[entry.kind] += 1

    def _unpark(self, entry: PooledBuffer) -> None:
        """``entry`` no longer idle (if it was), uncounted."""
        if self._idle.pop(id(entry), None) is not None:
            self._idle_bytes -= entry.size
            self._idle_count[entry.kind] -= 1

    def give_remapped(self, entry: PooledBuffer) -> None:
        """An upload buffer whose submission was just made: ask for it mapped again (it resolves
        while the submission runs) and keep it idle (or free it, by the keep policy)."""
        entry.cell = self._backend.map(entry.obj, True, 0, entry.size)
        self.give(entry)

    def free(self, entry: PooledBuffer) -> None:
        """Free a buffer now, idle or lent (its pending map, if any, is forgotten first)."""
        self._unpark(entry)
        self._owned.pop(id(entry), None)
        if entry.cell is not None:
            if not entry.cell.status:
                self._core.forget_map(entry.cell)
            entry.cell = None
        self._core.natives.release(entry.native)

    def discard(self, entries: Iterable[PooledBuffer]) -> None:
        """After a failed submission: free those of ``entries`` still idle here (their state is
        unknown); one another user took meanwhile is that user's to check."""
        for entry in entries:
            if id(entry) in self._idle:
                self.free(entry)

    def close(self) -> None:
        """The device is closing (its NativeSet frees the buffers): forget them all."""
        self._forget_idle()
        self._owned.clear()

    def trim(self) -> None:
        """Free every idle buffer (memory pressure)."""
        for entry in list(self._idle.values()):
            self.free(entry)

    # -------------------------------------------------------------- accounting

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes

    @property
    def owned_bytes(self) -> int:
        """Bytes of every buffer the pool owns, idle or lent out (DeviceStats.internal_staging_bytes);
        safe to read without the device lock."""
        return sum(e.size for e in list(self._owned.values()))

    def idle(self, kind: PoolKind) -> list[PooledBuffer]:
        return [e for e in self._idle.values() if e.kind is kind]

    def holds(self, native: Native) -> bool:
        """Whether ``native`` is one of the pool's idle buffers."""
        return any(e.native is native for e in self._idle.values())
