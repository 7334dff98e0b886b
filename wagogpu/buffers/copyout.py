"""Copies out of a mapped readback staging, whole or in pieces, and the copy-back that publishes a
readback into guest memory piece by piece while later pieces still cross PCIe.

A pieced staging (gpu.BufferHandle.pieces) maps piece by piece, so the words of one readback lie
in several host ranges (``segments``); copy_range() gathers any byte range of them. GuestPublish
is the PieceSink of a copy-back that reads straight into guest memory: each piece is copied to
the guest as soon as it is mapped, and until the read can no longer fail (the device says so
with ``final``) the guest's earlier bytes of that piece are first kept in a private backup, so a
failure in a later piece puts every published byte back (undo) and the guest sees nothing of a
copy-back that failed. The backup of piece k+1 runs beside the copy of piece k (different bytes,
different threads), and the first piece's backup while it is still in flight.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ..gpu import BufferHandle
from ..memcopy import copy_bytes, copy_many

__all__ = ["HostScratch", "GuestPublish", "copy_range"]

#: Threads per host copy job (copy_many caps them by the CPU count).
_THREADS = 8


def _clip(offset: int, n: int, skip: int, nbytes: int) -> tuple[int, int]:
    """The part [lo, hi) of source bytes [offset, offset+n) inside [skip, skip+nbytes)."""
    return max(offset, skip), min(offset + n, skip + nbytes)


def copy_range(dst: int, staging: BufferHandle, skip: int, nbytes: int) -> None:
    """Copy bytes [skip, skip+nbytes) of what read_mapped() left mapped in ``staging`` to ``dst``."""
    jobs = []
    for offset, address, n in staging.segments:
        lo, hi = _clip(offset, n, skip, nbytes)
        if lo < hi:
            jobs.append((dst + lo - skip, address + lo - offset, hi - lo, _THREADS))
    if len(jobs) == 1:
        copy_bytes(jobs[0][0], jobs[0][1], jobs[0][2])
    else:
        copy_many(jobs)


class HostScratch:
    """One private host array, grown to the largest size asked for and kept (a fresh 40 MB array
    costs its first-touch page faults on every use: several ms on the H200 host)."""

    def __init__(self) -> None:
        self._array = np.empty(0, np.uint8)

    def address(self, nbytes: int) -> int:
        if self._array.nbytes < nbytes:
            self._array = np.empty(nbytes, np.uint8)
            self._array[::4096] = 0  # touched once here, not under the copy-back's timer
        return int(self._array.ctypes.data)

    @property
    def nbytes(self) -> int:
        return self._array.nbytes

    def clear(self) -> None:
        self._array = np.empty(0, np.uint8)


class GuestPublish:
    """A PieceSink for a copy-back of source bytes [skip, skip+nbytes) to guest address ``guest``.

    ``deadline``: the import's; checked once, when the readback is complete (the first ``final``
    piece: where the one-piece copy-back checks it): past it the pieces already published are put
    back, nothing more is, and ``cancelled`` says so."""

    def __init__(self, guest: int, skip: int, nbytes: int, deadline: float, backup: HostScratch) -> None:
        self.guest = guest
        self.skip = skip
        self.nbytes = nbytes
        self.deadline = deadline
        self._scratch = backup
        self._backup = 0  # taken when a piece first needs keeping (a one-piece read never does)
        self._pieces: Sequence[tuple[int, int]] = ()
        self._backed: set[int] = set()
        self._published: list[tuple[int, int]] = []  # (lo, hi) source ranges now in guest memory
        self._next = 0
        self._complete = False  # a final piece came: the readback is complete
        self.cancelled = False

    # -- PieceSink ------------------------------------------------------------------------------
    def submitted(self, pieces: Sequence[tuple[int, int]]) -> None:
        self._pieces = pieces
        if len(pieces) > 1:  # (one piece is final when it maps: nothing to keep)
            copy_many(self._backup_jobs(0))  # while the first piece crosses PCIe

    def piece(self, offset: int, address: int, n: int, final: bool) -> None:
        i = self._next
        self._next += 1
        if final and not self._complete:
            self._complete = True
            if time.perf_counter() >= self.deadline:
                self.cancelled = True
                self.undo()
        if self.cancelled:
            return
        lo, hi = _clip(offset, n, self.skip, self.nbytes)
        jobs = []
        if lo < hi:
            if not final:  # a later piece may still fail: keep what this one overwrites
                copy_many(self._backup_jobs(i))
                self._published.append((lo, hi))
            jobs.append((self.guest + lo - self.skip, address + lo - offset, hi - lo, _THREADS))
        if not final:
            jobs += self._backup_jobs(i + 1)  # beside this piece's copy: other bytes, other threads
        copy_many(jobs)

    # -- the way back ---------------------------------------------------------------------------
    def undo(self) -> None:
        """The read failed: put the guest's own bytes back wherever a piece was published (only
        pieces published before ``final`` can be here: after it the read cannot fail)."""
        for lo, hi in self._published:
            copy_bytes(self.guest + lo - self.skip, self._backup + lo - self.skip, hi - lo)
        self._published.clear()

    def _backup_jobs(self, i: int) -> list[tuple[int, int, int, int]]:
        """Keep the guest's bytes under piece i (once; none past the last piece or outside the range)."""
        if i >= len(self._pieces) or i in self._backed:
            return []
        self._backed.add(i)
        if not self._backup:
            self._backup = self._scratch.address(self.nbytes)
        offset, n = self._pieces[i]
        lo, hi = _clip(offset, n, self.skip, self.nbytes)
        if lo >= hi:
            return []
        return [(self._backup + lo - self.skip, self.guest + lo - self.skip, hi - lo, _THREADS)]
