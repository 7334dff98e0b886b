"""createBuffer, createBufferPacked, freeBuffer and bindBuffer (docs/design/abi.md §2.2-2.5)."""
from __future__ import annotations

from ..abi.table import SLOT_COUNT, TYPE_INFO, ElementType, Status, pack_result
from .calls import U32, Handlers, ImportCall, ImportGroup



class ManagementImports(ImportGroup):
    """Buffer lifetime and slot binding of one instance."""

    def handlers(self) -> Handlers:
        return {"createBuffer": (self.createBuffer, False), "createBufferPacked": (self.createBufferPacked, False),
                "freeBuffer": (self.freeBuffer, False), "bindBuffer": (self.bindBuffer, False)}

    def createBuffer(self, element_type: int, count: int) -> tuple[int, int]:
        call = self._enter(count & U32)
        handle, status = self._create(call, element_type & U32, count & U32)
        return handle, int(status)

    def createBufferPacked(self, element_type: int, count: int) -> int:
        call = self._enter(count & U32)
        handle, status = self._create(call, element_type & U32, count & U32)
        return pack_result(status, handle)

    def _create(self, call: ImportCall, element_type: int, count: int) -> tuple[int, int]:
        if not self._live():
            return 0, self._finish(call, Status.INVALID_STATE)
        handle, status = self.buffers.create(element_type, count)
        reason = self._create_refusal(element_type, count) if status else ""
        return handle, self._finish(call, status, reason=reason)

    def _create_refusal(self, element_type: int, count: int) -> str:
        """Why createBuffer refused (the buffer table's checks 2-6, in order)."""
        if element_type not in TYPE_INFO:
            return f"unknown element type {element_type}"
        limits = self.buffers.limits
        if count > limits.max_elements:
            return f"count {count} is above max_elements {limits.max_elements}"
        if len(self.buffers.buffers) >= limits.max_buffers:
            return f"the instance holds max_buffers_per_instance ({limits.max_buffers}) buffers"
        if not self.buffers.budget.handles_left():
            return "the runtime's handle space is spent"
        nbytes = count * TYPE_INFO[ElementType(element_type)].stored_bytes
        return (f"{nbytes} bytes do not fit the instance's {limits.max_bytes}-byte or the runtime's "
                f"{self.buffers.budget.max_bytes}-byte budget")

    def freeBuffer(self, handle: int) -> int:
        call = self._enter()
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        buf = self._buffer(handle)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE, reason=self._no_buffer(handle))
        pending = self.ctx.residency.pending
        if pending.writes(buf):
            pending.settle(call.deadline)  # a pending output: the device's answer first (freeing always works)
        self.buffers.free(buf, retire=self.ctx.residency.quarantined)
        return self._finish(call, Status.OK)

    def bindBuffer(self, slot: int, handle: int) -> int:
        call = self._enter()
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        slot &= U32
        handle &= U32
        if slot >= SLOT_COUNT:
            return self._finish(call, Status.INVALID_BINDING, reason=f"slot {slot} is not below {SLOT_COUNT}")
        if handle != 0 and self._buffer(handle) is None:
            return self._finish(call, Status.INVALID_HANDLE, reason=self._no_buffer(handle))
        self.buffers.bind(slot, handle)
        return self._finish(call, Status.OK)
