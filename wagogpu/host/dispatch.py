"""dispatch(kernelID, count) (docs/design/abi.md §2.6): validation in the reference's order, the GPU decision,
the transaction, and the CPU fallback's preparation (status 1: every bound buffer CPU-current)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..abi import accessor as acc
from ..abi.table import ElementType, Status
from ..buffers import Buffer, DispatchEnd, DispatchPlan, DispatchResult
from ..buffers.steady import SteadyPlan
from ..buffers.records import FLAGS_WORD
from ..compiler.contract import KernelClass, KernelPlan
from ..config import KernelConfig
from ..diagnostics import NO_COUNTERS, UPLOAD_COUNTERS, Outcome, ReasonCode
from .calls import U32, Handlers, ImportCall, ImportGroup, ImportScope
from .cpukernels import compiled_cpu_kernel, replaced_slots
from .placement import MEASURED, Where, measured_where, observe, place

# A kernel the GPU ran and found trapping traps on the CPU too: straight to the guest's runner.
KERNEL_ERRORS = frozenset((ReasonCode.KERNEL_TRAP, ReasonCode.LOOP_BUDGET, ReasonCode.INDEX_RANGE))
# The members the GPU path names on every dispatch, read as module globals: an enum member read
# through its class costs CPython 3.11 about 55 ns, a global about 6.
_GPU, _NO_REASON, _PUBLISHED, _REFUSED = Where.GPU, ReasonCode.NONE, DispatchEnd.PUBLISHED, DispatchEnd.REFUSED
_OK, _OUTCOME_GPU, _NOOP = Status.OK, Outcome.GPU, Outcome.NOOP


@dataclass(frozen=True, slots=True)
class KernelEntry:
    """What a dispatch of one kernel needs to know that cannot change for the instance's life: the
    module's contract, the config and the pipelines are fixed before any instance exists. Built on
    the kernel's first valid dispatch, so the per-call path reads one table entry."""

    kernel: KernelConfig
    plan: KernelPlan
    declared: tuple[tuple[int, int], ...]  # (slot, element type) of each declared binding, in order
    dispatch_plan: DispatchPlan | None  # None: no pipeline for it on this device
    gpu_ready: bool  # every fixed GPU check passes: only min_elements and the device's state remain
    min_elements: int
    measured: bool = False  # Config.placement == "measured" and a CPU kernel may run it: ask place() always


Checked = tuple[KernelEntry, dict[int, Buffer]]


class BindingSet:
    """A kernel's bindings as its last fully checked dispatch found them (steps 2-5 passed): the
    next dispatch of the kernel skips those checks while the instance's binding set is unchanged
    (InstanceBuffers.bindings_epoch: a bind, a free or closing changes it) and its count fits.
    Element types and lengths are fixed for a buffer's life, so nothing else could change their
    answer."""

    __slots__ = ("checked", "epoch", "limit", "max_elements", "steady")

    def __init__(self, checked: Checked, epoch: int, max_elements: int) -> None:
        self.checked = checked
        self.epoch = epoch
        # The dispatcher's steady plan for this set once a dispatch of its count went to the GPU
        # by the threshold rule and published: that count repeats through dispatch()'s repeat route.
        self.steady: SteadyPlan | None = None
        # The largest count step 4.4 passes for (no bound buffer is shorter) and step 5 did, with
        # the config it was checked under (the host may replace its config: asked again then).
        self.limit = min([max_elements, *(buf.length for buf in checked[1].values())])
        self.max_elements = max_elements


def binding_problem(kernel_id: int, slot: int, handle: int, buf: Buffer | None) -> str:
    """The reason of an INVALID_BINDING: an empty slot, a stale handle, or a handle bound twice."""
    if not handle:
        return f"kernel {kernel_id} declares slot {slot}, which has no buffer bound"
    if buf is None:
        return f"slot {slot} holds handle {handle}, which is no longer a live buffer"
    return f"buffer {handle} fills slot {slot} and another declared slot (a handle may fill one slot)"


_CPU_CURRENT = acc.CPU_CURRENT
_CURRENT_OR_LOST = acc.CPU_CURRENT | acc.LOST


def _all_cpu_current(bound: dict[int, Buffer]) -> bool:
    """Whether every bound buffer's CPU copy is current (none lost): what make_cpu_current and
    make_cpu_replaceable answer OK for without a copy, read from the flags word alone."""
    for buf in bound.values():
        if buf.record.words[FLAGS_WORD] & _CURRENT_OR_LOST != _CPU_CURRENT:
            return False
    return True


