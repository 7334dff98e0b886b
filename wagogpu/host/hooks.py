"""The host functions the accessor module calls back (abi/accessor.py HOOK_SIGNATURES): a scalar
access's trap and acquire (docs/design/abi.md §2.13), and the checks and bookkeeping around the GC transfers
setBufferGC/copyBufferGC, whose elements the accessor moves itself (docs/design/abi.md §2.11-2.12)."""
from __future__ import annotations

import time

import wasmtime

from ..abi import accessor as acc
from ..abi.table import GC_IMPORTS, Status, scalar_trap_message
from ..diagnostics import TransferCounters
from .calls import U32, Handlers, ImportCall, ImportGroup, ImportScope



class AccessorHooks(ImportGroup):
    """Callbacks of one instance's accessor module. trap is not guarded (it raises the trap the
    guest sees); the others run under the host lock like any import."""

    def __init__(self, scope: ImportScope, interruptible: bool = False) -> None:
        super().__init__(scope)
        self.gc_reservation = 0
        self._gc_call: ImportCall | None = None
        # (import position, handle, offset, count) of the GC transfer whose elements are moving
        self._gc_move: tuple[int, int, int, int] | None = None
        # A call limit may stop the accessor's move loop halfway (guest_limits.py): a whole-buffer
        # set then must not skip making the buffer CPU-current, or the rest would be stale bytes.
        self._interruptible = interruptible

    def handlers(self) -> Handlers:
        return {"acquire": (self.acquire, False), "gc_begin": (self.gc_begin, False), "gc_end": (self.gc_end, False)}

    @staticmethod
    def trap(status: int) -> None:
        raise wasmtime.Trap(scalar_trap_message(status))

    def acquire(self, handle: int) -> int:
        """A scalar access found its buffer not CPU-current: read it back (docs/design/abi.md §2.13 step 6)."""
        if not self._live():
            return Status.INVALID_STATE
        buf = self._buffer(handle)
        if buf is None:
            return Status.INVALID_HANDLE
        deadline = self.scope.started + self.ctx.config.run_timeout
        if time.perf_counter() >= deadline:
            return Status.CANCELLED
        counters = TransferCounters()
        status = self.ctx.residency.make_cpu_current(self.buffers, buf, deadline, counters)
        self.ctx.log.totals.add(counters)
        if status == Status.OK and time.perf_counter() >= deadline:
            return Status.CANCELLED
        return int(status)

    def gc_begin(self, op_code: int, handle: int, offset: int, kind: int, mutable: int, array_offset: int,
                 array_length: int, count: int) -> tuple[int, int]:
        """Checks of docs/design/abi.md §2.7-2.12 for the GC variants; (GC_PROCEED, address) when elements may move."""
        is_set = GC_IMPORTS[op_code].startswith("set")
        offset &= U32
        array_offset &= U32
        array_length &= U32
        count &= U32
        self.scope.import_name = GC_IMPORTS[op_code]  # the accessor passes the table position
        call = self._gc_call = self._enter(count)
        if not self._live():
            return self._finish(call, Status.INVALID_STATE), 0
        buf = self._buffer(handle)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE, reason=self._no_buffer(handle)), 0
        if offset + count > buf.length:
            return self._finish(call, Status.INVALID_RANGE, reason=self._past_end(buf, offset, count)), 0
        if kind in (acc.GC_NULL, acc.GC_OTHER):
            what = "a null reference" if kind == acc.GC_NULL else "not an array of a supported element type"
            return self._finish(call, Status.UNSUPPORTED_STORAGE, reason=f"the GC argument is {what}"), 0
        if kind != acc.gc_kind_code(buf.type):
            return self._finish(call, Status.TYPE_MISMATCH,
                                reason=f"the GC array's element type does not match buffer {buf.handle} "
                                       f"({buf.type.name})"), 0
        if not is_set and not mutable:
            return self._finish(call, Status.UNSUPPORTED_STORAGE,
                                reason="copyBufferGC needs a mutable array"), 0
        if array_offset + count > array_length:
            return self._finish(call, Status.INVALID_RANGE,
                                reason=f"array elements [{array_offset}, {array_offset + count}) lie past its "
                                       f"length {array_length}"), 0
        if count == 0:
            return self._finish(call, Status.OK), 0
        if call.cancelled():
            return self._finish(call, Status.CANCELLED), 0
        if is_set and not mutable:
            reservation = array_length * buf.stored_bytes
            if not self.buffers.reserve(reservation):
                return self._finish(call, Status.LIMIT_EXCEEDED), 0
            self.gc_reservation = reservation
        if not (is_set and offset == 0 and count == buf.length and not self._interruptible):
            status = self.ctx.residency.make_cpu_current(self.buffers, buf, call.deadline, call.op, call.op)
            if status:
                return self._gc_fail(call, status), 0
        if call.cancelled():
            return self._gc_fail(call, Status.CANCELLED), 0
        # gc_end records the call once the accessor has moved the elements.
        self._gc_move = (op_code, handle, offset, count)
        return acc.GC_PROCEED, buf.ptr + offset * buf.stored_bytes

    def _gc_fail(self, call: ImportCall, status: int) -> int:
        self.buffers.release(self.gc_reservation)
        self.gc_reservation = 0
        return self._finish(call, status)

    def gc_end(self, op_code: int, handle: int, offset: int, count: int) -> int:
        call = self._gc_call
        buf = self._buffer(handle)
        assert call is not None and buf is not None, "gc_end without a gc_begin that let the move proceed"
        count &= U32
        offset &= U32
        nbytes = count * buf.stored_bytes
        if GC_IMPORTS[op_code].startswith("set"):
            buf.record.note_cpu_write(offset, offset + count)
            call.op.guest_set_bytes += nbytes
            call.op.guest_set_count += 1
        else:
            call.op.guest_copy_bytes += nbytes
            call.op.guest_copy_count += 1
        self.buffers.release(self.gc_reservation)
        self.gc_reservation = 0
        self._gc_call = self._gc_move = None
        return self._finish(call, Status.OK)

    def interrupted(self) -> None:
        """A call limit stopped the guest; if that was inside a GC transfer's move, finish its
        bookkeeping: a set's range counts as written (its elements are partly new, as after a guest's
        own loop of writes cut short), the reservation goes back, and the call is recorded CANCELLED."""
        call, move = self._gc_call, self._gc_move
        self._gc_call = self._gc_move = None
        if call is None or move is None:
            return
        op_code, handle, offset, count = move
        buf = self._buffer(handle)
        if buf is not None and GC_IMPORTS[op_code].startswith("set"):
            buf.record.note_cpu_write(offset, offset + count)
        self.buffers.release(self.gc_reservation)
        self.gc_reservation = 0
        self._finish(call, Status.CANCELLED, reason="a call limit (call_timeout or fuel) stopped the guest "
                                                    "while the elements moved")
