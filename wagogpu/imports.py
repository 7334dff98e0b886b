"""The Python half of the wago_gpu_v1 imports: management, dispatch and bulk transfers.

Each method is named after its import and follows abi.md §2 literally: the first failing rule
decides the status. Scalar imports live in the accessor module (abi/accessor.py); they call back
here only through acquire (a buffer is not CPU-current), trap, and the GC transfer hooks.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import wasmtime

from .abi import accessor as acc
from .abi.table import GC_IMPORTS, SLOT_COUNT, ImportSpec, Status, pack_result, scalar_trap_message
from .buffers import Buffer, InstanceBuffers
from .compiler.contract import KernelClass
from .diagnostics import BufferOperation, TransferCounters
from .fastcall import GuestCaller, memory_address
from .memcopy import copy_bytes
from .memexports import memory_export_name
from .residency import KERNEL_FALLBACK

if TYPE_CHECKING:  # pragma: no cover
    from .host import Host, Module

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF
GC_PROCEED = -1  # gc_begin's status meaning "checks passed, move the elements"

REASON_BY_STATUS = {Status.LIMIT_EXCEEDED: "RESOURCE_LIMIT", Status.CANCELLED: "CANCELLED",
                    Status.CONTENTS_LOST: "CONTENTS_LOST", Status.DEVICE_ERROR: "DEVICE_FAILURE"}


class _Call:
    """Bookkeeping of one non-scalar import: timing, its Last record and transfer counters."""

    __slots__ = ("op", "started", "deadline")

    def __init__(self, host: "Host", name: str, instance_id: int, count: int, kernel_id: int, started: float):
        self.started = started
        self.deadline = self.started + host.config.run_timeout
        self.op = BufferOperation.start(name, instance_id, count, kernel_id)

    def cancelled(self) -> bool:
        return time.perf_counter() >= self.deadline


class InstanceImports:
    """Import implementations bound to one guest instance (the 'calling instance')."""

    def __init__(self, host: "Host", module: "Module", buffers: InstanceBuffers):
        self.host = host
        self.module = module
        self.buffers = buffers
        self.gc_reservation = 0
        self._started = 0.0
        self._import_name = ""
        self._memories: dict[int, tuple[wasmtime.Memory, bool, Any]] = {}

    def guarded(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Serialise an import under the host lock; an unexpected host error becomes a trap, never a
        Python exception escaping into the guest's caller."""
        lock = self.host._lock

        def call(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                with lock:
                    self._started = started
                    self._import_name = name
                    return fn(*args)
            except wasmtime.Trap:
                raise
            except Exception as exc:
                raise wasmtime.Trap(f"wago_gpu_v1 host failure in {name}: {type(exc).__name__}: {exc}") from exc

        return call

    # -- shared entry and exit ------------------------------------------------------------------
    def _enter(self, count: int = 0, kernel_id: int = 0) -> _Call:
        """Start the record of the import being served (its name comes from the ABI table)."""
        call = _Call(self.host, self._import_name, self.buffers.instance_id, count, kernel_id, self._started)
        call.op.queue_wait = time.perf_counter() - call.started
        self.host._residency.check_loss()
        return call

    def _live(self) -> bool:
        return not (self.host._stopped or self.buffers.closed)

    def _finish(self, call: _Call, status: int, outcome: str | None = None, reason_code: str = "NONE",
                reason: str = "") -> int:
        """Record Last (every non-scalar import, every status) and add this call's counters to Totals."""
        op = call.op
        op.status = int(status)
        if outcome is None:
            outcome = "OK" if status == Status.OK else "CPU_FALLBACK_READY" if status == Status.CPU_FALLBACK else "ERROR"
        op.outcome = outcome
        if status not in (Status.OK, Status.CPU_FALLBACK):
            reason_code = REASON_BY_STATUS.get(status) or (reason_code if reason_code != "NONE" else "CONTRACT_ERROR")
        op.reason_code = reason_code
        op.reason = reason
        op.total = time.perf_counter() - call.started
        if not (self.host.config.profile_stages and status in (Status.OK, Status.CPU_FALLBACK)
                and op.transfer_counts_complete):
            op.profile_valid = False
            op.upload = op.device_copy = op.compute = op.download = op.conversion = op.commit = 0.0
        else:
            op.profile_valid = True
        self.host._record(op)
        return int(status)

    def _buffer(self, handle: int) -> Buffer | None:
        return self.buffers.buffers.get(handle & U32)

    # -- management -------------------------------------------------------------------------------
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

    def _create(self, element_type: int, count: int) -> tuple[int, int]:
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
        self.buffers.free(buf, retire=self.host._residency.quarantined)
        return self._finish(call, Status.OK)

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
        self.buffers.slots()[slot] = handle
        return self._finish(call, Status.OK)

    # -- dispatch ---------------------------------------------------------------------------------
    def dispatch(self, kernel_id: int, count: int) -> int:
        kernel_id &= U32
        count &= U32
        call = self._enter(count, kernel_id)
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        contract = self.module.contract
        if contract is None or not contract.verified:
            return self._finish(call, Status.INVALID_KERNEL, reason_code="CONTRACT_UNVERIFIED",
                                reason=contract.reason if contract else "no kernel contract recorded")
        kernel = self.host.config.kernel(kernel_id)
        plan = contract.kernels.get(kernel_id)
        if kernel is None or plan is None:
            return self._finish(call, Status.INVALID_KERNEL, reason_code="CONTRACT_ERROR",
                                reason=f"no kernel with ID {kernel_id}")
        if plan.cls is KernelClass.INVALID:
            return self._finish(call, Status.INVALID_KERNEL, reason_code="CONTRACT_ERROR", reason=plan.reason)
        slots = self.buffers.slots()
        bound: dict[int, Buffer] = {}
        seen: set[int] = set()
        for b in kernel.bindings:
            handle = int(slots[b.slot])
            buf = self._buffer(handle) if handle else None
            if buf is None or handle in seen:
                return self._finish(call, Status.INVALID_BINDING)
            seen.add(handle)
            if buf.type != b.type:
                return self._finish(call, Status.TYPE_MISMATCH)
            if count > buf.length:
                return self._finish(call, Status.INVALID_RANGE)
            bound[b.slot] = buf
        if count > self.host.config.max_elements:
            return self._finish(call, Status.LIMIT_EXCEEDED)
        if count == 0:
            return self._finish(call, Status.OK, outcome="NOOP")
        if call.cancelled():
            return self._finish(call, Status.CANCELLED)
        reason_code, reason = self.host._gpu_decision(self.module, kernel, plan, count)
        op = call.op
        if reason_code == "NONE":
            status = self.host._residency.run_dispatch(
                self.buffers, self.module.dispatch_plans[kernel_id], bound, count, call.deadline, op)
            if status in (Status.OK, Status.LIMIT_EXCEEDED, Status.CANCELLED):
                return self._finish(call, status, outcome="GPU" if status == Status.OK else None)
            if status == KERNEL_FALLBACK:
                reason_code, reason = op.reason_code, op.reason
            else:
                reason_code, reason = "DEVICE_FAILURE", self.host._residency.quarantine_reason
        op.reason_code = reason_code
        for b in kernel.bindings:
            status = self.host._residency.make_cpu_current(self.buffers, bound[b.slot], call.deadline, op, op)
            if status:
                return self._finish(call, status, reason=reason)
        if call.cancelled():
            return self._finish(call, Status.CANCELLED)
        return self._finish(call, Status.CPU_FALLBACK, reason_code=reason_code, reason=reason)

    # -- bulk transfers ---------------------------------------------------------------------------
    def transfer(self, spec: ImportSpec, caller: GuestCaller, handle: int, offset: int, memory_index: int,
                 guest_offset: int, count: int) -> int:
        """setBuffer32/64 and copyBuffer32/64: direction and address width come from the table."""
        is_set = spec.name.startswith("set")
        want64 = spec.params[3] == "i64"
        handle &= U32
        offset &= U32
        memory_index &= U32
        count &= U32
        guest_offset &= U64 if want64 else U32
        call = self._enter(count)
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        buf = self._buffer(handle)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE)
        if offset + count > buf.length:
            return self._finish(call, Status.INVALID_RANGE)
        contract = self.module.contract
        if contract is None or not contract.verified:
            return self._finish(call, Status.UNSUPPORTED_STORAGE)
        if memory_index >= len(contract.memories):
            return self._finish(call, Status.INVALID_RANGE)
        decl = contract.memories[memory_index]
        if decl.shared or decl.is64 != want64:
            return self._finish(call, Status.UNSUPPORTED_STORAGE)
        memory = self._guest_memory(caller, memory_index)
        if memory is None or memory[1] != want64:
            return self._finish(call, Status.UNSUPPORTED_STORAGE)
        guest_base, guest_size = caller.memory_span(memory[2])
        nbytes = count * buf.stored_bytes
        if guest_offset + nbytes > guest_size:
            return self._finish(call, Status.INVALID_RANGE)
        if count == 0:
            return self._finish(call, Status.OK)
        res = self.host._residency
        full_set = is_set and offset == 0 and count == buf.length
        if is_set and not full_set:
            status = res.make_cpu_current(self.buffers, buf, call.deadline, call.op, call.op)
            if status:
                return self._finish(call, status)
        elif not is_set:
            # The CPU copy, or a big buffer's readback left parked in its mapped staging.
            status, source = res.copy_source(self.buffers, buf, call.deadline, call.op, call.op)
            if status:
                return self._finish(call, status)
        if call.cancelled():
            return self._finish(call, Status.CANCELLED)
        t0 = time.perf_counter()
        guest = guest_base + guest_offset
        skip = offset * buf.stored_bytes
        # Large copies are split over threads (memmove releases the GIL).
        if full_set:
            stage = res.set_copy(self.buffers, buf, self.buffers.cpu_address(buf), guest, nbytes)
            self.buffers.note_cpu_write(buf, 0, count)
            res.keep_stage(self.buffers, buf, stage)
        elif is_set:
            copy_bytes(self.buffers.cpu_address(buf) + skip, guest, nbytes)
            self.buffers.note_cpu_write(buf, offset, offset + count)
        else:
            copy_bytes(guest, source + skip, nbytes)
        if is_set:
            call.op.guest_set_bytes += nbytes
            call.op.guest_set_count += 1
        else:
            call.op.guest_copy_bytes += nbytes
            call.op.guest_copy_count += 1
        call.op.commit += time.perf_counter() - t0
        return self._finish(call, Status.OK)

    def _guest_memory(self, caller: GuestCaller, index: int) -> tuple[wasmtime.Memory, bool, Any] | None:
        """The guest's memory `index`, whether it is 64-bit and where its wasmtime_memory_t lies;
        looked up once (a Memory is a handle valid for the store's life; its size is read anew on
        every use)."""
        found = self._memories.get(index)
        if found is None:
            memory = caller.get(memory_export_name(index))
            if not isinstance(memory, wasmtime.Memory):
                return None
            found = self._memories[index] = (memory, memory.type(caller).is_64,
                                               memory_address(memory))
        return found

    # -- hooks called by the accessor module -------------------------------------------------------
    def trap(self, status: int) -> None:
        raise wasmtime.Trap(scalar_trap_message(status))

    def acquire(self, handle: int) -> int:
        """A scalar access found its buffer not CPU-current: read it back (abi.md §2.13 step 6)."""
        if not self._live():
            return Status.INVALID_STATE
        buf = self._buffer(handle)
        if buf is None:
            return Status.INVALID_HANDLE
        deadline = self._started + self.host.config.run_timeout
        if time.perf_counter() >= deadline:
            return Status.CANCELLED
        counters = TransferCounters()
        status = self.host._residency.make_cpu_current(self.buffers, buf, deadline, counters)
        self.host._totals.add(counters)
        if status == Status.OK and time.perf_counter() >= deadline:
            return Status.CANCELLED
        return int(status)

    def gc_begin(self, op_code: int, handle: int, offset: int, kind: int, mutable: int, array_offset: int,
                 array_length: int, count: int) -> tuple[int, int]:
        """Checks of abi.md §2.7-2.12 for the GC variants; (GC_PROCEED, address) when elements may move."""
        is_set = GC_IMPORTS[op_code].startswith("set")
        handle &= U32
        offset &= U32
        array_offset &= U32
        count &= U32
        self._import_name = GC_IMPORTS[op_code]  # the accessor passes the table position
        call = self._enter(count)
        self._gc_call = call
        if not self._live():
            return self._finish(call, Status.INVALID_STATE), 0
        buf = self._buffer(handle)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE), 0
        if offset + count > buf.length:
            return self._finish(call, Status.INVALID_RANGE), 0
        if kind in (acc.GC_NULL, acc.GC_OTHER):
            return self._finish(call, Status.UNSUPPORTED_STORAGE), 0
        if kind != acc.gc_kind_code(buf.type):
            return self._finish(call, Status.TYPE_MISMATCH), 0
        if not is_set and not mutable:
            return self._finish(call, Status.UNSUPPORTED_STORAGE), 0
        if array_offset + count > (array_length & U32):
            return self._finish(call, Status.INVALID_RANGE), 0
        if count == 0:
            return self._finish(call, Status.OK), 0
        if call.cancelled():
            return self._finish(call, Status.CANCELLED), 0
        if is_set and not mutable:
            reservation = (array_length & U32) * buf.stored_bytes
            if not self.buffers.reserve(reservation):
                return self._finish(call, Status.LIMIT_EXCEEDED), 0
            self.gc_reservation = reservation
        if not (is_set and offset == 0 and count == buf.length):
            status = self.host._residency.make_cpu_current(self.buffers, buf, call.deadline, call.op, call.op)
            if status:
                return self._gc_fail(call, status), 0
        if call.cancelled():
            return self._gc_fail(call, Status.CANCELLED), 0
        # gc_end records the call once the accessor has moved the elements.
        return GC_PROCEED, buf.ptr + offset * buf.stored_bytes

    def _gc_fail(self, call: _Call, status: int) -> int:
        self.buffers.release(self.gc_reservation)
        self.gc_reservation = 0
        return self._finish(call, status)

    def gc_end(self, op_code: int, handle: int, offset: int, count: int) -> int:
        call = self._gc_call
        buf = self._buffer(handle)
        assert buf is not None
        count &= U32
        offset &= U32
        nbytes = count * buf.stored_bytes
        if GC_IMPORTS[op_code].startswith("set"):
            self.buffers.note_cpu_write(buf, offset, offset + count)
            call.op.guest_set_bytes += nbytes
            call.op.guest_set_count += 1
        else:
            call.op.guest_copy_bytes += nbytes
            call.op.guest_copy_count += 1
        self.buffers.release(self.gc_reservation)
        self.gc_reservation = 0
        return self._finish(call, Status.OK)
