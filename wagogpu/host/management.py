"""createBuffer, createBufferPacked, freeBuffer and bindBuffer (abi.md §2.2-2.5)."""
from __future__ import annotations

from ..abi.table import SLOT_COUNT, Status, pack_result
from .calls import U32, Handlers, ImportGroup

_OK = Status.OK  # bound once: enum attribute access costs ~0.16 us per read on Python 3.11


class ManagementImports(ImportGroup):
    """Buffer lifetime and slot binding of one instance."""

    def handlers(self) -> Handlers:
        return {"createBuffer": (self.createBuffer, False), "createBufferPacked": (self.createBufferPacked, False),
                "freeBuffer": (self.freeBuffer, False), "bindBuffer": (self.bindBuffer, False)}

    def createBuffer(self, element_type: int, count: int) -> tuple[int, int]:
        call = self._enter(count & U32)
        handle, status = self._create(element_type & U32, count & U32)
        self._finish(call, status)
        return handle, int(status)

    def createBufferPacked(self, element_type: int, count: int) -> int:
        call = self._enter(count & U32)
        handle, status = self._create(element_type & U32, count & U32)
        self._finish(call, status)
        return pack_result(status, handle)

    def _create(self, element_type: int, count: int) -> tuple[int, Status]:
        if not self._live():
            return 0, Status.INVALID_STATE
        return self.buffers.create(element_type, count)

    def freeBuffer(self, handle: int) -> int:
        call = self._enter()
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        buf = self._buffer(handle)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE)
        pending = self.ctx.residency.pending
        if pending.writes(buf):
            pending.settle(call.deadline)  # a pending output: the device's answer first (freeing always works)
        self.buffers.free(buf, retire=self.ctx.residency.quarantined)
        return self._finish(call, _OK)

    def bindBuffer(self, slot: int, handle: int) -> int:
        call = self._enter()
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        slot &= U32
        handle &= U32
        if slot >= SLOT_COUNT:
            return self._finish(call, Status.INVALID_BINDING)
        if handle != 0 and self._buffer(handle) is None:
            return self._finish(call, Status.INVALID_HANDLE)
        self.buffers.slots[slot] = handle
        return self._finish(call, _OK)
