"""The quarantine (docs/design/abi.md §4.7) without collateral loss: what the device can still give back is
read back before anything is marked CONTENTS_LOST.

The reference marks every GPU-only buffer of every instance lost the moment the runtime is
quarantined, so one guest's runaway kernel destroys another guest's committed results. Here the
quarantine is one entry point, Residency.quarantine(reason, unreadable=()), which hands the work to
the residency's QuarantineLatch (the owner of the latch, its reason and its report); it always runs
these steps in this order:

1. Latch. The runtime is quarantined from here on: no dispatch or readback plans new GPU work.
2. Confirm. Wait, submitting nothing, until the work that timed-out waits left on the device is
   done (GpuDevice.settle), at most TransferTuning.quarantine_readback_seconds from the start of
   the quarantine. Nothing may be submitted before this: on lavapipe a submission blocks inside
   the driver until the work before it is done, and no timeout can interrupt it. Work that is
   still unconfirmed when the bound passes makes the whole device unreadable. Buffers whose
   committed contents depend on work that cannot be confirmed are passed in ``unreadable``.
3. Read back. When the device is open, not lost and settled, every instance's committed GPU-only
   buffers (GPU-current, not CPU-current, not lost, not ``unreadable``) are read into their CPU
   copies, one after another, within what is left of the bound; a read that times out ends the
   step. Parked readbacks of the current version are copied in from host memory, as before.
4. Lose the rest. Whatever could not be read becomes CONTENTS_LOST (docs/design/abi.md §4.7's marking);
   upload stages are dropped.

Only the first quarantine of a runtime reads anything back (later calls only mark). A failed
dispatch's scratch outputs are never among the buffers read: they were never committed. The reads
go through one temporary staging buffer, not charged to any instance (it exists only inside this
step, under the host lock); after a failed read it is abandoned to the device, never reused.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..abi import accessor as acc
from ..diagnostics import QuarantineReport
from ..gpu import BufferHandle, DeviceAllocationError, DeviceFailure
from .convert import words_to_stored
from .eviction import Held
from .records import Buffer
from .table import InstanceBuffers

if TYPE_CHECKING:  # pragma: no cover  (type-only: the residency owns its latch and calls it)
    from ..gpu.device import GpuDevice
    from .residency import Residency



def needs_reading(buf: Buffer) -> bool:
    """Only the device holds buf's committed contents (and they are not lost already)."""
    flags = buf.record.flags
    return buf.gpu is not None and bool(flags & acc.GPU_CURRENT) and not flags & (acc.CPU_CURRENT | acc.LOST) \
        and not buf.parked_valid()


class Rescue:
    """Step 3 on one device: reads committed GPU-only buffers into their CPU copies until the
    deadline, or until a read times out."""

    def __init__(self, device: GpuDevice, deadline: float) -> None:
        self.device = device
        self.deadline = deadline
        self.readable = True
        self.staging: BufferHandle | None = None
        self.buffers = 0
        self.bytes = 0

    def read(self, inst: InstanceBuffers, buf: Buffer) -> bool:
        """Read buf's device copy into its CPU copy; True when buf is CPU-current now."""
        remaining = self.deadline - time.perf_counter()
        if not self.readable or remaining <= 0:
            self.readable = False
            return False
        assert buf.gpu is not None
        size = buf.gpu_bytes
        try:
            staging = self._staging(size)
        except DeviceAllocationError:
            return False
        direct = inst.cpu_bytes(buf).view("<u4") if buf.raw else None
        try:
            words = self.device.read(buf.gpu, staging, size, remaining, out=direct)
        except DeviceFailure as exc:
            self.staging = None  # its state is unknown: left to the device, never reused
            data = getattr(exc, "data", None)
            if data is None:
                self.readable = not exc.timed_out
                return False
            words, direct = data, None  # the words arrived before the failure
        if direct is None:
            inst.cpu_bytes(buf)[:] = words_to_stored(words, buf.stored_bytes)
        buf.record.mark_cpu_current()
        self.buffers += 1
        self.bytes += buf.nbytes
        return True

    def _staging(self, size: int) -> BufferHandle:
        staging = self.staging
        if staging is None or staging.nbytes < size:
            if staging is not None:
                self.device.release(staging)
                self.staging = None
            staging = self.staging = self.device.create_staging(size)
        return staging

    def close(self) -> None:
        if self.staging is not None:
            self.device.release(self.staging)
            self.staging = None


class QuarantineLatch:
    """The runtime's quarantine: latched once for its life (docs/design/abi.md §4.7), with the reason and the report
    of its one read-back. It owns these fields; the residency reads them and hands it the work."""

    __slots__ = ("latched", "reason", "report")

    def __init__(self) -> None:
        self.latched = False
        self.reason = ""
        self.report: QuarantineReport | None = None

    def enter(self, res: Residency, reason: str, unreadable: Iterable[Buffer] = ()) -> None:
        """The one entry point (see the module docstring): latch, confirm, read back, lose the rest."""
        t0 = time.perf_counter()
        first = not self.latched
        if first:
            self.latched = True
            self.reason = reason
        rescue = _confirm(res, t0) if first else None
        t1 = time.perf_counter()
        lost = _read_back_or_lose(res, rescue, {id(buf) for buf in unreadable})
        if first:
            self.report = QuarantineReport(
                reason=reason, settled=rescue is not None, rescued_buffers=rescue.buffers if rescue else 0,
                rescued_bytes=rescue.bytes if rescue else 0, lost_buffers=lost, settle_seconds=t1 - t0,
                rescue_seconds=time.perf_counter() - t1)


def _read_back_or_lose(res: Residency, rescue: Rescue | None, skip: set[int]) -> int:
    """Steps 3-4 over every instance's buffers: the number left CONTENTS_LOST."""
    lost = 0
    try:
        for inst in list(res.budget.instances):
            for buf in inst.buffers.values():
                _keep_host_copies(res, inst, buf)
                if rescue is not None and needs_reading(buf) and id(buf) not in skip:
                    rescue.read(inst, buf)
                if not buf.record.flags & (acc.CPU_CURRENT | acc.LOST):
                    lost += 1
                buf.record.mark_quarantined()
    finally:
        if rescue is not None:
            rescue.close()
    return lost


def _confirm(res: Residency, t0: float) -> Rescue | None:
    """Step 2: a Rescue when the device can be read (open, not lost, its queue settled in time)."""
    device = res.device
    if device is None or device.closed or device.is_lost():
        return None
    deadline = t0 + res.tuning.quarantine_readback_seconds
    if not device.settle(deadline - time.perf_counter()):
        return None
    return Rescue(device, deadline)


def _keep_host_copies(res: Residency, inst: InstanceBuffers, buf: Buffer) -> None:
    """A parked readback of the current version is host memory: copy it in (while the device is
    open, so the mapping is still valid) and let the staging go; an upload stage goes too."""
    if buf.parked is not None:
        if buf.parked_valid() and res.device is not None and not res.device.closed:
            res.materialize(inst, buf)
        res.unpark(inst, buf, keep=False)
    if buf.stage is not None:
        res.drop_held(inst, buf, Held.STAGE)
