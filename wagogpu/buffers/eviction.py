"""Device memory an instance keeps between calls, and the order it is given up in (docs/design/abi.md §4.9).

Everything here is charged to its instance. A reservation that does not fit asks instances to
release idle resources, cheapest to lose first; what is in use by the dispatch being set up is
never offered.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from ..abi.kernel import ERROR_WORD_BYTES, PARAMETER_BLOCK_BYTES
from ..gpu import BufferHandle
from .snapshots import SnapshotCache

if TYPE_CHECKING:  # pragma: no cover  (type-only: the table hands its buffers and itself to the eviction rules)
    from .records import Buffer
    from .table import InstanceBuffers

UNIFORM_BYTES = PARAMETER_BLOCK_BYTES
MAX_IDLE_OUTPUTS = 8

Scratch = tuple[BufferHandle, int]  # (device buffer, its charged bytes)


class Held(enum.StrEnum):
    """What of a buffer's held resources to let go of (see DeviceSide.drop_held)."""

    STAGE = "stage"
    PARKED = "parked"
    ALL = "all"


class DeviceSide(Protocol):
    """What an instance's buffers need from the residency that owns the device."""

    def release_device_buffer(self, gpu_buf: BufferHandle | None) -> None: ...

    def drop_held(self, inst: InstanceBuffers, buf: Buffer, what: Held = Held.ALL) -> None: ...


@dataclass(eq=False)
class DeviceResources:
    """Device memory an instance keeps between calls; all of it is charged to the instance."""

    idle_outputs: list[Scratch] = field(default_factory=list)
    staging: Scratch | None = None
    uniform: BufferHandle | None = None
    uniform_count: int | None = None  # count the uniform holds after the last completed dispatch
    uniform_budget: int = 0  # ... and its loop budget
    small_in_use: bool = False  # a dispatch is setting up the small buffers: not evictable meanwhile
    error_word: tuple[BufferHandle, BufferHandle] | None = None  # (storage, staging) for kernels that report errors
    snapshots: SnapshotCache = field(default_factory=SnapshotCache)  # guest memory for kernels that load it
    retired_bytes: int = 0
    staging_allocations: int = 0
    uniform_allocations: int = 0

    def small_bytes(self) -> int:
        """The parameter block and the error word: dropped together."""
        return ((UNIFORM_BYTES if self.uniform is not None else 0)
                + (2 * ERROR_WORD_BYTES if self.error_word is not None else 0) + self.snapshots.nbytes())

    def idle_bytes(self) -> int:
        return (sum(n for _, n in self.idle_outputs) + (self.staging[1] if self.staging else 0)
                + self.small_bytes())

    def take_idle_output(self, size: int) -> Scratch | None:
        taken = self.take_idle_outputs((size,))
        return taken[0] if taken is not None else None

    def take_idle_outputs(self, sizes: tuple[int, ...]) -> list[Scratch] | None:
        """An idle scratch of each size, taken; None, with none taken, unless every size has one
        (one frame for all of a dispatch's outputs: a steady dispatch asks on every call)."""
        idle = self.idle_outputs
        taken: list[Scratch] = []
        for size in sizes:
            i = 0  # (counted by hand: an enumerate object per output costs more than the count)
            for scratch in idle:
                if scratch[1] == size:
                    taken.append(idle.pop(i))
                    break
                i += 1
            else:
                idle.extend(taken)
                return None
        return taken


def held_bytes(buf: Buffer) -> int:
    return (buf.parked[1] if buf.parked else 0) + (buf.stage.nbytes if buf.stage else 0)


def give_back_scratch(inst: InstanceBuffers, scratch: Scratch) -> None:
    """Scratch no longer needed: kept for the next dispatch (up to MAX_IDLE_OUTPUTS) or freed."""
    d = inst.device
    if len(d.idle_outputs) < MAX_IDLE_OUTPUTS:
        d.idle_outputs.append(scratch)
    else:
        inst.device_side.release_device_buffer(scratch[0])
        inst.release(scratch[1])


def release_idle(inst: InstanceBuffers, need: int | None = None) -> int:
    """Drop evictable resources until ``need`` bytes are freed, or all of them; returns the bytes
    freed. The small per-instance buffers go with any eviction (so the next dispatch re-uploads its
    parameter block, as after the reference's evict-everything), then the cheapest to lose first:
    the readback staging, idle outputs, upload stages (the next dispatch uploads from the CPU copy
    instead) and parked readbacks last (each is first copied into its CPU copy)."""
    freed = 0
    for nbytes, drop in _evictable(inst):
        if need is not None and freed >= need > 0:
            break
        drop()
        freed += nbytes
    return freed


def _evictable(inst: InstanceBuffers) -> Iterator[tuple[int, Callable[[], None]]]:
    d = inst.device
    side = inst.device_side
    small = d.small_bytes()
    if small and not d.small_in_use:
        yield small, partial(_drop_small, inst)
    if d.staging is not None:
        yield d.staging[1], partial(_drop_staging, inst)
    while d.idle_outputs:
        yield d.idle_outputs[-1][1], partial(_drop_idle_output, inst)
    for buf, stage in [(b, b.stage) for b in inst.buffers.values() if b.stage is not None]:
        yield stage.nbytes, partial(side.drop_held, inst, buf, Held.STAGE)
    for buf, parked in [(b, b.parked) for b in inst.buffers.values() if b.parked is not None]:
        yield parked[1], partial(side.drop_held, inst, buf, Held.PARKED)


def _drop_staging(inst: InstanceBuffers) -> None:
    d = inst.device
    if d.staging is not None:
        inst.device_side.release_device_buffer(d.staging[0])
        inst.release(d.staging[1])
        d.staging = None


def _drop_idle_output(inst: InstanceBuffers) -> None:
    gpu_buf, n = inst.device.idle_outputs.pop()
    inst.device_side.release_device_buffer(gpu_buf)
    inst.release(n)


def _drop_small(inst: InstanceBuffers) -> None:
    d = inst.device
    release = inst.device_side.release_device_buffer
    if d.uniform is not None:
        release(d.uniform)
        inst.release(UNIFORM_BYTES)
        d.uniform = None
        d.uniform_count = None
    if d.error_word is not None:
        for gpu_buf in d.error_word:
            release(gpu_buf)
        inst.release(2 * ERROR_WORD_BYTES)
        d.error_word = None
    d.snapshots.drop_all(inst)
