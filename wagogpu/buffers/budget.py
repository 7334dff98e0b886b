"""Byte accounting and placement: the runtime-wide budget and handle counter (docs/design/abi.md §3.1, §4.9),
and the first-fit heap that places buffer bytes in an accessor memory."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..abi import accessor as acc

if TYPE_CHECKING:  # pragma: no cover  (type-only: the instances register with the budget, which never makes one)
    from .table import InstanceBuffers

ALIGN = 16
MAX_HANDLE = 0xFFFFFFFF


@dataclass(frozen=True)
class BufferLimits:
    """One instance's limits, from the host's Config (docs/design/abi.md §7.2)."""

    max_buffers: int
    max_bytes: int
    max_elements: int


@dataclass(eq=False)
class RuntimeBudget:
    """Every byte the runtime holds for guests, shared by all instances of one host. v1_bytes are
    the wago_gpu_v1 charges (CPU copies, device copies, held resources); legacy_bytes those of a
    legacy run in flight. ``instances`` is who may be asked to evict when a charge does not fit."""

    max_bytes: int
    v1_bytes: int = 0
    legacy_bytes: int = 0
    peak_bytes: int = 0
    next_handle: int = 1
    instances: list[InstanceBuffers] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.v1_bytes + self.legacy_bytes

    def handles_left(self) -> bool:
        return self.next_handle <= MAX_HANDLE

    def take_handle(self) -> int:
        """Next runtime-wide handle; the u32 space is never reused or wrapped (check handles_left)."""
        if self.next_handle > MAX_HANDLE:
            raise RuntimeError("handle space spent")
        handle = self.next_handle
        self.next_handle += 1
        return handle

    def note_peak(self) -> None:
        self.peak_bytes = max(self.peak_bytes, self.total)

    def idle_bytes(self) -> int:
        return sum(inst.idle_bytes() for inst in self.instances)


def _aligned(nbytes: int) -> int:
    return max(ALIGN, -(-nbytes // ALIGN) * ALIGN)


class HeapAllocator:
    """First-fit free list over the accessor heap; the memory grows on demand and never shrinks."""

    def __init__(self, grow_to: Callable[[int], None]):
        self._grow_to = grow_to
        self._top = acc.HEAP_OFFSET
        self._free: list[tuple[int, int]] = []  # sorted (start, size)

    def alloc(self, nbytes: int) -> int:
        size = _aligned(nbytes)
        for i, (start, free_size) in enumerate(self._free):
            if free_size >= size:
                if free_size == size:
                    del self._free[i]
                else:
                    self._free[i] = (start + size, free_size - size)
                return start
        start = self._top
        self._grow_to(start + size)
        self._top = start + size
        return start

    def free(self, ptr: int, nbytes: int) -> None:
        size = _aligned(nbytes)
        i = bisect.bisect(self._free, (ptr, size))
        self._free.insert(i, (ptr, size))
        # Coalesce with neighbours, then give the top back.
        merged: list[tuple[int, int]] = []
        for start, sz in self._free:
            if merged and merged[-1][0] + merged[-1][1] == start:
                merged[-1] = (merged[-1][0], merged[-1][1] + sz)
            else:
                merged.append((start, sz))
        if merged and merged[-1][0] + merged[-1][1] == self._top:
            self._top = merged.pop()[0]
        self._free = merged
