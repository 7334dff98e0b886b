"""Where buffer contents live: lazy readbacks, prestaged uploads, parked readbacks and the
quarantine latch (docs/design/abi.md §4.3-4.7). Runs under the host lock; knows buffers, not Wasm.

Ownership: a Host owns one Residency, which owns the device (the host opens it and closes it)
and decides, for every instance of that host, when contents move between the CPU copy and the
device copy. The dispatch transaction (transaction.py) runs on top of it.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..abi import accessor as acc
from ..abi.table import Status
from ..diagnostics import BufferOperation, LoopLimits, QuarantineReport, TransferCounters
from ..gpu import BufferHandle, DeviceAllocationError, DeviceFailure, UploadStage
from ..gpu.probe import loop_budget
from ..memcopy import copy_bytes, copy_many
from .budget import RuntimeBudget
from .convert import words_to_stored
from .copyout import GuestPublish, HostScratch, copy_range
from .eviction import Held
from .quarantine import QuarantineLatch
from .pending import PendingWork
from .records import FLAGS_WORD, Buffer
from .table import InstanceBuffers
from .tuning import PipelineTuning, ResolvedTuning, TransferTuning

if TYPE_CHECKING:  # pragma: no cover
    from ..gpu.backend import BackendFlags
    from ..gpu.device import GpuDevice


class _NoDeviceFlags:
    """The loss flags of a residency without a device (never lost; read-only)."""

    __slots__ = ()
    lost = False


_NO_DEVICE_FLAGS = _NoDeviceFlags()

#: Read as a global on the transfers' hot path (an enum member read through its class costs
#: CPython 3.11 about 55 ns, a global about 6).
_OK = Status.OK
_CPU_CURRENT, _LOST = acc.CPU_CURRENT, acc.LOST  # (the copy back's flag tests, as globals too)
_CURRENT_OR_LOST = acc.CPU_CURRENT | acc.LOST


class Residency:
    """The device, the quarantine latch and the moves of buffer contents for one host."""

    def __init__(self, device: GpuDevice | None, budget: RuntimeBudget, profile_stages: bool,
                 tuning: TransferTuning | None = None, pipeline: PipelineTuning | None = None,
                 stage_times: bool | None = None):
        self.device = device
        # The device's loss flag, read before check_loss is called.
        self.loss_flags: BackendFlags | _NoDeviceFlags = device.loss_flags if device is not None else _NO_DEVICE_FLAGS
        self.budget = budget
        self.profile_stages = profile_stages
        # Whether the records' stage durations are written: in profile mode, and where measured
        # placement reads them before the record closes (else the record would drop them).
        self.stage_times = profile_stages if stage_times is None else stage_times
        self.tuning = ResolvedTuning.resolve(tuning or TransferTuning(), device)
        self.latch = QuarantineLatch()
        self._totals_complete = True
        # Measured when the device opened (once per adapter in the process): see gpu/probe.py.
        self.loop_limits: LoopLimits | None = device.loop_limits if device is not None else None
        self.pending = PendingWork(self, pipeline)  # pipelined dispatches not yet confirmed
        self.backup = HostScratch()  # a pieced copy-back keeps the guest's bytes here until it cannot fail

    def loop_budget(self, loops: int, ceiling: int) -> int:
        """Loop-head passes one invocation of a kernel with ``loops`` loops may make here: the
        compiler's ``ceiling``, lower where the adapter cuts loops short (0 for a loop-free kernel)."""
        if loops <= 0 or ceiling <= 0 or self.loop_limits is None:
            return 0
        limit = loop_budget(self.loop_limits, loops)
        return ceiling if limit is None else min(ceiling, limit)

    # -- quarantine -----------------------------------------------------------------------
    @property
    def quarantined(self) -> bool:
        return self.latch.latched

    @property
    def quarantine_reason(self) -> str:
        return self.latch.reason

    @property
    def quarantine_report(self) -> QuarantineReport | None:
        return self.latch.report

    @property
    def totals_complete(self) -> bool:
        """Every transfer's outcome is known (the Totals' transfer counters are exact)."""
        return self._totals_complete

    def counts_incomplete(self) -> None:
        """A transfer's outcome is unknown (a failure after submission): the Totals say so from now on."""
        self._totals_complete = False

    @property
    def usable(self) -> bool:
        return self.device is not None and not self.latch.latched

    @property
    def live(self) -> GpuDevice:
        """The device, where the caller established there is one (usable, or holding a buffer)."""
        device = self.device
        if device is None:
            raise RuntimeError("no device: the residency has none to use")
        return device

    def _device_open(self) -> bool:
        return self.device is not None and not self.device.closed

    def check_loss(self) -> None:
        """Quarantine on a device loss not yet latched. (Hot callers ask ``loss_flags.lost`` first.)"""
        if self.device is not None and not self.latch.latched and self.device.is_lost():
            if self.pending:  # unconfirmed pipelined outputs are lost, never read back
                self.pending.lose("device lost")
            self.quarantine("device lost")

    def quarantine(self, reason: str, unreadable: Iterable[Buffer] = ()) -> None:
        """Latch for the runtime's life (docs/design/abi.md §4.7); committed GPU-only contents the device can still give
        back within TransferTuning.quarantine_readback_seconds are read back first, the rest (and
        ``unreadable``) become CONTENTS_LOST. The order of the steps: quarantine.py."""
        self.latch.enter(self, reason, unreadable)

    def release_device_buffer(self, gpu_buf: BufferHandle | None) -> None:
        if self.device is not None and gpu_buf is not None:
            self.device.release(gpu_buf)

    # -- upload stages and parked readbacks (extensions; see TransferTuning) ---------------------
    def drop_held(self, inst: InstanceBuffers, buf: Buffer, what: Held = Held.ALL) -> None:
        """Let go of buf's upload stage (unused: stop prestaging it) and/or its parked readback.
        STAGE and PARKED evict: a parked readback of the current version is first copied into the
        CPU copy (the buffer stays CPU-current, as a plain readback leaves it) and its staging is
        released. ALL (the buffer is being freed) keeps the staging for the next readback."""
        if what is not Held.PARKED:
            stage, buf.stage = buf.stage, None
            self.drop_stage(inst, buf, stage)
        if what is not Held.STAGE and buf.parked is not None:
            if what is Held.PARKED and buf.parked_valid() and not buf.record.flags & acc.CPU_CURRENT \
                    and self._device_open():
                self.materialize(inst, buf)
            self.unpark(inst, buf, keep=what is Held.ALL)

    def drop_stage(self, inst: InstanceBuffers, buf: Buffer, stage: UploadStage | None) -> None:
        """An upload stage that will not be used: its charge goes, and so does the hint."""
        if stage is not None:
            inst.release(stage.nbytes)
            buf.stage_hint = False
            if self.device is not None:
                self.device.unstage(stage)

    def set_copy(self, inst: InstanceBuffers, buf: Buffer, cpu: int, guest: int, nbytes: int) -> UploadStage | None:
        """A full set's copy into the CPU copy; also into an upload stage when the next dispatch is
        likely to upload this buffer whole. Returns the stage for keep_stage() after the set commits."""
        tuning = self.tuning
        if nbytes < tuning.prestage_min_bytes and buf.stage is None and buf.parked is None:
            copy_bytes(cpu, guest, nbytes)  # the small sets of the hot path
            return None
        if buf.parked is not None:
            self.unpark(inst, buf)
        stage, buf.stage = buf.stage, None
        if stage is None and buf.stage_hint and nbytes >= tuning.prestage_min_bytes and buf.raw \
                and self.usable and inst.reserve(nbytes):
            try:
                stage = self.live.stage(nbytes)
            except (DeviceAllocationError, DeviceFailure):
                inst.release(nbytes)
        if stage is None:
            copy_bytes(cpu, guest, nbytes)
        else:
            host_threads, stage_threads = tuning.set_copy_threads
            copy_many([(cpu, guest, nbytes, host_threads), (stage.address, guest, nbytes, stage_threads)])
        return stage

    def keep_stage(self, buf: Buffer, stage: UploadStage | None) -> None:
        if stage is not None:
            buf.stage = stage
            buf.stage_version = buf.record.version

    def unpark(self, inst: InstanceBuffers, buf: Buffer, keep: bool = True) -> None:
        """End buf's parked readback; its staging becomes the instance's again (or is released)."""
        parked, buf.parked = buf.parked, None
        if parked is None:
            return
        staging, size = parked
        d = inst.device
        if keep and d.staging is None and self._device_open():
            self.live.unmap(staging)
            d.staging = parked
        else:
            self.release_device_buffer(staging)
            inst.release(size)

    def materialize(self, inst: InstanceBuffers, buf: Buffer) -> None:
        """Copy a valid parked readback into the CPU copy: the buffer is CPU-current again."""
        assert buf.parked is not None
        copy_range(inst.cpu_address(buf), buf.parked[0], 0, buf.nbytes)
        buf.record.mark_cpu_current()

    def copy_back(self, inst: InstanceBuffers, buf: Buffer, guest: int, skip: int, nbytes: int, deadline: float,
                  counters: TransferCounters, op: BufferOperation) -> Status:
        """A copy-back's move: bytes [skip, skip+nbytes) of buf's current contents to guest memory
        at ``guest``, from the CPU copy or a parked readback; a big buffer whose CPU copy is stale
        is read back and parked, and published to the guest piece by piece as its pieces arrive
        (copyout.GuestPublish: a failure puts the guest's bytes back). Past ``deadline`` before
        anything was published: CANCELLED, and the guest's memory is untouched."""
        if self.pending.dispatches and not buf.record.words[FLAGS_WORD] & _CPU_CURRENT:
            status = self.pending.settle(deadline)  # the device's answer first (pending.py)
            if status:
                return status
        flags = buf.record.words[FLAGS_WORD]
        if not flags & _CURRENT_OR_LOST and buf.parked is not None:
            if buf.parked_valid():
                if time.perf_counter() >= deadline:
                    return Status.CANCELLED
                copy_range(guest, buf.parked[0], skip, nbytes)
                return _OK
            self.unpark(inst, buf)
        if flags & _CURRENT_OR_LOST or not buf.raw or buf.gpu_bytes < self.tuning.park_min_bytes:
            status = self.make_cpu_current(inst, buf, deadline, counters, op)
            if status:
                return status
            if time.perf_counter() >= deadline:
                return Status.CANCELLED
            copy_bytes(guest, inst.cpu_address(buf) + skip, nbytes)
            return _OK
        sink = GuestPublish(guest, skip, nbytes, deadline, self.backup)
        status = self._readback(inst, buf, deadline, counters, op, park=True, sink=sink)
        if status:
            return status
        if sink.cancelled:
            return Status.CANCELLED
        return _OK

    # -- CPU side -----------------------------------------------------------------------------
    def make_cpu_current(self, inst: InstanceBuffers, buf: Buffer, deadline: float,
                         counters: TransferCounters, op: BufferOperation | None = None) -> Status:
        """docs/design/abi.md §4.4: the whole buffer read back once when the CPU copy is stale."""
        if self.pending.dispatches and not buf.record.words[FLAGS_WORD] & _CPU_CURRENT:
            status = self.pending.settle(deadline)  # the device's answer first (pending.py)
            if status:
                return status
        flags = buf.record.words[FLAGS_WORD]
        if flags & _LOST:
            return Status.CONTENTS_LOST
        if flags & _CPU_CURRENT:
            return _OK
        if buf.parked is not None:
            # This version was read back already (and counted then): copy it in from the parking.
            valid = buf.parked_valid()
            if valid:
                self.materialize(inst, buf)
            self.unpark(inst, buf)
            if valid:
                return _OK
        return self._readback(inst, buf, deadline, counters, op, False)

    def make_cpu_replaceable(self, inst: InstanceBuffers, buf: Buffer, deadline: float,
                             counters: TransferCounters, op: BufferOperation | None = None) -> Status:
        """make_cpu_current for a buffer a CPU kernel is about to overwrite whole: a stale CPU copy
        is not read back (the kernel replaces every byte; a trap leaves the copy stale, its flags
        untouched, so nothing is published). A current, lost or parked one goes through
        make_cpu_current (a parked copy comes in by memcpy, no device wait)."""
        if self.pending.dispatches and not buf.record.words[FLAGS_WORD] & acc.CPU_CURRENT:
            status = self.pending.settle(deadline)  # the device's answer first (pending.py)
            if status:
                return status
        if buf.record.words[FLAGS_WORD] & (acc.CPU_CURRENT | acc.LOST) or buf.parked is not None:
            return self.make_cpu_current(inst, buf, deadline, counters, op)
        return _OK

    def _staging_for(self, inst: InstanceBuffers, size: int) -> Status:
        """The instance's readback staging, of exactly size bytes (reserved and allocated if needed)."""
        d = inst.device
        if d.staging is not None and d.staging[1] == size:
            return _OK
        if d.staging is not None:
            self.release_device_buffer(d.staging[0])
            inst.release(d.staging[1])
            d.staging = None
        if not inst.reserve(size):
            return Status.LIMIT_EXCEEDED
        tuning = self.tuning
        try:
            staging = self.live.create_staging(size, tuning.readback_pieces, tuning.readback_piece_min_bytes)
        except DeviceAllocationError:
            inst.release(size)
            return Status.DEVICE_ERROR
        d.staging = (staging, size)
        d.staging_allocations += 1
        return _OK

    def _readback(self, inst: InstanceBuffers, buf: Buffer, deadline: float, counters: TransferCounters,
                  op: BufferOperation | None, park: bool, sink: GuestPublish | None = None) -> Status:
        """docs/design/abi.md §4.4 steps 3-7: into the CPU copy, or (park) left mapped in the staging as
        buf.parked, each piece also handed to ``sink`` as it arrives (undone if the read fails)."""
        if self.loss_flags.lost:
            self.check_loss()
        dev = self.device  # (usable and live, read once: two property frames less per readback)
        if dev is None or self.latch.latched or buf.gpu is None:
            self.quarantine(self.quarantine_reason or "no usable device holds the current contents")
            return Status.CONTENTS_LOST
        size = buf.gpu_bytes
        status = self._staging_for(inst, size)
        if status:
            return status
        d = inst.device
        assert d.staging is not None and buf.gpu is not None
        if op is not None:
            op.hardware_submitted = not dev.info.is_software
        t0 = time.perf_counter()
        # Whole-word types read straight into the (stale, not yet current) CPU copy.
        direct = inst.cpu_words(buf, 0, buf.length) if buf.raw and not park else None  # (a view: little-endian host, records.py)
        try:
            if park:
                dev.read_mapped(buf.gpu, d.staging[0], size, max(0.0, deadline - t0), sink)
            else:
                words = dev.read(buf.gpu, d.staging[0], size, max(0.0, deadline - t0), direct)
        except DeviceFailure as exc:
            if sink is not None:
                sink.undo()  # nothing of a failed copy-back stays in guest memory
            return self._readback_failed(inst, buf, exc, deadline, op)
        t1 = time.perf_counter()
        if park:
            buf.parked, d.staging = d.staging, None
            buf.parked_version = buf.record.version
        else:
            if direct is None:
                inst.cpu_bytes(buf)[:] = words_to_stored(words, buf.stored_bytes)
            buf.record.mark_cpu_current()
        buf.readahead_hint = True
        buf.readahead_sent = False
        if op is not None and self.stage_times:
            op.download += t1 - t0
            op.conversion += time.perf_counter() - t1
        counters.logical_download_bytes += buf.nbytes
        counters.gpu_download_bytes += size
        counters.download_count += 1
        return _OK

    def _readback_failed(self, inst: InstanceBuffers, buf: Buffer, exc: DeviceFailure, deadline: float,
                         op: BufferOperation | None) -> Status:
        self.counts_incomplete()
        if op is not None:
            op.transfer_counts_complete = False
        data = getattr(exc, "data", None)
        if data is not None:  # the words arrived before the failure
            inst.cpu_bytes(buf)[:] = words_to_stored(data, buf.stored_bytes)
            buf.record.mark_cpu_current()
        # The staging buffer's state is unknown now: keep it charged as retired, never reuse it.
        d = inst.device
        assert d.staging is not None
        d.retired_bytes += d.staging[1]
        d.staging = None
        self.quarantine(f"readback failed: {exc}")
        return Status.CANCELLED if exc.timed_out or time.perf_counter() >= deadline else Status.DEVICE_ERROR
