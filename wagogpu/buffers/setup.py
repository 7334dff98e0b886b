"""The plan phase of a dispatch transaction: device copies for the inputs, scratch (or the
committed copy itself) for the outputs, the parameter block and the error word.

Every step records what it took in the Transaction before it can fail, so that the dispatcher's
unwind gives it all back; a step that fails returns the status that decides the answer, one that
passed returns None.
"""
from __future__ import annotations

from ..abi import accessor as acc
from ..abi.kernel import ERROR_WORD_BYTES, parameter_block
from ..abi.table import Status
from ..gpu import DeviceAllocationError
from .eviction import UNIFORM_BYTES
from .records import FLAGS_WORD, Buffer
from .residency import Residency
from .transaction import Transaction, Upload



def plan_slots(res: Residency, tx: Transaction) -> Status | None:
    """Bind every slot the kernel uses, in binding order (docs/design/abi.md §4.6 steps 2-5)."""
    plan, count, bound = tx.plan, tx.count, tx.bound
    write_slots, overwritten = plan.write_slots, plan.overwritten_slots
    for slot in plan.used_slots:
        buf = bound[slot]
        written = slot in write_slots
        replace = count == buf.length and slot in overwritten  # (plan.replaces_whole, inline: every dispatch)
        flags = buf.record.words[FLAGS_WORD]
        if flags & acc.LOST:
            return Status.CONTENTS_LOST
        if not replace and not flags & acc.GPU_CURRENT:  # (resident: nothing to upload)
            status = _gpu_copy(res, tx, buf)
            if status:
                return status
        if written:
            status = _output(res, tx, slot, buf, replace)
            if status:
                return status
        else:
            assert buf.gpu is not None  # _gpu_copy made it current
            tx.storage.append(buf.gpu)
    return None


def _gpu_copy(res: Residency, tx: Transaction, buf: Buffer) -> Status | None:
    """docs/design/abi.md §4.5: allocate the committed copy if needed and record the range that must be uploaded."""
    inst = tx.inst
    rec = buf.record
    flags = rec.words[FLAGS_WORD]
    if flags & acc.GPU_CURRENT:
        return None
    if not flags & acc.CPU_CURRENT:
        return Status.CONTENTS_LOST
    # Taken off the buffer before anything is reserved (a reservation may evict held stages).
    stage, buf.stage = buf.stage, None
    had_gpu = buf.gpu is not None
    if not had_gpu:
        if not inst.reserve(buf.gpu_bytes):
            res.drop_stage(inst, buf, stage)
            return Status.LIMIT_EXCEEDED
        try:
            buf.gpu = res.live.create_storage(buf.gpu_bytes)
        except DeviceAllocationError:
            inst.release(buf.gpu_bytes)
            res.drop_stage(inst, buf, stage)
            return Status.DEVICE_ERROR
        inst.gpu_charge += buf.gpu_bytes
    gpu = buf.gpu
    assert gpu is not None
    dirty = rec.dirty() if had_gpu and flags & acc.DIRTY else None
    start, end = dirty if dirty else (0, buf.length)
    if stage is not None:
        if start == 0 and end == buf.length and buf.stage_version == rec.version:
            tx.transient += stage.nbytes  # (reserved when the set filled it)
            tx.uploads.append(Upload(buf, gpu, 0, end, stage))  # the stage holds exactly this version's words
            return None
        res.drop_stage(inst, buf, stage)
    # A view of the accessor memory is fine: the device copies uploads before execute returns.
    words = inst.cpu_words(buf, start, end)
    if not inst.reserve(words.nbytes):
        return Status.LIMIT_EXCEEDED
    tx.transient += words.nbytes
    tx.uploads.append(Upload(buf, gpu, start, end, words))
    return None


