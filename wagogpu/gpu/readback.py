"""Getting bytes off the device: readback through the caller's staging buffer, readbacks left
mapped for the caller (park), and read-ahead copies.

A read copies the source into the caller's staging buffer, maps it (the map is the fence) and
copies the words out with several threads, or, with read_mapped(), leaves them mapped there and
returns their address.  A read-ahead copy is taken inside a dispatch's own submission (see
ExecutePlan.readahead) into a pooled buffer that is mapped once the dispatch is done, so the
read right after it needs no submission and no second wait; anything that may write the source
first drops the copy.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..memcopy import copy_bytes
from .backend import CELL_OK, BackendError, MapCell
from .core import DeviceCore
from .errors import DeviceFailure, FailureStage
from .handles import BufferHandle, BufferKind, ExecutePlan, PieceSink
from .pool import BufferPool, PooledBuffer, PoolKind

__all__ = ["Readback"]

#: One piece of a read in flight: (offset in the source, bytes, the buffer it lands in, its map).
_Part = tuple[int, int, Any, MapCell]



class Readback:
    """Readbacks and read-ahead copies of one device."""

    def __init__(self, core: DeviceCore, pool: BufferPool) -> None:
        self._core = core
        self._pool = pool
        #: Read-ahead copies: source buffer id -> (pooled buffer, bytes copied); its cell is the map.
        self.copies: dict[int, tuple[PooledBuffer, int]] = {}
        #: Dropped copies whose map was still pending when they were dropped (see drop).
        self.retired: list[PooledBuffer] = []
        self.hits = 0

    # -------------------------------------------------------------- read-ahead (lock held)

    def invalidate(self, plan: ExecutePlan) -> None:
        """Drop the copies of every buffer ``plan``'s submission may write."""
        copies = self.copies  # (asked per handle, plain loops: this runs on every dispatch with copies)
        for h in plan.storage:
            if h.id in copies:
                self.drop(h.id)
        for up in plan.uploads:
            if up[0].id in copies:
                self.drop(up[0].id)
        for seed in plan.seeds:
            if seed[1].id in copies:
                self.drop(seed[1].id)

    def record_ahead(self, enc: Any, handles: Sequence[BufferHandle]) -> list[tuple[BufferHandle, PooledBuffer]]:
        """Record a copy of each small enough live handle into a pooled readback buffer."""
        most = self._core.tuning.readahead_max_bytes
        self.reclaim()
        taken = []
        for h in handles:
            if h._ptr is None or h.nbytes > most:
                continue
            entry = self._pool.take(PoolKind.READBACK, h.nbytes)
            if entry is None:
                try:
                    entry = self._pool.create(PoolKind.READBACK, h.nbytes)
                except BackendError:
                    continue  # an optimisation only: the read will submit its own copy
            self._core.backend.copy(enc, h._ptr, 0, entry.obj, 0, h.nbytes)
            taken.append((h, entry))
        return taken

    def ahead_submitted(self, taken: list[tuple[BufferHandle, PooledBuffer]]) -> list[MapCell]:
        """The copies are submitted: map each (it resolves when the dispatch is done)."""
        cells = []
        backend = self._core.backend
        for h, entry in taken:
            entry.cell = cell = backend.map(entry.obj, False, 0, h.nbytes)
            self.copies[h.id] = (entry, h.nbytes)
            cells.append(cell)
        return cells

    def drop(self, buf_id: int, keep: bool = True) -> None:
        """Forget buffer ``buf_id``'s copy; its pooled buffer goes back unless its state is unknown.
        A copy whose map is still pending (a submitted pipelined batch) is retired instead: the
        batch's wait counts on that map, so it stays registered, and its buffer goes back once the
        map resolved (reclaim) rather than being destroyed under the pending map."""
        item = self.copies.pop(buf_id, None)
        if item is None:
            return
        entry = item[0]
        cell = entry.cell
        if keep and cell is not None and not cell.status:
            self.retired.append(entry)
            return
        self._release(entry, keep)

    def _release(self, entry: PooledBuffer, keep: bool) -> None:
        cell, entry.cell = entry.cell, None
        if cell is not None and not cell.status:  # never resolved (a failed or abandoned submission)
            self._core.forget_map(cell)
            keep = False
        elif cell is not None and cell.status == CELL_OK:
            self._core.backend.unmap(entry.obj)
        (self._pool.give if keep else self._pool.free)(entry)

    def reclaim(self) -> None:
        """Give back the retired copies whose map has resolved (lock held)."""
        if not self.retired:
            return
        waiting = [entry for entry in self.retired if entry.cell is not None and not entry.cell.status]
        for entry in self.retired:
            if entry.cell is None or entry.cell.status:
                self._release(entry, True)
        self.retired = waiting

    def drop_all(self) -> None:
        """After a failure: every copy's state is unknown; their buffers are freed."""
        for buf_id in list(self.copies):
            self.drop(buf_id, keep=False)
        retired, self.retired = self.retired, []
        for entry in retired:
            self._release(entry, False)

    def _take_copy(self, src: BufferHandle, nbytes: int, keep: bool) -> PooledBuffer | None:
        """The resolved copy of ``src`` that can serve this read (lock held), or None."""
        item = self.copies.pop(src.id, None)
        if item is None:
            return None
        entry, copied = item
        cell = entry.cell
        if keep or copied < nbytes or cell is None or cell.status != CELL_OK:
            self.copies[src.id] = item
            self.drop(src.id)
            return None
        self.hits += 1
        return entry

    # -------------------------------------------------------------- reads

    def read(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
             out: np.ndarray | None = None) -> np.ndarray:
        """Copy ``nbytes`` of ``src`` through the caller's ``staging`` buffer into a uint32 array:
        a fresh one, or ``out`` (a writable C-contiguous array of exactly ``nbytes`` bytes) filled
        in place.  On an unmap failure after the copy the DeviceFailure carries the data.  Through
        a pieced staging each piece is copied out as soon as it is mapped; on a failure ``out``
        may hold some pieces (it is the caller's private array: nothing is published)."""
        words: np.ndarray = self._read(src, staging, nbytes, timeout, out, False, None)
        return words

    def read_mapped(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
                    sink: PieceSink | None = None) -> int:
        """Read like read(), but leave the words in ``staging``, mapped: returns their host address
        (also ``staging.mapped``; ``staging.segments`` per piece), valid until unmap(staging),
        release(staging) or the next read through it.  ``sink`` hears of each piece as it maps
        (see PieceSink); if the read fails, every piece is unmapped again."""
        address: int = self._read(src, staging, nbytes, timeout, None, True, sink)
        return address

    def _read(self, src: BufferHandle, staging: BufferHandle, nbytes: int, timeout: float,
              out: np.ndarray | None, keep: bool, sink: PieceSink | None) -> Any:
        core = self._core
        deadline = time.perf_counter() + timeout
        nbytes = int(nbytes)
        if out is not None and not (isinstance(out, np.ndarray) and out.flags.c_contiguous
                                    and out.flags.writeable and out.nbytes == nbytes):
            raise ValueError(f"out must be a writable C-contiguous array of {nbytes} bytes")
        core.acquire(timeout)
        try:
            core.check_usable()
            if nbytes <= 0 or nbytes % 4 or src._ptr is None or staging._ptr is None \
                    or staging.kind is not BufferKind.STAGING or nbytes > src.nbytes or nbytes > staging.nbytes:
                raise DeviceFailure(FailureStage.SUBMIT, f"cannot read {nbytes} bytes of {src!r} through {staging!r}")
            faults = core.faults
            if faults is not None and faults.hit(FailureStage.SUBMIT):
                raise DeviceFailure(FailureStage.SUBMIT, "injected submission failure", False)
            if staging.mapped:
                self._unmap_pieces(staging)
            core.submit_pending()  # its read-ahead copies and the work this read must follow
            ahead = self._take_copy(src, nbytes, keep) if self.copies else None
            parts: list[_Part]
            if ahead is not None and faults is None:
                return self._ahead_out(ahead, nbytes, out, deadline)
            if ahead is not None:
                assert ahead.cell is not None  # (_take_copy hands out resolved copies only)
                parts = [(0, nbytes, ahead.obj, ahead.cell)]
                ahead.cell = None
            else:
                parts = self._submit_copies(src, staging, nbytes)
        finally:
            core.lock.release()
        return self._finish(staging, nbytes, deadline, parts, out, ahead, keep, sink)

    def _ahead_out(self, entry: PooledBuffer, nbytes: int, out: np.ndarray | None, deadline: float) -> np.ndarray:
        """A read served by its resolved read-ahead copy, with no fault injector (lock held since
        the copy was found): its one mapped piece is read out, unmapped and given back at once,
        with no wait (it resolved) and _finish's outcomes: a loss since the read's first check or
        an unavailable range is DeviceFailure "lost" / "map", an unmap error DeviceFailure "unmap"
        carrying the words; the copy is freed after either. (The read of every round trip: one
        frame for the general path's _finish, _pieces_out, _mapped and wait.)"""
        core = self._core
        backend = core.backend
        cell, entry.cell = entry.cell, None
        address = 0 if core.flags.lost else backend.read_address(entry.obj, 0, nbytes)
        if address == 0:  # (cleaned up as the general path's failures are)
            assert cell is not None  # (_take_copy hands out resolved copies only)
            self._settle([(0, nbytes, entry.obj, cell)], deadline, entry)
            core.check_usable(True)
            raise DeviceFailure(FailureStage.MAP, "the mapped range is not available", True)
        if out is None:
            out = np.empty(nbytes // 4, dtype=np.uint32)
        copy_bytes(out.__array_interface__["data"][0], address, nbytes, core.tuning.read_copy_threads)
        errors = core.flags.errors
        del errors[:]
        backend.unmap(entry.obj)
        if errors:
            self._pool.free(entry)
            raise DeviceFailure(FailureStage.UNMAP, core.take_error() or "", True, data=out)
        self._pool.give(entry)
        return out

    def _submit_copies(self, src: BufferHandle, staging: BufferHandle, nbytes: int) -> list[_Part]:
        """Record and submit the copy into each piece of the staging buffer (a submission each, so
        that each map resolves when its own copy is done), then map it (lock held)."""
        core = self._core
        backend = core.backend
        del core.flags.errors[:]
        parts: list[_Part] = []
        for offset, size, native in staging.pieces:
            n = min(size, nbytes - offset)
            if n <= 0:
                break
            enc = backend.encoder()
            backend.copy(enc, src._ptr, offset, native.obj, 0, n)
            backend.submit(enc)
            parts.append((offset, n, native.obj, backend.map(native.obj, False, 0, n)))
        if core.flags.errors:
            raise DeviceFailure(FailureStage.SUBMIT, core.take_error() or "", True)
        return parts

    def _finish(self, staging: BufferHandle, nbytes: int, deadline: float, parts: list[_Part],
                out: np.ndarray | None, ahead: PooledBuffer | None, keep: bool, sink: PieceSink | None) -> Any:
        """Wait for each piece's map in turn, copy its words out and unmap it (or leave them mapped
        with ``keep``, telling ``sink``)."""
        core = self._core
        faults = core.faults
        unmap_err: str | None = None
        if out is None and not keep:
            out = np.empty(nbytes // 4, dtype=np.uint32)
        try:
            if sink is not None:
                sink.submitted([(offset, n) for offset, n, *_ in parts])
            if faults is not None and faults.hit(FailureStage.TIMEOUT):
                core.left_unfinished([cell for *_, cell in parts])
                raise DeviceFailure(FailureStage.TIMEOUT, "injected: the readback wait exceeded its deadline",
                                    True, True)
            segments = self._pieces_out(parts, deadline, out, keep, sink)
            if keep:
                staging.segments = tuple(segments)
                return staging.mapped
            with core.lock:
                errors = core.flags.errors
                del errors[:]
                for _offset, _n, buf, _cell in parts:
                    core.backend.unmap(buf)
                if errors:
                    unmap_err = core.take_error()
        except DeviceFailure:
            self._settle(parts, deadline, ahead)
            raise
        if faults is not None and faults.hit(FailureStage.UNMAP):
            unmap_err = unmap_err or "injected unmap failure"
        if ahead is not None:
            with core.lock:
                (self._pool.give if unmap_err is None else self._pool.free)(ahead)
        if unmap_err is not None:
            raise DeviceFailure(FailureStage.UNMAP, unmap_err, True, data=out)
        return out

    def _pieces_out(self, parts: list[_Part], deadline: float, out: np.ndarray | None, keep: bool,
                    sink: PieceSink | None) -> list[tuple[int, int, int]]:
        """(offset, address, bytes) of every piece, each copied into ``out`` and handed to ``sink``
        as it maps. Once every later map has resolved too, all their addresses are taken first and
        the rest is handed on in the same hold of the lock (close() cannot come between): from
        there on nothing can fail, and ``sink`` is told so (``final``)."""
        core = self._core
        faults = core.faults
        threads = core.tuning.read_copy_threads
        segments: list[tuple[int, int, int]] = []
        dst = out.__array_interface__["data"][0] if out is not None else 0
        for i, (offset, n, buf, cell) in enumerate(parts):
            core.wait(deadline, (cell,), "the readback")
            if i == 0 and faults is not None and faults.hit(FailureStage.LOST):
                raise core.lose("injected: the device reports loss")
            with core.lock:
                segments.append((offset, self._mapped(buf, cell, n), n))
                # (the wait's last poll saw them; with a fault injector every piece waits its turn,
                # as behind a slow link, so that a test can fail piece k after pieces < k went out)
                later = parts[i + 1:]
                final = not later or (faults is None and all(c.status for *_, c in later))
                if final and later:
                    segments += [(o, self._mapped(b, c, m), m) for o, m, b, c in later]
                for offset_j, address, n_j in segments[i:]:
                    if out is not None:
                        copy_bytes(dst + offset_j, address, n_j, threads)
                    if sink is not None:
                        sink.piece(offset_j, address, n_j, final)
            if final:
                break
        return segments

    def _mapped(self, buf: Any, cell: MapCell, nbytes: int) -> int:
        """The host address of the resolved map (lock held); DeviceFailure "map" otherwise."""
        core = self._core
        core.check_usable(True)
        faults = core.faults
        map_fault = faults is not None and faults.hit(FailureStage.MAP)
        if cell.status != CELL_OK or map_fault:
            raise DeviceFailure(FailureStage.MAP, "injected map failure" if map_fault else cell.message, True)
        address = core.backend.read_address(buf, 0, nbytes)
        if address == 0:
            raise DeviceFailure(FailureStage.MAP, "the mapped range is not available", True)
        return address

    def _settle(self, parts: list[_Part], deadline: float, ahead: PooledBuffer | None) -> None:
        """After a failed read: unmap what did map (within the deadline); a copy is freed."""
        core = self._core
        try:
            core.wait(deadline, [cell for *_, cell in parts], "the readback cleanup")
        except DeviceFailure:
            pass
        with core.lock:
            if core.closed:
                return
            for _offset, _n, buf, cell in parts:
                if cell.status == CELL_OK:
                    core.backend.unmap(buf)
            del core.flags.errors[:]
            if ahead is not None:
                self._pool.free(ahead)

    def _unmap_pieces(self, staging: BufferHandle) -> None:
        """Unmap every piece of a staging buffer read_mapped() left mapped (lock held)."""
        for _offset, _n, native in staging.pieces[:len(staging.segments)]:  # (those mapped)
            self._core.backend.unmap(native.obj)
        staging.segments = ()

    def unmap(self, staging: BufferHandle) -> None:
        """End the mapping read_mapped() left on ``staging`` (no-op when there is none)."""
        with self._core.lock:
            if staging.mapped and staging._ptr is not None and not self._core.closed:
                self._unmap_pieces(staging)
            staging.segments = ()
