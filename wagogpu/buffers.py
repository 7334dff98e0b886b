"""Per-instance buffer tables, slots, versions, states and byte budgets (abi.md §3-4).

Ownership: a Host owns one RuntimeBudget; each guest instance owns one InstanceBuffers, which owns
its accessor memory region (buffer bytes, handle hash, slot table, records) and every device
resource charged to it. Per-buffer mutable state (flags, version, dirty interval) lives in the
accessor memory records because the Wasm scalar fast path updates it; Python reads it from there.
"""
from __future__ import annotations

import bisect
import ctypes
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import wasmtime

from . import fastcall
from .abi import accessor as acc
from .abi.table import SLOT_COUNT, TYPE_INFO, ElementType, Status
from .diagnostics import InstanceDiagnostic


if sys.byteorder != "little":  # pragma: no cover - the accessor module's records are little-endian words
    raise ImportError("wagogpu needs a little-endian host")

PAGE = 65536
ALIGN = 16
MAX_IDLE_OUTPUTS = 8
UNIFORM_BYTES = 16
ERROR_WORD_BYTES = 16


def memory_span(memory: "wasmtime.Memory", store: Any) -> tuple[int, int]:
    """(address, byte length) of a (non-shared) guest memory, valid until it grows (plain C calls:
    wasmtime-py's data_ptr/data_len cost about 1.3 us each)."""
    return fastcall.memory_span(fastcall.store_context(store), fastcall.memory_address(memory))


def memory_view(memory: Any, store: Any) -> np.ndarray:
    """A guest memory as a uint8 numpy view (valid until the memory grows)."""
    if isinstance(memory, wasmtime.SharedMemory):
        size = memory.data_len()
        ptr = ctypes.addressof(memory.data_ptr().contents) if size else 0
    else:
        ptr, size = memory_span(memory, store)
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * size).from_address(ptr))


class RuntimeBudget:
    """Runtime-wide byte accounting and the handle counter (abi.md §3.1, §4.9)."""

    def __init__(self, max_runtime_bytes: int):
        self.max_bytes = max_runtime_bytes
        self.v1_bytes = 0
        self.legacy_bytes = 0
        self.peak_bytes = 0
        self.next_handle = 1
        self.instances: list[InstanceBuffers] = []

    @property
    def total(self) -> int:
        return self.v1_bytes + self.legacy_bytes

    def take_handle(self) -> int | None:
        """Next runtime-wide handle; None once the u32 space is spent (it never wraps)."""
        if self.next_handle > 0xFFFFFFFF:
            return None
        handle = self.next_handle
        self.next_handle += 1
        return handle


class HeapAllocator:
    """First-fit free list over the accessor heap; the memory grows on demand and never shrinks."""

    def __init__(self, grow_to: Callable[[int], None]):
        self._grow_to = grow_to
        self._top = acc.HEAP_OFFSET
        self._free: list[tuple[int, int]] = []  # sorted (start, size)

    def alloc(self, nbytes: int) -> int:
        size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
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
        size = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
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


@dataclass(eq=False)
class Buffer:
    handle: int
    type: ElementType
    length: int
    record: int
    ptr: int
    gpu: Any = None  # committed device buffer, allocated lazily
    # Read-ahead hint: the guest read this buffer's GPU results back, so the next dispatch that
    # writes it asks the device for a mapped copy in the same submission (dropped when unused).
    readahead_hint: bool = False
    readahead_sent: bool = False
    # Prestaged upload (extension): a full set also wrote the words into a device upload stage,
    # so the dispatch that uploads that version copies them on the device. Charged while held.
    stage: Any = None
    stage_version: int = 0
    stage_hint: bool = False  # the last dispatch uploaded this buffer whole: prestage the next full set
    # Parked readback (extension): (staging handle, bytes) still mapped with the words of version
    # parked_version; it stands in for the CPU copy until the CPU bytes themselves are needed.
    parked: tuple[Any, int] | None = None
    parked_version: int = 0

    @property
    def stored_bytes(self) -> int:
        return TYPE_INFO[self.type].stored_bytes

    @property
    def nbytes(self) -> int:
        return self.length * self.stored_bytes

    @property
    def gpu_bytes(self) -> int:
        return self.length * 4


@dataclass
class DeviceResources:
    """Device memory an instance keeps between calls; all of it is charged to the instance."""

    idle_outputs: list[tuple[Any, int]] = field(default_factory=list)  # (device buffer, bytes)
    staging: tuple[Any, int] | None = None
    uniform: Any = None
    uniform_count: int | None = None  # count the uniform holds after the last completed dispatch
    conversion_capacity: int = 0
    small_in_use: bool = False  # a dispatch is setting up the small buffers: not evictable meanwhile
    error_word: tuple[Any, Any] | None = None  # (storage, staging) for kernels that report errors
    retired_bytes: int = 0
    staging_allocations: int = 0
    uniform_allocations: int = 0