class DispatchImport(ImportGroup):
    """The dispatch import of one instance."""

    def __init__(self, scope: ImportScope) -> None:
        super().__init__(scope)
        self._entries: dict[int, KernelEntry] = {}
        self._bindings: dict[int, BindingSet] = {}  # kernel ID -> its last checked binding set

    def handlers(self) -> Handlers:
        return {"dispatch": (self.dispatch, False)}

    def dispatch(self, kernel_id: int, count: int) -> int:
        kernel_id &= U32
        count &= U32
        call = self._enter(count, kernel_id)
        known = self._bindings.get(kernel_id)
        if known is not None and (steady := known.steady) is not None and count == steady.count:
            # The repeat route (BindingSet.steady): what steps 1-8 would find (the bindings
            # checked, a count above zero, the threshold rule sending it to the GPU) asked in that
            # order from what they depend on, then the dispatcher's repeat (whose steady sequence
            # answers CANCELLED past the deadline, as below). In any other state, with nothing
            # recorded or taken, everything is asked below. (Inline: it runs on every resident
            # dispatch.)
            ctx = self.ctx
            buffers = self.buffers
            if not (ctx.stopped or buffers.closed) and known.epoch == buffers.bindings_epoch \
                    and known.max_elements == ctx.config.max_elements:
                repeated = ctx.dispatcher.repeat(buffers, steady, call.deadline, call.op)
                if repeated is not None:
                    if repeated.end is _PUBLISHED:  # (its only counters are the uploads')
                        return self._finish(call, _OK, UPLOAD_COUNTERS if call.op.upload_count else NO_COUNTERS,
                                            _OUTCOME_GPU)
                    return self._not_published(call, *known.checked, count, repeated)
        checked = self._validate(call, kernel_id, count)
        if isinstance(checked, int):
            return checked
        entry, bound = checked
        if count == 0:
            return self._finish(call, _OK, outcome=_NOOP)
        if time.perf_counter() >= call.deadline:
            return self._finish(call, Status.CANCELLED)
        ctx = self.ctx
        dispatch_plan = entry.dispatch_plan
        if entry.gpu_ready and count >= entry.min_elements and ctx.residency.usable and not entry.measured:
            where, reason_code, reason = _GPU, _NO_REASON, ""  # what place() answers once the fixed checks passed
        elif entry.measured and entry.gpu_ready and ctx.residency.usable:  # (place()'s measured answer, its checks passed)
            reason_code, reason = _NO_REASON, ""
            where = measured_where(ctx, self.module, entry.kernel, entry.plan, count, bound)  # (a settled repeat first)
        else:
            placed = place(ctx, self.module, entry.kernel, entry.plan, count, bound)
            where, reason_code, reason = placed.where, placed.reason_code, placed.reason
        if where is _GPU and dispatch_plan is not None:
            memory = dispatch_plan.memory
            span = self.scope.guest_memory(memory) if memory >= 0 and self.scope.guest_memory else None
            alone = entry.measured and ctx.dispatcher.pipelined and self._sampled(kernel_id, count)
            sample_from = self._alone_from(call) if alone else call.started
            result = ctx.dispatcher.run(self.buffers, dispatch_plan, bound, count, call.deadline, call.op, span)
            if result.end is _PUBLISHED:
                # (before the record closes: its stage times stand until then)
                if entry.measured:
                    if not alone or self._ran_alone(call):
                        observe(ctx, self.module, entry.kernel.id, _GPU, count, call.op, sample_from)
                elif entry.gpu_ready and count >= entry.min_elements:
                    self._keep_steady(kernel_id, dispatch_plan, count)
                return self._finish(call, _OK, outcome=_OUTCOME_GPU)
            return self._not_published(call, entry, bound, count, result)
        return self._on_cpu(call, entry, bound, count, reason_code, reason)

    def _keep_steady(self, kernel_id: int, dispatch_plan: DispatchPlan, count: int) -> None:
        """After a threshold-routed GPU dispatch published: its binding set repeats from now on if
        the dispatcher holds a steady plan for it and this count is the plan's."""
        steady = self.ctx.dispatcher.steady_plan(self.buffers, dispatch_plan)
        known = self._bindings.get(kernel_id)
        if steady is not None and steady.count == count and known is not None \
                and known.epoch == self.buffers.bindings_epoch:
            known.steady = steady

    def _not_published(self, call: ImportCall, entry: KernelEntry, bound: dict[int, Buffer], count: int,
                       result: DispatchResult) -> int:
        """The GPU attempt refused (its status) or fell back (the CPU's turn, with its reason)."""
        if result.end is _REFUSED:
            return self._finish(call, result.status)
        return self._on_cpu(call, entry, bound, count, result.reason_code, result.reason)

    def _on_cpu(self, call: ImportCall, entry: KernelEntry, bound: dict[int, Buffer], count: int,
                reason_code: ReasonCode, reason: str) -> int:
        """A dispatch the GPU does not run: a CPU kernel where there is one, else the guest's runner."""
        if self.scope.cpu_kernels is not None and reason_code not in KERNEL_ERRORS:
            return self._cpu_kernel(call, entry, bound, count, reason_code, reason)
        return self._fall_back(call, entry.kernel, bound, reason_code, reason)

    def _sampled(self, kernel_id: int, count: int) -> bool:
        """Whether measured placement samples this GPU dispatch: all but the repeats of a settled
        decision (costmodel.STREAK), whose band the decision just made left in its streak."""
        model = self.ctx.costs.kernels.get((self.module.id, kernel_id))
        band = model.bands.get(count.bit_length()) if model is not None else None
        return band is None or not band.streak

    def _alone_from(self, call: ImportCall) -> float:
        """A pipelined GPU dispatch that measured placement samples runs alone, so that its sample
        is the device's work and not the recording alone: the earlier pipelined work is waited for
        first (as an overdue queue is in _enter; a failure is the buffers' new states), and the
        dispatch itself once published. When its sample starts."""
        self._pending.settle(call.deadline)
        return time.perf_counter()

    def _ran_alone(self, call: ImportCall) -> bool:
        """The sampled pipelined dispatch waited for: whether the device confirmed it (a wait past the
        deadline, or a failure, leaves no sample)."""
        pending = self._pending
        return pending.settle(call.deadline) is Status.OK and not pending and not self.ctx.residency.quarantined

    def _validate(self, call: ImportCall, kernel_id: int, count: int) -> Checked | int:
        """Steps 1-5: the kernel, its contract and its bindings; the finished call's status if any
        fails. A binding set that passed them stays valid while the instance's bindings are
        unchanged (BindingSet): a repeated dispatch checks its epoch and count only."""
        if self.ctx.stopped or self.buffers.closed:  # (_live, inline)
            return self._finish(call, Status.INVALID_STATE)
        known = self._bindings.get(kernel_id)
        if known is not None and known.epoch == self.buffers.bindings_epoch and count <= known.limit \
                and known.max_elements == self.ctx.config.max_elements:
            return known.checked
        entry = self._entries.get(kernel_id)
        if entry is None:
            found = self._kernel_entry(call, kernel_id)
            if isinstance(found, int):
                return found
            entry = found
        slots = self.buffers.slots
        buffers = self.buffers.buffers
        bound: dict[int, Buffer] = {}
        seen: list[int] = []  # at most 8 declared bindings: a list beats a set
        for slot, etype in entry.declared:
            handle = slots[slot]
            buf = buffers.get(handle) if handle else None
            if buf is None or handle in seen:
                return self._finish(call, Status.INVALID_BINDING, reason=binding_problem(kernel_id, slot, handle, buf))
            seen.append(handle)
            if buf.type != etype:
                return self._finish(call, Status.TYPE_MISMATCH, reason=f"kernel {kernel_id} declares slot {slot} "
                                    f"{ElementType(etype).name}; buffer {handle} bound there is {buf.type.name}")
            if count > buf.length:
                return self._finish(call, Status.INVALID_RANGE, reason=f"count {count} exceeds the {buf.length} "
                                    f"elements of buffer {handle} in slot {slot} (every bound buffer holds at "
                                    "least count elements)")
            bound[slot] = buf
        max_elements = self.ctx.config.max_elements
        if count > max_elements:
            return self._finish(call, Status.LIMIT_EXCEEDED, reason=f"count {count} is above max_elements {max_elements}")
        checked = (entry, bound)
        self._bindings[kernel_id] = BindingSet(checked, self.buffers.bindings_epoch, max_elements)
        return checked

    def _kernel_entry(self, call: ImportCall, kernel_id: int) -> KernelEntry | int:
        """Steps 2-3 (the contract, the kernel) on a kernel's first dispatch: its entry, kept once
        valid (what they check is fixed), or the finished call's status, asked again next time."""
        contract = self.module.contract
        if not contract.verified:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_UNVERIFIED,
                                reason=contract.reason)
        kernel = self.ctx.config.kernel(kernel_id)
        plan = contract.kernels.get(kernel_id)
        if kernel is None or plan is None:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_ERROR,
                                reason=f"no kernel with ID {kernel_id}")
        if plan.cls is KernelClass.INVALID:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_ERROR, reason=plan.reason)
        entry = self._entries[kernel_id] = KernelEntry(
            kernel, plan, tuple((b.slot, int(b.type)) for b in kernel.bindings), self.module.dispatch_plans.get(kernel_id),
            self._gpu_ready(kernel, plan), kernel.min_elements,
            self.ctx.config.placement == MEASURED and self.scope.cpu_kernels is not None)
        return entry

    def _gpu_ready(self, kernel: KernelConfig, plan: KernelPlan) -> bool:
        """Whether gpu_decision answers NONE for every count at or above min_elements while the
        device stays usable: asked once with the smallest such count, on a usable device."""
        ctx = self.ctx
        if not ctx.residency.usable or kernel.id not in self.module.dispatch_plans:
            return False
        code, _reason = ctx.gpu_decision(self.module, kernel, plan, max(1, kernel.min_elements))
        return code is ReasonCode.NONE

    def _fall_back(self, call: ImportCall, kernel: KernelConfig, bound: dict[int, Buffer],
                   reason_code: ReasonCode, reason: str) -> int:
        """Status 1: the guest's CPU runner reads every bound buffer, so each becomes CPU-current."""
        status = self._cpu_current(call, kernel, bound, reason)
        if status >= 0:
            return status
        return self._finish(call, Status.CPU_FALLBACK, reason_code=reason_code, reason=reason)

    def _cpu_current(self, call: ImportCall, kernel: KernelConfig, bound: dict[int, Buffer], reason: str,
                     replaced: frozenset[int] = frozenset()) -> int:
        """Every bound buffer CPU-current, but those in `replaced` (outputs a CPU kernel overwrites
        whole: a stale copy is not read back, cpukernels.replaced_slots): -1, or the finished call's
        status (a failure, cancelled)."""
        op = call.op
        residency = self.ctx.residency
        for b in kernel.bindings:
            if b.slot in replaced:
                status = residency.make_cpu_replaceable(self.buffers, bound[b.slot], call.deadline, op, op)
            else:
                status = residency.make_cpu_current(self.buffers, bound[b.slot], call.deadline, op, op)
            if status:
                return self._finish(call, status, reason=reason)
        if call.cancelled():
            return self._finish(call, Status.CANCELLED)
        return -1

    def _cpu_kernel(self, call: ImportCall, entry: KernelEntry, bound: dict[int, Buffer], count: int,
                    reason_code: ReasonCode, reason: str) -> int:
        """Config.cpu_kernels: the kernel's CPU module runs it (status 0, outcome CPU); one that traps
        publishes nothing and answers 1 (KERNEL_TRAP); a kernel without one answers 1 as before."""
        compiled = compiled_cpu_kernel(self.module, entry.kernel, entry.plan)
        if not isinstance(compiled, str) and self.scope.guest_memory is None and (
                compiled.record.guest_memory >= 0 or compiled.record.stack_pointer >= 0):
            compiled = "it reads guest memory, which the start function's imports cannot reach yet"
        if isinstance(compiled, str):  # outside the subset, or a construct the CPU backend does not carry
            if entry.plan.cls is KernelClass.REJECTED or reason_code is ReasonCode.NONE:
                return self._fall_back(call, entry.kernel, bound, ReasonCode.UNSUPPORTED_KERNEL, compiled)
            return self._fall_back(call, entry.kernel, bound, reason_code, f"{reason}; no CPU kernel: {compiled}")
        if not _all_cpu_current(bound):  # (the steady case, every copy current already, asks nothing more)
            status = self._cpu_current(call, entry.kernel, bound, reason, replaced_slots(entry.plan, bound, count))
            if status >= 0:
                return status
        elif time.perf_counter() >= call.deadline:
            return self._finish(call, Status.CANCELLED)
        result = self.scope.cpu_kernels.run(compiled, self.buffers, bound, count)
        call.op.compute = result.seconds
        if result.trapped:
            return self._finish(call, Status.CPU_FALLBACK, reason_code=ReasonCode.KERNEL_TRAP,
                                reason=f"the CPU kernel trapped ({result.trapped}); nothing was committed")
        if entry.measured:
            observe(self.ctx, self.module, entry.kernel.id, Where.CPU, count, call.op, call.started)
        return self._finish(call, Status.OK, outcome=Outcome.CPU)
