"""Runs the GPU dispatch transaction (docs/design/abi.md §4.6): plan -> submit -> commit, or unwind.

Outputs go to private scratch and are committed together after the device completed (an output
whose current contents are parked may be written in place: TransferTuning.in_place_outputs). A
Transaction records everything the attempt acquired, uploaded, seeded and held aside, so that
there is one way back for each kind of end:

  unwind  nothing was published and the device is fine: scratch back to the pool, payload charges
          released, held-aside parkings reattached (a refusal before submit, a kernel that reported
          an error, a late cancellation);
  fail    the device's state is unknown: what it may still hold stays charged as retired, the
          runtime is quarantined, and the deadline decides between CANCELLED and a fallback.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Collection, Iterable, Sequence

import numpy as np

from ..abi.kernel import ERROR_WORD_BYTES, KernelError, workgroup_grid
from ..abi.table import Status
from ..diagnostics import BufferOperation, ReasonCode
from ..gpu import BufferHandle, DeviceFailure, ExecutePlan, ExecuteResult, UploadStage
from .eviction import UNIFORM_BYTES, Scratch, give_back_scratch
from .memory import view_at
from .records import Buffer
from .residency import Residency
from .setup import plan_slots, set_up_small_buffers
from .snapshots import bind_snapshot
from .steady import SteadyPlan, Taken
from .table import InstanceBuffers
from .transaction import (PUBLISHED, DispatchEnd, DispatchPlan, DispatchResult, Transaction, Upload,
                          refused_or_fallback)

KERNEL_ERROR_REASONS: dict[int, ReasonCode] = {KernelError.TRAP: ReasonCode.KERNEL_TRAP,
                                               KernelError.LOOP_BUDGET: ReasonCode.LOOP_BUDGET,
                                               KernelError.INDEX_RANGE: ReasonCode.INDEX_RANGE}
#: What each error word means, in words for the dispatch record's reason (and `wagogpu run`'s lines).
KERNEL_ERROR_WORDS: dict[int, str] = {
    KernelError.TRAP: "the GPU kernel hit a Wasm trap (division by zero, signed overflow or a trapping truncation)",
    KernelError.LOOP_BUDGET: "a loop of the GPU kernel ran out of its iteration budget",
    KernelError.INDEX_RANGE: "the GPU kernel read outside a buffer",
}


_NO_UPLOADS: tuple[()] = ()
_grid = functools.lru_cache(maxsize=256)(workgroup_grid)  # a chain asks for the same few grids
#: What a pipelined dispatch reports as its device timings: none were waited for.
_RECORDED = ExecuteResult(0.0, 0.0, 0.0, 0.0, None, False, False)
_CANCELLED = DispatchResult(DispatchEnd.REFUSED, Status.CANCELLED)  # what refused_or_fallback answers for it


class Dispatcher:
    """Runs dispatch transactions on one host's residency.

    pipelined: a kernel that cannot raise the error word commits when its dispatch is recorded
    and returns before the device ran it (pending.py); the others keep the waited transaction.
    """

    def __init__(self, residency: Residency, pipelined: bool = False):
        self.res = residency
        self.pipelined = pipelined

    def run(self, inst: InstanceBuffers, plan: DispatchPlan, bound: dict[int, Buffer], count: int,
            deadline: float, op: BufferOperation, guest_memory: tuple[int, int] | None = None) -> DispatchResult:
        """One dispatch transaction; one in the steady state of its binding set (steady.py) runs
        repeat()'s fixed sequence (_steady_enqueue's when pipelined) instead of the plan phase below."""
        res = self.res
        pipelined = self.pipelined and not plan.error_word
        pending = res.pending
        steady = self._steady_plan(inst, plan, bound)
        if pending.dispatches and (not pipelined or pending.due(
                steady.written_bytes if steady is not None else sum([bound[s].gpu_bytes for s in plan.write_slots]))):
            settled = pending.settle(deadline)  # a waited dispatch, or a bound reached: confirm first
            if settled:
                return refused_or_fallback(settled, res.quarantine_reason)
        if not res.usable:  # (a loss was checked when the import was entered: ImportGroup._enter)
            return refused_or_fallback(Status.CONTENTS_LOST, res.quarantine_reason)
        if steady is not None and count == steady.count:
            repeated = self.repeat(inst, steady, deadline, op)  # (its checks pass: settled and usable above)
            if repeated is not None:
                return repeated
        tx = Transaction(inst, plan, bound, count, deadline, op, pipelined=pipelined)
        tx.guest_memory = guest_memory
        status: Status | None = plan_slots(res, tx)  # (None: the step passed)
        if not status:
            status = set_up_small_buffers(res, tx)
        if not status and plan.memory >= 0:
            status = bind_snapshot(res, tx)
        if not status and time.perf_counter() >= deadline:
            status = Status.CANCELLED
        if status:
            return self.unwind(tx, refused_or_fallback(status, res.quarantine_reason))
        return self._enqueue(tx) if pipelined else self._submit(tx)

    def repeat(self, inst: InstanceBuffers, steady: SteadyPlan, deadline: float,
               op: BufferOperation) -> DispatchResult | None:
        """The steady state's fixed sequence (steady.py), for run() and for a caller that holds the
        binding set's current steady plan (steady_plan()) and dispatches its count again: take, the
        ExecutePlan for these handles (a kept one when nothing is uploaded), one waited execute, the
        commit; _steady_enqueue's when pipelined. What _submit, _completed and _publish do for a
        transaction that seeds nothing and writes no parameters, in the same order and with the
        same ways back. None, with nothing taken, in any state but the steady one with no pending
        work to settle first (waited: none pending; pipelined: no bound reached): run() decides
        then. (One frame for the whole sequence: it runs on every resident dispatch.)"""
        res = self.res
        pending = res.pending
        if pending.dispatches and (not self.pipelined or pending.due(steady.written_bytes)) \
                or res.device is None or res.latch.latched:  # (not usable: Residency.usable, inline)
            return None
        took = steady.take(inst, res.tuning.readahead_max_bytes, res.profile_stages)
        if took is None:
            return None
        if self.pipelined:  # (a steady plan's kernel never raises the error word: run() pipelines it)
            return self._steady_enqueue(inst, steady, took, deadline, op)
        clock = time.perf_counter
        now = clock()
        if now >= deadline:
            return self.unwind(steady.transaction(inst, deadline, op, took), _CANCELLED)
        execute, scratch, uploads, transient = took
        dev = res.device
        assert dev is not None  # (usable, checked above)
        op.hardware_submitted = not dev.info.is_software
        try:
            result = dev.execute(execute, deadline - now)  # (> 0: checked just above)
        except DeviceFailure as exc:
            return self.fail(steady.transaction(inst, deadline, op, took), f"dispatch failed at {exc.stage}: {exc}", exc)
        if uploads:
            inst.release(transient)  # the payloads are on the device now
            took = (execute, scratch, uploads, 0)
            self._uploaded(op, uploads)
        self._timed(op, result)
        op.confirmed = True
        if clock() >= deadline:  # (nothing was written in place: nothing to restore)
            return self.unwind(steady.transaction(inst, deadline, op, took), _CANCELLED)
        if res.loss_flags.lost:  # (dev.is_lost(), without the call)
            return self.fail(steady.transaction(inst, deadline, op, took), "device lost after dispatch")
        self._commit_outputs(inst, zip(steady.written, scratch), execute.readahead, op)
        return PUBLISHED

    def steady_plan(self, inst: InstanceBuffers, plan: DispatchPlan) -> SteadyPlan | None:
        """The steady plan run() keeps for plan under the instance's current binding set, if made."""
        known = inst.steady_plans.get(id(plan))
        if known is None or known[0] is not plan or known[1] != inst.bindings_epoch:
            return None
        return known[2]

    def _execute_plan(self, tx: Transaction) -> ExecutePlan:
        d = tx.inst.device
        assert d.uniform is not None  # set up with the small buffers
        uploads = [(u.gpu, u.start * u.buf.gpu_stride, u.words) for u in tx.uploads] if tx.uploads else _NO_UPLOADS
        readahead = tx.readahead
        if tx.plan.error_word:
            assert d.error_word is not None
            uploads = [*uploads, (d.error_word[0], 0, np.zeros(ERROR_WORD_BYTES // 4, dtype=np.uint32))]
            if self.res.tuning.readahead_max_bytes:
                # The error word's copy rides in the dispatch's own submission: its read after the
                # wait is served from that copy, so the round trip makes one submission, not two.
                readahead = [*readahead, d.error_word[0]]
        return ExecutePlan(tx.plan.pipeline, d.uniform, tx.params, tx.storage, uploads, tx.seeds, _grid(tx.count),
                           self.res.profile_stages, None, readahead)

    def _enqueue(self, tx: Transaction) -> DispatchResult:
        """The pipelined path: recorded is committed (the device runs work in recorded order); the
        device's answer is awaited when something needs it (pending.py)."""
        res = self.res
        try:
            ticket = res.live.enqueue(self._execute_plan(tx), max(0.0, tx.deadline - time.perf_counter()))
        except DeviceFailure as exc:
            if res.pending:
                res.pending.lose(f"recording a pipelined dispatch failed at {exc.stage}: {exc.message}")
            return self.fail(tx, f"dispatch failed at {exc.stage}: {exc}", exc)
        tx.inst.release(tx.transient)  # the payloads were copied when recorded
        tx.transient = 0
        tx.op.pipelined = True
        self._completed(tx, _RECORDED)
        self._commit(tx)
        bound = tx.bound
        written = tuple([bound[slot] for slot in tx.outputs])
        res.pending.add(ticket, tx.op, tx.inst, written, sum([buf.gpu_bytes for buf in written]))
        return PUBLISHED

    def _submit(self, tx: Transaction) -> DispatchResult:
        dev = self.res.live
        d = tx.inst.device
        execute = self._execute_plan(tx)
        tx.op.hardware_submitted = not dev.info.is_software  # a software adapter is no GPU
        try:
            result = dev.execute(execute, max(0.0, tx.deadline - time.perf_counter()))
        except DeviceFailure as exc:
            return self.fail(tx, f"dispatch failed at {exc.stage}: {exc}", exc)
        tx.inst.release(tx.transient)  # the payloads are on the device now
        tx.transient = 0
        kernel_error = 0
        if tx.plan.error_word:
            assert d.error_word is not None
            try:
                kernel_error = int(dev.read(d.error_word[0], d.error_word[1], ERROR_WORD_BYTES,
                                            max(0.0, tx.deadline - time.perf_counter()))[0])
            except DeviceFailure as exc:
                return self.fail(tx, f"error word readback failed: {exc}", exc)
        self._completed(tx, result)
        tx.op.confirmed = True
        return self._publish(tx, kernel_error)

    @staticmethod
    def _steady_plan(inst: InstanceBuffers, plan: DispatchPlan, bound: dict[int, Buffer]) -> SteadyPlan | None:
        """The steady plan of plan's binding set, made on its second dispatch under the same
        bindings (a binding set dispatched once is not worth one); None before that."""
        epoch = inst.bindings_epoch
        key = id(plan)
        known = inst.steady_plans.get(key)
        if known is None or known[0] is not plan or known[1] != epoch:
            inst.steady_plans[key] = (plan, epoch, None)
            return None
        steady = known[2]
        if steady is None:
            steady = SteadyPlan(plan, bound)
            inst.steady_plans[key] = (plan, epoch, steady)
        return steady

    def _steady_enqueue(self, inst: InstanceBuffers, steady: SteadyPlan, took: Taken, deadline: float,
                        op: BufferOperation) -> DispatchResult:
        """The pipelined steady state: what _enqueue does for a transaction that seeds nothing and
        writes no parameters (record, give back the payloads' charge, count the uploads, commit
        when recorded, queue the outputs as unconfirmed), in the same order and with the same
        ways back."""
        res = self.res
        execute, scratch, uploads, transient = took
        now = time.perf_counter()
        if now >= deadline:
            return self.unwind(steady.transaction(inst, deadline, op, took), _CANCELLED)
        dev = res.device
        assert dev is not None  # (usable: repeat() checked it)
        try:
            ticket = dev.enqueue(execute, deadline - now)  # (> 0: checked just above)
        except DeviceFailure as exc:
            if res.pending:
                res.pending.lose(f"recording a pipelined dispatch failed at {exc.stage}: {exc.message}")
            return self.fail(steady.transaction(inst, deadline, op, took), f"dispatch failed at {exc.stage}: {exc}", exc)
        if uploads:
            inst.release(transient)  # the payloads were copied when recorded
            self._uploaded(op, uploads)
        op.pipelined = True
        self._commit_outputs(inst, zip(steady.written, scratch), execute.readahead, op)
        res.pending.add(ticket, op, inst, steady.written, steady.written_bytes)
        return PUBLISHED

    def _completed(self, tx: Transaction, result: ExecuteResult) -> None:
        """The device ran the submission: uploads are valid cache whether or not we publish."""
        op = tx.op
        if tx.uploads:
            self._uploaded(op, tx.uploads)
        for _src, _dst, _off, nbytes in tx.seeds:
            op.device_copy_bytes += nbytes
            op.device_copy_count += 1
        if tx.params is not None:
            op.parameter_upload_bytes += UNIFORM_BYTES
            op.parameter_upload_count += 1
            tx.inst.device.uniform_count = tx.count
            tx.inst.device.uniform_budget = tx.plan.loop_budget
        if result is not _RECORDED:  # (a pipelined dispatch: nothing timed)
            self._timed(op, result)

    def _timed(self, op: BufferOperation, result: ExecuteResult) -> None:
        if self.res.stage_times:
            op.upload += result.upload_s
            op.device_copy += result.seed_s
            op.compute += result.compute_s
        if result.device_compute_s is not None:
            op.timestamps_valid = True
            op.device_compute = result.device_compute_s

    def _uploaded(self, op: BufferOperation, uploads: Sequence[Upload]) -> None:
        """The uploads completed: each device copy holds its version now; counted."""
        stage_min = self.res.tuning.prestage_min_bytes
        for u in uploads:
            buf = u.buf
            buf.record.mark_uploaded()
            # Uploaded whole: prestage the next full set of it (if it is big enough to matter).
            buf.stage_hint = u.start == 0 and u.end == buf.length and buf.raw \
                and buf.gpu_bytes >= stage_min
            op.logical_upload_bytes += (u.end - u.start) * buf.stored_bytes
            op.gpu_upload_bytes += u.words.nbytes
            op.upload_count += 1

    def _publish(self, tx: Transaction, kernel_error: int) -> DispatchResult:
        if kernel_error:
            # The kernel would trap, ran out of loop budget or read out of range: publish nothing;
            # the guest's CPU runner reproduces the Wasm behaviour exactly.
            code = KERNEL_ERROR_REASONS.get(kernel_error, ReasonCode.KERNEL_TRAP)
            return self.unwind(tx, DispatchResult(DispatchEnd.FALL_BACK, Status.CPU_FALLBACK, code,
                                                  f"{KERNEL_ERROR_WORDS.get(kernel_error, 'the GPU kernel failed')}"
                                                  f" (kernel error word {kernel_error}); nothing was published, "
                                                  "the CPU runner does the work"))
        if time.perf_counter() >= tx.deadline:
            result = self.unwind(tx, DispatchResult(DispatchEnd.REFUSED, Status.CANCELLED))
            self._restore_in_place(tx)
            return result
        if self.res.live.is_lost():
            return self.fail(tx, "device lost after dispatch")
        self._commit(tx)
        return PUBLISHED

    def _commit(self, tx: Transaction) -> None:
        """Single commit: every written slot switches to what the kernel wrote, together."""
        held_aside = tx.held_aside
        if held_aside:
            tx.reattach()  # stale from here on: the commit lets them go
        bound = tx.bound
        outputs = tx.outputs
        self._commit_outputs(tx.inst, zip(map(bound.__getitem__, outputs), outputs.values()), tx.readahead, tx.op,
                             [bound[slot] for slot in held_aside] if held_aside else ())

    def _commit_outputs(self, inst: InstanceBuffers, outputs: Iterable[tuple[Buffer, Scratch]],
                        readahead: Sequence[BufferHandle], op: BufferOperation,
                        in_place: Collection[Buffer] = ()) -> None:
        """Each output switches to the scratch the kernel wrote (its old copy becomes idle scratch),
        or, written in place (held aside), keeps its device copy, which already is the output;
        each is its current version now. (Timed in profile mode only; one frame for all of a
        dispatch's outputs: it runs on every dispatch.)"""
        profile = self.res.profile_stages
        t0 = time.perf_counter() if profile else 0.0
        for buf, (written, size) in outputs:
            if buf not in in_place:
                old = buf.gpu
                if old is not None:
                    give_back_scratch(inst, (old, size))
                else:
                    inst.gpu_charge += size
                buf.gpu = written
            if buf.parked is not None:
                self.res.unpark(inst, buf)
            if buf.readahead_sent:  # the last read-ahead of this buffer went unread: stop asking
                buf.readahead_hint = False
            buf.readahead_sent = bool(readahead) and written in readahead
            buf.record.mark_gpu_written()
        if profile:
            op.commit += time.perf_counter() - t0

    # -- the ways back ---------------------------------------------------------------------------
    def unwind(self, tx: Transaction, result: DispatchResult) -> DispatchResult:
        """Nothing is published and the device is fine: give back what the attempt took."""
        tx.reattach()
        dev = self.res.live
        for u in tx.uploads:
            if isinstance(u.words, UploadStage):
                dev.unstage(u.words)  # its charge is in transient
        for scratch in tx.acquired:
            give_back_scratch(tx.inst, scratch)
        tx.acquired.clear()
        tx.inst.release(tx.transient)
        tx.transient = 0
        return result

    def fail(self, tx: Transaction, reason: str, exc: DeviceFailure | None = None) -> DispatchResult:
        """The device failed, or its state is unknown: quarantine; what it may still hold (payloads,
        scratch) stays charged as retired until the host stops (docs/design/abi.md §4.6 step 7)."""
        res = self.res
        if exc is not None:  # the transfers' outcome is unknown
            res.counts_incomplete()
            tx.op.transfer_counts_complete = False
        d = tx.inst.device
        d.retired_bytes += tx.transient + sum(n for _gpu_buf, n in tx.acquired)
        tx.transient = 0
        tx.acquired.clear()
        tx.reattach()
        res.quarantine(reason)
        timed_out = (exc is not None and exc.timed_out) or time.perf_counter() >= tx.deadline
        return refused_or_fallback(Status.CANCELLED if timed_out else Status.DEVICE_ERROR, res.quarantine_reason)

    def _restore_in_place(self, tx: Transaction) -> None:
        """A dispatch that completed but publishes nothing (cancelled late): outputs written in
        place get their committed contents back from the parking (a failure here quarantines,
        which copies the parking into the CPU copy instead)."""
        for buf, (staging, _size) in tx.held_aside.values():
            assert buf.gpu is not None  # it was written in place
            try:
                for offset, address, n in staging.segments:  # (each piece of the parking)
                    self.res.live.write(buf.gpu, offset, view_at(address, n).view(np.uint32))
            except DeviceFailure as exc:
                self.res.quarantine(f"restoring an output written in place failed: {exc}")
                break
