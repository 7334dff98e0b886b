"""One guest instance's buffer table, slots and byte charges (docs/design/abi.md §3-4).

Ownership: each guest instance owns one InstanceBuffers, which owns its accessor memory region
(buffer bytes, handle hash, slot table, records) and every device resource charged to it. The
per-buffer mutable state (flags, version, dirty interval) lives in the accessor records because
the Wasm scalar fast path updates it; Python reads it through each buffer's BufferRecord.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..abi import accessor as acc
from ..abi.table import SLOT_COUNT, TYPE_INFO, ElementType, Status
from ..diagnostics import BufferState, InstanceDiagnostic
from .budget import BufferLimits, HeapAllocator, RuntimeBudget
from .convert import stored_to_words
from .eviction import DeviceResources, DeviceSide, Held, held_bytes, release_idle
from .memory import AccessorMemory, view_at
from .records import Buffer, BufferRecord

if TYPE_CHECKING:  # pragma: no cover  (type-only: steady.py and transaction.py import this module)
    from .steady import SteadyPlan
    from .transaction import DispatchPlan

_RECORDS_END = acc.RECORDS_OFFSET + acc.MAX_RECORDS * acc.RECORD_BYTES
_STATE_COUNTERS = {BufferState.CONTENTS_LOST: "contents_lost", BufferState.BOTH_CURRENT: "both_current",
                   BufferState.CPU_CURRENT: "cpu_current", BufferState.GPU_CURRENT: "gpu_current"}


class InstanceBuffers:
    """One guest instance's buffers, slots and charges, over its accessor module's memory."""

    def __init__(self, instance_id: int, memory: AccessorMemory, budget: RuntimeBudget, limits: BufferLimits,
                 device_side: DeviceSide):
        self.instance_id = instance_id
        self.memory = memory
        self.budget = budget
        self.limits = limits
        self.device_side = device_side
        self.buffers: dict[int, Buffer] = {}
        # Counts changes to the binding set (a bind, a free, closing): whatever was checked about
        # the buffers in the slots (a steady dispatch plan) holds while it stays the same.
        self.bindings_epoch = 0
        # id(DispatchPlan) -> (the plan, the bindings_epoch it was last dispatched under, its steady
        # plan over that binding set or None before its second dispatch): the dispatcher's (steady.py).
        self.steady_plans: dict[int, tuple[DispatchPlan, int, SteadyPlan | None]] = {}
        self.reserved = 0
        self.peak = 0
        self.cpu_charge = 0
        self.gpu_charge = 0
        self.device = DeviceResources()
        self.heap = HeapAllocator(self._grow_to)
        self.closed = False
        self._view = np.zeros(0, dtype=np.uint8)
        self._words = np.zeros(0, dtype=np.uint32)
        self._base = 0
        self._record_words = memoryview(b"")
        self._slot_words = memoryview(b"")
        self._view_memory()
        budget.instances.append(self)

    # -- accessor memory -------------------------------------------------------------------
    def _view_memory(self) -> None:
        """View the accessor memory anew: the whole of it, the record words (every record re-bound)
        and the slot words. The accessor module never grows its memory itself, so these stay valid
        until _grow_to."""
        address, size = self.memory.span()
        self._view = view_at(address, size)
        self._words = self._view.view(np.uint32)  # (whole pages: a multiple of 4 bytes)
        self._base = address
        self._record_words = self._view[acc.RECORDS_OFFSET:_RECORDS_END].data.cast("I")
        self._slot_words = self._view[acc.SLOTS_OFFSET:acc.SLOTS_OFFSET + 4 * SLOT_COUNT].data.cast("I")
        for buf in self.buffers.values():
            buf.record.bind(self._record_words)

    def _grow_to(self, nbytes: int) -> None:
        if self.memory.grow_to(nbytes):
            self._view_memory()

    def view(self) -> np.ndarray:
        """The whole accessor memory as uint8 (valid until a buffer is created)."""
        return self._view

    def cpu_address(self, buf: Buffer) -> int:
        """Address of buf's CPU copy (valid until the accessor memory grows)."""
        return self._base + buf.ptr

    def cpu_bytes(self, buf: Buffer) -> np.ndarray:
        return self._view[buf.ptr:buf.ptr + buf.nbytes]

    def cpu_words(self, buf: Buffer, start: int, end: int) -> np.ndarray:
        """The device words of buf's elements [start, end) from its CPU copy: for a raw buffer
        (stored bytes whole words; every CPU copy starts 16-byte aligned) a view, one slice of the
        memory's word view; for a narrow type its values widened, a new array (stored_to_words)."""
        if not buf.raw:
            return stored_to_words(self.cpu_range(buf, start, end), buf.stored_bytes)
        per = buf.stored_bytes >> 2
        first = (buf.ptr >> 2) + start * per
        return self._words[first:first + (end - start) * per]

    def cpu_range(self, buf: Buffer, start: int, end: int) -> np.ndarray:
        """The bytes of buf's elements [start, end) in its CPU copy (one slice of the memory view)."""
        size = buf.stored_bytes
        return self._view[buf.ptr + start * size:buf.ptr + end * size]

    @property
    def slots(self) -> memoryview:
        """The slot table as u32 words: slot -> bound handle, 0 for none."""
        return self._slot_words

    def buffer(self, handle: int) -> Buffer | None:
        return self.buffers.get(handle)

    def bind(self, slot: int, handle: int) -> None:
        """bindBuffer's effect (its checks are the caller's): the slot holds handle, 0 for none
        (binding the handle a slot already holds changes nothing)."""
        slots = self._slot_words
        if slots[slot] != handle:
            slots[slot] = handle
            self.bindings_epoch += 1

    def state(self, buf: Buffer) -> BufferState:
        return buf.state

    def _set_closed(self) -> None:
        self._view[acc.STATE_OFFSET:acc.STATE_OFFSET + 4].view("<u4")[0] = 1

    def _rebuild_hash(self) -> None:
        table = np.zeros(acc.HASH_ENTRIES, dtype=acc.HASH_DTYPE)
        for handle, buf in self.buffers.items():
            i = handle & (acc.HASH_ENTRIES - 1)
            while table["handle"][i]:
                i = (i + 1) & (acc.HASH_ENTRIES - 1)
            table[i] = (handle, buf.record.index)
        self._view[acc.HASH_OFFSET:acc.HASH_OFFSET + table.nbytes] = table.view(np.uint8)

    # -- budgets -------------------------------------------------------------------------------
    def fits(self, nbytes: int) -> bool:
        """Whether reserve(nbytes) would succeed without evicting anything."""
        budget = self.budget
        return (self.reserved + nbytes <= self.limits.max_bytes
                and budget.v1_bytes + budget.legacy_bytes + nbytes <= budget.max_bytes)

    def reserve(self, nbytes: int) -> bool:
        """Charge nbytes to this instance and the runtime, evicting idle resources first (docs/design/abi.md §4.9)."""
        budget = self.budget
        reserved = self.reserved + nbytes
        total = budget.v1_bytes + budget.legacy_bytes + nbytes
        if reserved <= self.limits.max_bytes and total <= budget.max_bytes:  # fits: nothing to evict
            self.reserved = reserved
            budget.v1_bytes += nbytes
            if reserved > self.peak:
                self.peak = reserved
            if total > budget.peak_bytes:
                budget.peak_bytes = total
            return True
        return self._reserve_evicting(nbytes)

    def _reserve_evicting(self, nbytes: int) -> bool:
        """reserve() when the charge does not fit as things are: evict, then charge if it fits now."""
        budget = self.budget
        over = self.reserved + nbytes - self.limits.max_bytes
        if over > 0:
            self.release_idle(over)
        over = budget.total + nbytes - budget.max_bytes
        for inst in list(budget.instances) if over > 0 else ():
            over -= inst.release_idle(over)
            if over <= 0:
                break
        if self.reserved + nbytes > self.limits.max_bytes or budget.total + nbytes > budget.max_bytes:
            return False
        self.reserved += nbytes
        budget.v1_bytes += nbytes
        self.peak = max(self.peak, self.reserved)
        budget.note_peak()
        return True

    def release(self, nbytes: int) -> None:
        self.reserved -= nbytes
        self.budget.v1_bytes -= nbytes

    def idle_bytes(self) -> int:
        return sum(held_bytes(b) for b in self.buffers.values()) + self.device.idle_bytes()

    def release_idle(self, need: int | None = None) -> int:
        """Give up idle device resources, cheapest first (see eviction.release_idle)."""
        return release_idle(self, need)

    # -- buffer lifetime -----------------------------------------------------------------------
    def create(self, element_type: int, count: int) -> tuple[int, Status]:
        """createBuffer's checks 2-6 (entry checks are the caller's): (handle, status)."""
        if element_type not in TYPE_INFO:
            return 0, Status.TYPE_MISMATCH
        limits = self.limits
        if count > limits.max_elements or len(self.buffers) >= limits.max_buffers or not self.budget.handles_left():
            return 0, Status.LIMIT_EXCEEDED
        etype = ElementType(element_type)
        nbytes = count * TYPE_INFO[etype].stored_bytes
        if not self.reserve(nbytes):
            return 0, Status.LIMIT_EXCEEDED
        handle = self.budget.take_handle()
        used = {b.record.index for b in self.buffers.values()}
        index = next(i for i in range(acc.MAX_RECORDS) if i not in used)
        ptr = self.heap.alloc(nbytes)  # may grow the memory: every view is taken after it
        self._view[ptr:ptr + nbytes] = 0
        record = BufferRecord(self._record_words, index)
        record.fill(int(etype), count, ptr)
        self.buffers[handle] = Buffer(handle, etype, count, record, ptr)
        self.cpu_charge += nbytes
        self._rebuild_hash()
        return handle, Status.OK

    def free(self, buf: Buffer, retire: bool) -> None:
        """Drop a buffer: its GPU copy is released (or kept charged as retired), slots cleared."""
        if buf.stage is not None or buf.parked is not None:
            self.device_side.drop_held(self, buf, Held.ALL)
        del self.buffers[buf.handle]
        self.bindings_epoch += 1
        slots = self._slot_words
        for i in range(SLOT_COUNT):
            if slots[i] == buf.handle:
                slots[i] = 0
        self._rebuild_hash()
        buf.record.clear()
        self.heap.free(buf.ptr, buf.nbytes)
        self.release(buf.nbytes)
        self.cpu_charge -= buf.nbytes
        if buf.gpu is not None:
            self.gpu_charge -= buf.gpu_bytes
            if retire:
                self.device.retired_bytes += buf.gpu_bytes
            else:
                self.device_side.release_device_buffer(buf.gpu)
                self.release(buf.gpu_bytes)
            buf.gpu = None

    def close(self) -> None:
        """Free everything the guest left behind; charges go back to zero except retired bytes."""
        if self.closed:
            return
        self._set_closed()
        for buf in list(self.buffers.values()):
            self.free(buf, retire=False)
        self.release_idle()
        self.release(self.device.retired_bytes)
        self.device.retired_bytes = 0
        self.closed = True
        self.bindings_epoch += 1
        self.steady_plans.clear()
        if self in self.budget.instances:
            self.budget.instances.remove(self)

    def diagnostic(self) -> InstanceDiagnostic:
        d = InstanceDiagnostic(instance=self.instance_id, peak_bytes=self.peak, reserved_bytes=self.reserved)
        counts = d.__dict__
        for buf in self.buffers.values():
            d.buffers += 1
            counts[_STATE_COUNTERS[buf.state]] += 1
            d.logical_bytes += buf.nbytes
            d.cpu_bytes += buf.nbytes
            if buf.gpu is not None:
                d.gpu_bytes += buf.gpu_bytes
        d.retained_pool_bytes = self.idle_bytes()
        d.scratch_bytes = self.device.retired_bytes
        return d
