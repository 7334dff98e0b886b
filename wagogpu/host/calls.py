"""What every non-scalar wago_gpu_v1 import shares: serialisation under the host lock, the record
of the call (its Last entry, counters, timing) and the first checks.

An import group (management, dispatch, transfers, accessor hooks) is an ImportGroup over one
instance's ImportScope; each method follows docs/design/abi.md §2 literally: the first failing rule decides
the status, and _finish records every call, whatever its status.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable

import wasmtime

from ..abi.table import Status
from ..buffers import Buffer, InstanceBuffers
from ..diagnostics import STAGE_FIELDS, BufferOperation, CounterGroup, Outcome, ReasonCode
from ._wasmtime import GuestCaller, GuestMemory
from .context import RuntimeContext
from .placement import MEASURED

if TYPE_CHECKING:  # pragma: no cover  (type-only: closes no runtime circle)
    from .module import Module

U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF

#: An error status decides the reason code, whatever the import said (docs/design/abi.md §8.3).
REASON_BY_STATUS: dict[int, ReasonCode] = {
    Status.LIMIT_EXCEEDED: ReasonCode.RESOURCE_LIMIT, Status.CANCELLED: ReasonCode.CANCELLED,
    Status.CONTENTS_LOST: ReasonCode.CONTENTS_LOST, Status.DEVICE_ERROR: ReasonCode.DEVICE_FAILURE}
_OUTCOME_BY_STATUS: dict[int, Outcome] = {Status.OK: Outcome.OK, Status.CPU_FALLBACK: Outcome.CPU_FALLBACK_READY}
_SUCCESSES = frozenset({Status.OK, Status.CPU_FALLBACK})
#: What an error status means when the check that gave it said nothing more specific (every
#: non-OK record carries a reason).
STATUS_REASONS: dict[int, str] = {
    Status.INVALID_HANDLE: "the handle names no live buffer of this instance",
    Status.INVALID_RANGE: "the range lies outside the buffer or the guest memory",
    Status.TYPE_MISMATCH: "the element type does not match",
    Status.INVALID_BINDING: "a declared slot is unbound, or one handle fills two slots",
    Status.LIMIT_EXCEEDED: "a configured limit or byte budget would be exceeded",
    Status.DEVICE_ERROR: "the device failed",
    Status.CONTENTS_LOST: "the only current copy was on a device that failed",
    Status.CANCELLED: "run_timeout passed before the import finished",
    Status.INVALID_KERNEL: "no usable kernel with this ID",
    Status.UNSUPPORTED_STORAGE: "this storage cannot take part in the transfer",
    Status.INVALID_STATE: "the instance or its host is closed",
}
_new = object.__new__
_clock = time.perf_counter  # (a global: read twice on every import)
#: The stage durations, read at once: an invalid profile leaves them at their class default, 0.0.
#: (The record is filled attribute by attribute: reaching its __dict__ would make CPython 3.11
#: give up the instance's inline values, about 1 us per import here.)
_stage_times = attrgetter(*STAGE_FIELDS)


@dataclass(frozen=True, slots=True)
class Ending:
    """What a status alone decides about a record, worked out once per status: the plain int the
    guest gets, the outcome when the import names none, and for an error its reason code (None:
    the import's own, else CONTRACT_ERROR) and the reason used when the import gives none."""

    code: int
    outcome: Outcome
    success: bool
    reason_code: ReasonCode | None
    reason: str


#: Indexed by status value: _finish reads one entry instead of converting the enum and asking
#: three dicts on every call.
ENDINGS: tuple[Ending, ...] = tuple(
    Ending(int(s), _OUTCOME_BY_STATUS.get(s, Outcome.ERROR), s in _SUCCESSES, REASON_BY_STATUS.get(s),
           STATUS_REASONS.get(s, "")) for s in sorted(Status))
assert [e.code for e in ENDINGS] == list(range(len(ENDINGS)))


class ImportCall:
    """One non-scalar import being served: its record, when it started and its deadline."""

    __slots__ = ("op", "started", "deadline")

    def __init__(self, op: BufferOperation, started: float, deadline: float) -> None:
        self.op = op
        self.started = started
        self.deadline = deadline

    def cancelled(self) -> bool:
        return time.perf_counter() >= self.deadline


@dataclass(eq=False, slots=True)
class ImportScope:
    """One guest instance as its imports see it ('the calling instance'). ``started`` and
    ``import_name`` describe the import being served; guarded() sets them on entry.
    ``own_memory`` finds the guest's own memory exports once it is instantiated, for imports the
    guest re-exported and the host calls directly (such a call has no calling instance)."""

    ctx: RuntimeContext
    module: Module
    buffers: InstanceBuffers
    started: float = 0.0
    import_name: str = ""
    own_memory: Callable[[str], GuestMemory | None] | None = None
    memories: dict[str, GuestMemory] = field(default_factory=dict)

    def memory(self, caller: GuestCaller, name: str) -> GuestMemory | None:
        """The memory export `name` of the calling instance, or of this guest when the host called;
        looked up once (a Memory is a handle valid for the store's life; its size is read anew on
        every use)."""
        found = self.memories.get(name)
        if found is None:
            found = caller.memory(name)
            if found is None and self.own_memory is not None:
                found = self.own_memory(name)
            if found is not None:
                self.memories[name] = found
        return found
    # (address, bytes) of guest memory i now, or None before the guest's exports exist (Instance sets it)
    guest_memory: Callable[[int], tuple[int, int] | None] | None = None
    # The instance's CPU kernels (cpukernels.CpuKernelRunner) when Config.cpu_kernels; Instance sets it
    cpu_kernels: Any = None


Handlers = dict[str, tuple[Callable[..., Any], bool]]  # import name -> (function, takes the caller)


def guarded(scope: ImportScope, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Serialise an import under the host lock; an unexpected host error becomes a trap, never a
    Python exception escaping into the guest's caller."""
    lock = scope.ctx.lock
    clock = time.perf_counter

    def call(*args: Any) -> Any:
        started = clock()
        try:
            with lock:
                scope.started = started
                scope.import_name = name
                return fn(*args)
        except wasmtime.Trap:
            raise
        except Exception as exc:
            raise wasmtime.Trap(f"wago_gpu_v1 host failure in {name}: {type(exc).__name__}: {exc}") from exc

    return call


class ImportGroup:
    """Base of the import groups: entry and exit of a call, liveness and handle lookup."""

    def __init__(self, scope: ImportScope) -> None:
        self.scope = scope
        self.ctx = ctx = scope.ctx
        self.buffers = scope.buffers
        self.module = scope.module
        # Made with the host and kept for its life, used by every call: bound once. (The config is
        # read per call: the host may replace it.)
        self._check_loss = ctx.residency.check_loss
        self._loss_flags = ctx.residency.loss_flags
        self._stage_timing = ctx.residency.stage_times or ctx.residency.profile_stages
        self._pending = ctx.residency.pending

    def handlers(self) -> Handlers:
        """The imports this group serves."""
        raise NotImplementedError

    def _enter(self, count: int = 0, kernel_id: int = 0) -> ImportCall:
        """Start the record of the import being served (its name comes from the ABI table)."""
        scope = self.scope
        started = scope.started
        op = _new(BufferOperation)  # BufferOperation.start's record, made here: one frame less per import
        op.import_name = scope.import_name
        op.instance = self.buffers.instance_id
        op.count = count
        op.kernel_id = kernel_id
        call = _new(ImportCall)
        call.op = op
        call.started = started
        call.deadline = started + self.ctx.config.run_timeout
        op.queue_wait = _clock() - started
        if self._loss_flags.lost:
            self._check_loss()
        pending = self._pending
        # The oldest unconfirmed dispatch past its time bound when the import started (asked of
        # its start: a clock read less on every import): settle it.
        if pending.dispatches and started > pending.settle_by:
            pending.settle(call.deadline)
        return call

    def _live(self) -> bool:
        return not (self.ctx.stopped or self.buffers.closed)

    def _buffer(self, handle: int) -> Buffer | None:
        return self.buffers.buffers.get(handle & U32)

    def _no_buffer(self, handle: int) -> str:
        """The reason of an INVALID_HANDLE."""
        return f"handle {handle & U32} is not a live buffer of instance {self.buffers.instance_id}"

    @staticmethod
    def _past_end(buf: Buffer, offset: int, count: int) -> str:
        """The reason of an INVALID_RANGE on the buffer side."""
        return (f"elements [{offset}, {offset + count}) lie past the end of buffer {buf.handle} "
                f"({buf.type.name}, {buf.length} elements)")

    def _finish(self, call: ImportCall, status: int, counters: CounterGroup | None = None,
                outcome: Outcome | None = None, reason_code: ReasonCode = ReasonCode.NONE,
                reason: str = "") -> int:
        """Record Last (every non-scalar import, every status) and add this call's counters to
        Totals: ``counters`` names the group the caller knows the record can hold (see
        diagnostics.SET_COUNTERS; NO_COUNTERS leaves Totals as they are), None any it holds.
        (``counters`` comes first so that the hot successes pass it positionally: a keyword call
        takes CPython 3.11's generic call path, about 45 ns more.)"""
        op = call.op
        end = ENDINGS[status]  # (one entry: no enum conversion, no dict asked, per call)
        op.status = code = end.code
        op.outcome = outcome or end.outcome
        success = end.success
        if not success:
            reason_code = end.reason_code or (
                reason_code if reason_code is not ReasonCode.NONE else ReasonCode.CONTRACT_ERROR)
            reason = reason or end.reason
        op.reason_code = reason_code
        op.reason = reason
        op.total = _clock() - call.started
        if op.download_count and self.ctx.config.placement == MEASURED:
            self.ctx.costs.note_readbacks(op)  # measured readbacks feed placement's copy line (before the zeroing below)
        profile = self.ctx.config.profile_stages
        if profile and success and op.transfer_counts_complete:
            op.profile_valid = True
        else:  # (profile_valid stays the class's False: set, it would be a 30th attribute key)
            # A stage is timed only in profile mode, where the residency times stages (profile or
            # measured placement), or by a CPU kernel (compute): asked before the stages themselves.
            if (profile or self._stage_timing or op.compute) and any(_stage_times(op)):
                for name in STAGE_FIELDS:
                    setattr(op, name, 0.0)  # the class's default
        self.ctx.log.record(op, counters)
        return code
