"""setBuffer32/64 and copyBuffer32/64 (docs/design/abi.md §2.7-2.10): bulk moves between guest memory and a
buffer, one memmove (split over threads when large) once every check passed."""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

from ..abi.table import IMPORTS, Status
from ..buffers import Buffer
from ..diagnostics import COPY_COUNTERS, SET_COUNTERS
from ..memcopy import copy_bytes
from ._wasmtime import GuestCaller, GuestMemory
from .calls import U32, U64, Handlers, ImportCall, ImportGroup, ImportScope
from .memexports import memory_export_name



@dataclass(frozen=True)
class Direction:
    """What a transfer import's name and table signature say: set (guest -> buffer) or copy, and
    whether guest offsets are 64-bit."""

    is_set: bool
    is64: bool


_OK = Status.OK  # (a global: an enum member read through its class costs CPython 3.11 ~55 ns)
#: Every memory transfer of the ABI table, read off its name and its guest-offset parameter.
DIRECTIONS = {spec.name: Direction(spec.name.startswith("set"), spec.params[3] == "i64")
              for spec in IMPORTS if spec.name.startswith(("setBuffer", "copyBuffer")) and "anyref" not in spec.params}


class TransferImports(ImportGroup):
    """The memory transfers of one instance; guest memory is found through the calling instance."""

    def __init__(self, scope: ImportScope) -> None:
        super().__init__(scope)
        # (offsets 64-bit, memory index) -> the memory that passed steps 4-7: the contract, its
        # declarations and the scope's memory lookup are fixed for the instance's life.
        self._reachable: dict[tuple[bool, int], GuestMemory] = {}

    def handlers(self) -> Handlers:
        return {name: (partial(self.transfer, direction), True) for name, direction in DIRECTIONS.items()}

    def transfer(self, direction: Direction, caller: GuestCaller, handle: int, offset: int, memory_index: int,
                 guest_offset: int, count: int) -> int:
        offset &= U32
        count &= U32
        guest_offset &= U64 if direction.is64 else U32
        call = self._enter(count)
        checked = self._check(call, direction, caller, handle, offset, memory_index & U32, guest_offset, count)
        if isinstance(checked, int):
            return checked
        buf, guest = checked
        if count == 0:
            return self._finish(call, _OK)
        return self._move(call, direction, buf, offset, guest, count)

    def _check(self, call: ImportCall, direction: Direction, caller: GuestCaller, handle: int, offset: int,
               memory_index: int, guest_offset: int, count: int) -> tuple[Buffer, int] | int:
        """Steps 1-8: (buffer, guest address) or the finished call's status."""
        inst = self.buffers
        if self.ctx.stopped or inst.closed:  # (_live and _buffer, inline: two frames less per transfer)
            return self._finish(call, Status.INVALID_STATE)
        buf = inst.buffers.get(handle & U32)
        if buf is None:
            return self._finish(call, Status.INVALID_HANDLE, reason=self._no_buffer(handle))
        if offset + count > buf.length:
            return self._finish(call, Status.INVALID_RANGE, reason=self._past_end(buf, offset, count))
        memory = self._reachable.get((direction.is64, memory_index))
        if memory is None:
            found = self._memory(call, direction, caller, memory_index)
            if isinstance(found, int):
                return found
            memory = found
        guest_base, guest_size = caller.memory_span(memory.handle)
        if guest_offset + count * buf.stored_bytes > guest_size:
            return self._finish(call, Status.INVALID_RANGE, reason=f"guest bytes [{guest_offset}, "
                                f"{guest_offset + count * buf.stored_bytes}) lie past memory {memory_index}'s "
                                f"{guest_size} bytes")
        return buf, guest_base + guest_offset

    def _memory(self, call: ImportCall, direction: Direction, caller: GuestCaller,
                memory_index: int) -> GuestMemory | int:
        """Steps 4-7 on a memory's first transfer in this direction: the memory, kept once
        reachable, or the finished call's status (asked again next time)."""
        contract = self.module.contract
        if not contract.verified:
            return self._finish(call, Status.UNSUPPORTED_STORAGE,
                                reason=f"guest memory unknown: the module's contract is unverified ({contract.reason})")
        if memory_index >= len(contract.memories):
            return self._finish(call, Status.INVALID_RANGE, reason=f"the module has no memory {memory_index} "
                                f"({len(contract.memories)} memories)")
        decl = contract.memories[memory_index]
        width = "memory64" if direction.is64 else "memory32"
        if decl.shared or decl.is64 != direction.is64:
            return self._finish(call, Status.UNSUPPORTED_STORAGE, reason=f"memory {memory_index} is "
                                f"{'shared' if decl.shared else 'not ' + width} ({call.op.import_name})")
        memory = self.scope.memory(caller, memory_export_name(memory_index))
        if memory is None or memory.is64 != direction.is64:
            return self._finish(call, Status.UNSUPPORTED_STORAGE, reason=f"memory {memory_index} is not reachable "
                                f"as a {width} memory")
        self._reachable[(direction.is64, memory_index)] = memory
        return memory

    def _move(self, call: ImportCall, direction: Direction, buf: Buffer, offset: int, guest: int, count: int) -> int:
        res = self.ctx.residency
        inst = self.buffers
        op = call.op
        stored = buf.stored_bytes
        nbytes = count * stored
        if not direction.is_set:
            return self._copy_back(call, buf, guest, offset * stored, nbytes)
        full_set = offset == 0 and count == buf.length
        if not full_set:
            status = res.make_cpu_current(inst, buf, call.deadline, op, op)
            if status:
                return self._finish(call, status)
        clock = time.perf_counter
        if clock() >= call.deadline:
            return self._finish(call, Status.CANCELLED)
        profile = self.ctx.config.profile_stages  # (a commit time outside profile mode: _finish drops it)
        t0 = clock() if profile else 0.0
        if full_set:
            stage = res.set_copy(inst, buf, inst.cpu_address(buf), guest, nbytes)
            buf.record.note_cpu_write(0, count)
            res.keep_stage(buf, stage)
        else:
            copy_bytes(inst.cpu_address(buf) + offset * stored, guest, nbytes)
            buf.record.note_cpu_write(offset, offset + count)
        op.guest_set_bytes += nbytes
        op.guest_set_count += 1
        if profile:
            op.commit += clock() - t0
        # (a partial set may have read the buffer back first: its record holds those counters too)
        return self._finish(call, _OK, SET_COUNTERS if full_set else None)

    def _copy_back(self, call: ImportCall, buf: Buffer, guest: int, skip: int, nbytes: int) -> int:
        """From the CPU copy, a parked readback, or a readback published to the guest piece by
        piece (Residency.copy_back); its commit time (profile mode only) is what the readback
        itself did not take."""
        op = call.op
        profile = self.ctx.config.profile_stages
        if profile:
            t0 = time.perf_counter()
            read_s = op.download + op.conversion
        status = self.ctx.residency.copy_back(self.buffers, buf, guest, skip, nbytes, call.deadline, op, op)
        if status:
            return self._finish(call, status)
        op.guest_copy_bytes += nbytes
        op.guest_copy_count += 1
        if profile:
            op.commit += time.perf_counter() - t0 - (op.download + op.conversion - read_s)
        return self._finish(call, _OK, COPY_COUNTERS)
