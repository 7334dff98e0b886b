"""Snapshots of guest memory for kernels that load from it (compiler/memload.py says what the
shader expects): one read-only storage buffer per instance and memory, bound after the error word.

The range is decided at each dispatch: from the kernel's lowest static address (KernelPlan
memory_low, aligned down to a word) up to MAX_SNAPSHOT_BYTES further or the memory's end, whichever
is first. Its bytes are exactly what the CPU runner would read at that moment. Guest memory changes
through plain stores the host never sees, so a cached snapshot is reused only when its bytes still
equal the memory's, compared in full each dispatch (memcmp: no hash can collide; measured in
bench/bench_snapshot.py); otherwise the buffer is written anew. Header words: byte length, then the
guest address of the first byte.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..abi.table import Status
from ..gpu import BufferHandle, DeviceAllocationError
from .memory import view_at

if TYPE_CHECKING:  # pragma: no cover  (type-only: the transaction and residency hand themselves in)
    from ..gpu import GpuDevice
    from .residency import Residency
    from .table import InstanceBuffers
    from .transaction import Transaction

MAX_SNAPSHOT_BYTES = 1024 * 1024  # as compiler.reader.MAX_SNAPSHOT_BYTES (the buffer layer imports no compiler)
HEADER_BYTES = 8
_memcmp = ctypes.CDLL(None).memcmp
_memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_memcmp.restype = ctypes.c_int


@dataclass(eq=False, slots=True)
class Snapshot:
    """The device copy of one range of one guest memory, and the bytes it holds."""

    gpu: BufferHandle
    capacity: int  # bytes of the device buffer (header included)
    low: int
    length: int
    copy: np.ndarray  # the guest bytes last uploaded (length bytes)
    uploads: int = 0
    reuses: int = 0


def snapshot_range(low: int, memory_bytes: int) -> tuple[int, int]:
    """(first byte, byte length) of the snapshot: word-aligned, inside the memory."""
    start = min(low & ~3, memory_bytes & ~3)
    end = min(memory_bytes, start + MAX_SNAPSHOT_BYTES) & ~3
    return start, end - start


def same_bytes(address: int, copy: np.ndarray) -> bool:
    n = copy.nbytes
    return n == 0 or _memcmp(address, copy.ctypes.data, n) == 0


def _words(header_low: int, raw: np.ndarray) -> np.ndarray:
    words = np.empty(HEADER_BYTES // 4 + raw.nbytes // 4, dtype=np.uint32)
    words[0] = raw.nbytes
    words[1] = header_low
    words[2:] = raw.view(np.uint32)
    return words


class SnapshotCache:
    """An instance's snapshots by memory index; their device bytes are charged to the instance and
    dropped with its small buffers (eviction.py)."""

    def __init__(self) -> None:
        self.by_memory: dict[int, Snapshot] = {}

    def nbytes(self) -> int:
        return sum(s.capacity for s in self.by_memory.values())

    def current(self, device: GpuDevice, inst: InstanceBuffers, memory: int, low: int,
                span: tuple[int, int]) -> BufferHandle | Status:
        """The device buffer holding memory `memory` from `low` as it is now, written if it changed.
        `span` is (address, byte length) of the guest memory; `device` the live device."""
        address, size = span
        start, length = snapshot_range(low, size)
        snap = self.by_memory.get(memory)
        if snap is not None and snap.low == start and snap.length == length and same_bytes(address + start, snap.copy):
            snap.reuses += 1
            return snap.gpu
        raw = view_at(address + start, length).copy()
        capacity = HEADER_BYTES + length
        if snap is None or snap.capacity != capacity:
            if snap is not None:
                self.drop(inst, memory)
            if not inst.reserve(capacity):
                return Status.LIMIT_EXCEEDED
            try:
                gpu = device.create_storage(capacity)
            except DeviceAllocationError:
                inst.release(capacity)
                return Status.DEVICE_ERROR
            snap = self.by_memory[memory] = Snapshot(gpu, capacity, start, length, raw)
        device.write(snap.gpu, 0, _words(start, raw))
        snap.low, snap.length, snap.copy = start, length, raw
        snap.uploads += 1
        return snap.gpu

    def drop(self, inst: InstanceBuffers, memory: int) -> None:
        snap = self.by_memory.pop(memory)
        inst.device_side.release_device_buffer(snap.gpu)
        inst.release(snap.capacity)

    def drop_all(self, inst: InstanceBuffers) -> None:
        for memory in list(self.by_memory):
            self.drop(inst, memory)


def bind_snapshot(res: Residency, tx: Transaction) -> Status:
    """The snapshot a kernel that loads guest memory reads, bound after the error word. No memory
    span (the guest's memory is not reachable yet, as in its start function) is a fallback."""
    plan = tx.plan
    span = tx.guest_memory
    if span is None:
        return Status.INVALID_STATE
    d = tx.inst.device
    d.small_in_use = True  # the uniform and error word just set up must not be evicted for it
    try:
        found = d.snapshots.current(res.live, tx.inst, plan.memory, plan.memory_low, span)
    finally:
        d.small_in_use = False
    if isinstance(found, Status):
        return found
    tx.storage.append(found)
    return Status.OK