def _written_in_place(res: Residency, tx: Transaction, buf: Buffer, replace: bool) -> bool:
    """The output's current contents are safe on the host (parked): the kernel may write the
    committed copy itself, and no scratch is needed. A failure restores from the parking
    (quarantine copies it in; a late cancellation writes it back). Not for a pipelined dispatch:
    it commits when recorded, and the parking goes with the commit."""
    return (res.tuning.in_place_outputs and replace and not tx.plan.error_word and not tx.pipelined
            and buf.parked_valid()
            and bool(buf.record.flags & acc.GPU_CURRENT))


def _output(res: Residency, tx: Transaction, slot: int, buf: Buffer, replace: bool) -> Status | None:
    """What the kernel writes for an output slot: pooled or new scratch, or the committed copy."""
    size = buf.gpu_bytes
    gpu, parked = buf.gpu, buf.parked
    if gpu is not None and parked is not None and _written_in_place(res, tx, buf, replace):
        tx.held_aside[slot] = (buf, parked)
        buf.parked = None  # held aside: no reservation below may evict it
        tx.outputs[slot] = (gpu, size)
        tx.storage.append(gpu)
        return None
    inst = tx.inst
    scratch = inst.device.take_idle_output(size)
    if scratch is None:
        if not inst.reserve(size):
            return Status.LIMIT_EXCEEDED
        try:
            scratch = (res.live.create_storage(size), size)
        except DeviceAllocationError:
            inst.release(size)
            return Status.DEVICE_ERROR
    tx.acquired.append(scratch)
    tx.outputs[slot] = scratch
    if buf.readahead_hint and size <= res.tuning.readahead_max_bytes:
        tx.readahead.append(scratch[0])
    if not replace:
        assert gpu is not None  # _gpu_copy made it current
        if slot in tx.plan.read_before_write:
            tx.seeds.append((gpu, scratch[0], 0, size))
        elif tx.count < buf.length:
            skip = tx.count * buf.gpu_stride
            tx.seeds.append((gpu, scratch[0], skip, size - skip))
    tx.storage.append(scratch[0])
    return None


def set_up_small_buffers(res: Residency, tx: Transaction) -> Status | None:
    """The parameter block (one 16-byte uniform per instance, rewritten only when the count or the
    kernel's loop budget changes; its payload reserved for this dispatch) and the error word a kernel may need.
    They are in use from here on: no reservation made meanwhile may evict them."""
    d = tx.inst.device
    error_word = tx.plan.error_word
    if d.uniform is not None and d.uniform_count == tx.count and d.uniform_budget == tx.plan.loop_budget \
            and (d.error_word is not None or not error_word):
        status = None  # the steady state of a resident loop: nothing to allocate or reserve
    else:
        d.small_in_use = True
        try:
            status = _small_buffers(res, tx)
        finally:
            d.small_in_use = False
    if not status and error_word:
        assert d.error_word is not None
        tx.storage.append(d.error_word[0])
    return status


def _small_buffers(res: Residency, tx: Transaction) -> Status | None:
    inst = tx.inst
    d = inst.device
    dev = res.live
    if d.uniform is None:
        if not inst.reserve(UNIFORM_BYTES):
            return Status.LIMIT_EXCEEDED
        try:
            d.uniform = dev.create_uniform(UNIFORM_BYTES)
        except DeviceAllocationError:
            inst.release(UNIFORM_BYTES)
            return Status.DEVICE_ERROR
        d.uniform_allocations += 1
        d.uniform_count = None
    if d.uniform_count != tx.count or d.uniform_budget != tx.plan.loop_budget:
        if not inst.reserve(UNIFORM_BYTES):
            return Status.LIMIT_EXCEEDED
        tx.params = parameter_block(tx.count, tx.plan.loop_budget)
        tx.transient += UNIFORM_BYTES
    if tx.plan.error_word and d.error_word is None:
        if not inst.reserve(2 * ERROR_WORD_BYTES):
            return Status.LIMIT_EXCEEDED
        try:
            d.error_word = (dev.create_storage(ERROR_WORD_BYTES), dev.create_staging(ERROR_WORD_BYTES))
        except DeviceAllocationError:
            inst.release(2 * ERROR_WORD_BYTES)
            return Status.DEVICE_ERROR
    return None