class InstanceBuffers:
    """One guest instance's buffers, slots and charges, over its accessor module's memory."""

    def __init__(self, instance_id: int, store: "wasmtime.Store", memory: "wasmtime.Memory",
                 budget: RuntimeBudget, max_buffers: int, max_bytes: int, max_elements: int):
        self.instance_id = instance_id
        self.store = store
        self.memory = memory
        self.budget = budget
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        self.max_elements = max_elements
        self.buffers: dict[int, Buffer] = {}
        self.reserved = 0
        self.peak = 0
        self.cpu_charge = 0
        self.gpu_charge = 0
        self.device = DeviceResources()
        self.release_device: Callable[[Any], None] = lambda _buf: None
        # Lets go of a buffer's upload stage and/or parked readback ("stage", "parked", "all";
        # set by the host's residency).
        self.drop_held: Callable[["InstanceBuffers", Buffer, str], None] = lambda _inst, _buf, _what: None
        self.heap = HeapAllocator(self._grow_to)
        self._record_words: memoryview | None = None
        self._slot_words: np.ndarray | None = None
        self._view: np.ndarray | None = None
        self._base = 0  # address of the accessor memory while _view is valid
        self.closed = False
        budget.instances.append(self)

    # -- accessor memory -------------------------------------------------------------------
    def view(self) -> np.ndarray:
        """Whole accessor memory as uint8. The accessor module never grows its memory itself, so
        the view stays valid until _grow_to, which drops it."""
        if self._view is None:
            self._view = memory_view(self.memory, self.store)
            self._base = self._view.ctypes.data
        return self._view

    def cpu_address(self, buf: Buffer) -> int:
        """Address of buf's CPU copy (valid until the accessor memory grows)."""
        if self._view is None:
            self.view()
        return self._base + buf.ptr

    def _grow_to(self, nbytes: int) -> None:
        have = self.memory.size(self.store) * PAGE
        if nbytes > have:
            self.memory.grow(self.store, -(-(nbytes - have) // PAGE))
            self._view = None
            self._record_words = None
            self._slot_words = None

    def records(self) -> np.ndarray:
        """The record table as structured rows (for bulk work such as quarantine)."""
        v = self.view()
        return v[acc.RECORDS_OFFSET:acc.RECORDS_OFFSET + acc.MAX_RECORDS * acc.RECORD_BYTES].view(acc.RECORD_DTYPE)

    def _words(self) -> memoryview:
        """The record table as u32 words through a memoryview: a field read is a plain int in about
        40 ns (a numpy scalar costs ~150 ns, a structured row ~5 us). The host is little-endian,
        as the accessor module's layout is (checked at import)."""
        if self._record_words is None:
            v = self.view()
            self._record_words = v[acc.RECORDS_OFFSET:acc.RECORDS_OFFSET + acc.MAX_RECORDS * acc.RECORD_BYTES].data.cast("I")
        return self._record_words

    def slots(self) -> np.ndarray:
        if self._slot_words is None:
            self._slot_words = self.view()[acc.SLOTS_OFFSET:acc.SLOTS_OFFSET + 4 * SLOT_COUNT].view("<u4")
        return self._slot_words

    def set_state_closed(self) -> None:
        self.view()[acc.STATE_OFFSET:acc.STATE_OFFSET + 4].view("<u4")[0] = 1

    def _rebuild_hash(self) -> None:
        table = np.zeros(acc.HASH_ENTRIES, dtype=acc.HASH_DTYPE)
        for handle, buf in self.buffers.items():
            i = handle & (acc.HASH_ENTRIES - 1)
            while table["handle"][i]:
                i = (i + 1) & (acc.HASH_ENTRIES - 1)
            table[i] = (handle, buf.record)
        v = self.view()
        v[acc.HASH_OFFSET:acc.HASH_OFFSET + table.nbytes] = table.view(np.uint8)

    def cpu_bytes(self, buf: Buffer) -> np.ndarray:
        return self.view()[buf.ptr:buf.ptr + buf.nbytes]

    # -- record fields (word offsets within a record: see abi/accessor.py RECORD_DTYPE) -----
    def flags(self, buf: Buffer) -> int:
        return self._words()[buf.record * 8 + 3]

    def set_flags(self, buf: Buffer, flags: int) -> None:
        self._words()[buf.record * 8 + 3] = flags

    def version(self, buf: Buffer) -> int:
        w = self._words()
        return w[buf.record * 8 + 4] | w[buf.record * 8 + 5] << 32

    def _set_version(self, buf: Buffer, version: int) -> None:
        w = self._words()
        w[buf.record * 8 + 4] = version & 0xFFFFFFFF
        w[buf.record * 8 + 5] = version >> 32

    def bump_version(self, buf: Buffer) -> None:
        w = self._words()
        i = buf.record * 8 + 4
        low = w[i] + 1
        if low > 0xFFFFFFFF:
            w[i] = 0
            w[i + 1] += 1
        else:
            w[i] = low

    def dirty(self, buf: Buffer) -> tuple[int, int] | None:
        w = self._words()
        base = buf.record * 8
        if not w[base + 3] & acc.DIRTY:
            return None
        return w[base + 6], w[base + 7]

    def note_cpu_write(self, buf: Buffer, start: int, end: int) -> None:
        """A committed CPU write of [start, end): version +1, GPU copy stale, dirty interval (§4.5)."""
        w = self._words()
        base = buf.record * 8
        flags = w[base + 3]
        self.bump_version(buf)
        if flags & acc.GPU_CURRENT:
            w[base + 6], w[base + 7] = start, end
            flags = (flags & ~acc.GPU_CURRENT) | acc.DIRTY
        elif flags & acc.DIRTY:
            w[base + 6] = min(w[base + 6], start)
            w[base + 7] = max(w[base + 7], end)
        w[base + 3] = (flags | acc.CPU_CURRENT) & ~acc.LOST

    def parked_valid(self, buf: Buffer) -> bool:
        """The parked readback holds the current version (so the buffer counts as CPU-current)."""
        return buf.parked is not None and buf.parked_version == self.version(buf)

    def state_name(self, buf: Buffer) -> str:
        f = self.flags(buf)
        if f & acc.LOST:
            return "CONTENTS_LOST"
        if f & acc.GPU_CURRENT and (f & acc.CPU_CURRENT or self.parked_valid(buf)):
            return "BOTH_CURRENT"
        if f & acc.CPU_CURRENT:
            return "CPU_CURRENT"
        return "GPU_CURRENT"

    # -- budgets -------------------------------------------------------------------------------
    def reserve(self, nbytes: int) -> bool:
        """Charge nbytes to this instance and the runtime, evicting idle resources first (§4.9)."""
        over = self.reserved + nbytes - self.max_bytes
        if over > 0:
            self.release_idle(over)
        over = self.budget.total + nbytes - self.budget.max_bytes
        for inst in list(self.budget.instances) if over > 0 else ():
            over -= inst.release_idle(over)
            if over <= 0:
                break
        if self.reserved + nbytes > self.max_bytes or self.budget.total + nbytes > self.budget.max_bytes:
            return False
        self.reserved += nbytes
        self.budget.v1_bytes += nbytes
        self.peak = max(self.peak, self.reserved)
        self.budget.peak_bytes = max(self.budget.peak_bytes, self.budget.total)
        return True

    def release(self, nbytes: int) -> None:
        self.reserved -= nbytes
        self.budget.v1_bytes -= nbytes

    def idle_bytes(self) -> int:
        d = self.device
        held = sum((b.parked[1] if b.parked else 0) + (b.stage.nbytes if b.stage else 0)
                   for b in self.buffers.values())
        return (held + sum(n for _, n in d.idle_outputs) + (d.staging[1] if d.staging else 0)
                + (UNIFORM_BYTES if d.uniform is not None else 0) + d.conversion_capacity
                + (2 * ERROR_WORD_BYTES if d.error_word is not None else 0))

    def release_idle(self, need: int | None = None) -> int:
        """Drop evictable resources (none of them in use) until ``need`` bytes are freed, or all of
        them; returns the bytes freed. The small per-instance buffers go with any eviction (so the
        next dispatch re-uploads its parameter block, as after the reference's evict-everything),
        then the cheapest to lose first: the readback staging, idle outputs, upload stages (the
        next dispatch uploads from the CPU copy instead) and parked readbacks last (each is first
        copied into its CPU copy)."""
        freed = 0
        for nbytes, drop in self._evictable():
            if need is not None and freed >= need > 0:
                break
            drop()
            freed += nbytes
        return freed

    def _evictable(self) -> Iterator[tuple[int, Callable[[], None]]]:
        d = self.device
        small = ((UNIFORM_BYTES if d.uniform is not None else 0) + d.conversion_capacity
                 + (2 * ERROR_WORD_BYTES if d.error_word is not None else 0))
        if small and not d.small_in_use:
            yield small, self._drop_small
        if d.staging is not None:
            yield d.staging[1], self._drop_staging
        while d.idle_outputs:
            yield d.idle_outputs[-1][1], self._drop_idle_output
        for buf in [b for b in self.buffers.values() if b.stage is not None]:
            yield buf.stage.nbytes, lambda buf=buf: self.drop_held(self, buf, "stage")
        for buf in [b for b in self.buffers.values() if b.parked is not None]:
            yield buf.parked[1], lambda buf=buf: self.drop_held(self, buf, "parked")  # type: ignore[index]

    def _drop_staging(self) -> None:
        d = self.device
        if d.staging is not None:
            self.release_device(d.staging[0])
            self.release(d.staging[1])
            d.staging = None

    def _drop_idle_output(self) -> None:
        gpu_buf, n = self.device.idle_outputs.pop()
        self.release_device(gpu_buf)
        self.release(n)

    def _drop_small(self) -> None:
        d = self.device
        if d.uniform is not None:
            self.release_device(d.uniform)
            self.release(UNIFORM_BYTES)
            d.uniform = None
            d.uniform_count = None
        if d.conversion_capacity:
            self.release(d.conversion_capacity)
            d.conversion_capacity = 0
        if d.error_word is not None:
            for gpu_buf in d.error_word:
                self.release_device(gpu_buf)
            self.release(2 * ERROR_WORD_BYTES)
            d.error_word = None

    # -- buffer lifetime -----------------------------------------------------------------------
    def create(self, element_type: int, count: int) -> tuple[int, int]:
        """createBuffer's checks 2-6 (entry checks are the caller's): (handle, status)."""
        if element_type not in TYPE_INFO:
            return 0, Status.TYPE_MISMATCH
        if count > self.max_elements or len(self.buffers) >= self.max_buffers:
            return 0, Status.LIMIT_EXCEEDED
        if self.budget.next_handle > 0xFFFFFFFF:
            return 0, Status.LIMIT_EXCEEDED
        etype = ElementType(element_type)
        nbytes = count * TYPE_INFO[etype].stored_bytes
        if not self.reserve(nbytes):
            return 0, Status.LIMIT_EXCEEDED
        handle = self.budget.take_handle()
        assert handle is not None
        used = {b.record for b in self.buffers.values()}
        record = next(i for i in range(acc.MAX_RECORDS) if i not in used)
        ptr = self.heap.alloc(nbytes)
        buf = Buffer(handle, etype, count, record, ptr)
        v = self.view()
        v[ptr:ptr + nbytes] = 0
        self.records()[record] = (int(etype), count, ptr, acc.CPU_CURRENT, 1, 0, 0)
        self.buffers[handle] = buf
        self.cpu_charge += nbytes
        self._rebuild_hash()
        return handle, Status.OK

    def free(self, buf: Buffer, retire: bool) -> None:
        """Drop a buffer: its GPU copy is released (or kept charged as retired), slots cleared."""
        if buf.stage is not None or buf.parked is not None:
            self.drop_held(self, buf, "all")
        del self.buffers[buf.handle]
        slots = self.slots()
        slots[slots == buf.handle] = 0
        self._rebuild_hash()
        self.records()[buf.record] = (0, 0, 0, 0, 0, 0, 0)
        self.heap.free(buf.ptr, buf.nbytes)
        self.release(buf.nbytes)
        self.cpu_charge -= buf.nbytes
        if buf.gpu is not None:
            self.gpu_charge -= buf.gpu_bytes
            if retire:
                self.device.retired_bytes += buf.gpu_bytes
            else:
                self.release_device(buf.gpu)
                self.release(buf.gpu_bytes)
            buf.gpu = None

    def close(self) -> None:
        """Free everything the guest left behind; charges go back to zero except retired bytes."""
        if self.closed:
            return
        self.set_state_closed()
        for buf in list(self.buffers.values()):
            self.free(buf, retire=False)
        self.release_idle()
        self.release(self.device.retired_bytes)
        self.device.retired_bytes = 0
        self.closed = True
        if self in self.budget.instances:
            self.budget.instances.remove(self)

    def diagnostic(self) -> InstanceDiagnostic:
        d = InstanceDiagnostic(instance=self.instance_id, peak_bytes=self.peak, reserved_bytes=self.reserved)
        for buf in self.buffers.values():
            d.buffers += 1
            state = self.state_name(buf)
            if state == "CONTENTS_LOST":
                d.contents_lost += 1
            elif state == "BOTH_CURRENT":
                d.both_current += 1
            elif state == "CPU_CURRENT":
                d.cpu_current += 1
            else:
                d.gpu_current += 1
            d.logical_bytes += buf.nbytes
            d.cpu_bytes += buf.nbytes
            if buf.gpu is not None:
                d.gpu_bytes += buf.gpu_bytes
        d.retained_pool_bytes = self.idle_bytes()
        d.scratch_bytes = self.device.retired_bytes
        return d
