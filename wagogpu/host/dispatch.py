"""dispatch(kernelID, count) (abi.md §2.6): validation in the reference's order, the GPU decision,
the transaction, and the CPU fallback's preparation (status 1: every bound buffer CPU-current)."""
from __future__ import annotations

import time

from ..abi.table import ElementType, Status
from ..buffers import Buffer, DispatchEnd
from ..compiler.contract import KernelClass, KernelPlan
from ..config import KernelConfig
from ..diagnostics import Outcome, ReasonCode
from .calls import U32, Handlers, ImportCall, ImportGroup, ImportScope

# Members bound once: enum attribute access costs ~0.16 us per read on Python 3.11.
_OK = Status.OK
_GPU = Outcome.GPU
_NOOP = Outcome.NOOP
_NONE = ReasonCode.NONE
_PUBLISHED = DispatchEnd.PUBLISHED
_REFUSED = DispatchEnd.REFUSED
_INVALID = KernelClass.INVALID

Checked = tuple[KernelConfig, KernelPlan, dict[int, Buffer]]


def binding_problem(kernel_id: int, slot: int, handle: int, buf: Buffer | None) -> str:
    """The reason of an INVALID_BINDING: an empty slot, a stale handle, or a handle bound twice."""
    if not handle:
        return f"kernel {kernel_id} declares slot {slot}, which has no buffer bound"
    if buf is None:
        return f"slot {slot} holds handle {handle}, which is no longer a live buffer"
    return f"buffer {handle} fills slot {slot} and another declared slot (a handle may fill one slot)"


class DispatchImport(ImportGroup):
    """The dispatch import of one instance."""

    def __init__(self, scope: ImportScope) -> None:
        super().__init__(scope)
        self._bindings: dict[int, tuple[tuple[int, int], ...]] = {}

    def handlers(self) -> Handlers:
        return {"dispatch": (self.dispatch, False)}

    def dispatch(self, kernel_id: int, count: int) -> int:
        kernel_id &= U32
        count &= U32
        call = self._enter(count, kernel_id)
        checked = self._validate(call, kernel_id, count)
        if isinstance(checked, int):
            return checked
        kernel, plan, bound = checked
        if count == 0:
            return self._finish(call, _OK, outcome=_NOOP)
        if time.perf_counter() >= call.deadline:
            return self._finish(call, Status.CANCELLED)
        reason_code, reason = self.ctx.gpu_decision(self.module, kernel, plan, count)
        if reason_code is _NONE:
            span = self.scope.guest_memory(plan.memory) if plan.memory >= 0 and self.scope.guest_memory else None
            result = self.ctx.dispatcher.run(self.buffers, self.module.dispatch_plans[kernel_id], bound, count,
                                             call.deadline, call.op, span)
            if result.end is _PUBLISHED:
                return self._finish(call, _OK, outcome=_GPU)
            if result.end is _REFUSED:
                return self._finish(call, result.status)
            reason_code, reason = result.reason_code, result.reason
        return self._fall_back(call, kernel, bound, reason_code, reason)

    def _validate(self, call: ImportCall, kernel_id: int, count: int) -> Checked | int:
        """Steps 1-5: the kernel, its contract and its bindings; the finished call's status if any fails."""
        if not self._live():
            return self._finish(call, Status.INVALID_STATE)
        contract = self.module.contract
        if not contract.verified:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_UNVERIFIED,
                                reason=contract.reason)
        kernel = self.ctx.config.kernel(kernel_id)
        plan = contract.kernels.get(kernel_id)
        if kernel is None or plan is None:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_ERROR,
                                reason=f"no kernel with ID {kernel_id}")
        if plan.cls is _INVALID:
            return self._finish(call, Status.INVALID_KERNEL, reason_code=ReasonCode.CONTRACT_ERROR, reason=plan.reason)
        slots = self.buffers.slots
        buffers = self.buffers.buffers
        bound: dict[int, Buffer] = {}
        seen: list[int] = []  # at most 8 declared bindings: a list beats a set
        for slot, etype in self._declared(kernel):
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
        if count > self.ctx.config.max_elements:
            return self._finish(call, Status.LIMIT_EXCEEDED,
                                reason=f"count {count} is above max_elements {self.ctx.config.max_elements}")
        return kernel, plan, bound

    def _declared(self, kernel: KernelConfig) -> tuple[tuple[int, int], ...]:
        """(slot, element type) of each declared binding, in configuration order (kept per kernel:
        the config is immutable)."""
        found = self._bindings.get(kernel.id)
        if found is None:
            found = self._bindings[kernel.id] = tuple((b.slot, int(b.type)) for b in kernel.bindings)
        return found

    def _fall_back(self, call: ImportCall, kernel: KernelConfig, bound: dict[int, Buffer],
                   reason_code: ReasonCode, reason: str) -> int:
        """Status 1: the guest's CPU runner reads every bound buffer, so each becomes CPU-current."""
        op = call.op
        make_cpu_current = self.ctx.residency.make_cpu_current
        for b in kernel.bindings:
            status = make_cpu_current(self.buffers, bound[b.slot], call.deadline, op, op)
            if status:
                return self._finish(call, status, reason=reason)
        if call.cancelled():
            return self._finish(call, Status.CANCELLED)
        return self._finish(call, Status.CPU_FALLBACK, reason_code=reason_code, reason=reason)
