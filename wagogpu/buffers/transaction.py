"""The GPU dispatch transaction's records (docs/design/abi.md §4.6): what a kernel needs, what one attempt has
taken so far, and how it ended.

A Transaction records everything an attempt acquired, uploaded, seeded and held aside, so that
each way back (dispatch.Dispatcher.unwind and .fail) finds it in one place. A DispatchResult says
how the dispatch import answers: published, refused with a status, or "nothing published, fall
back" with its reason code, never a made-up status.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
import numpy as np

from ..abi.table import Status
from ..diagnostics import BufferOperation, ReasonCode
from ..gpu import BufferHandle, ComputePipeline, UploadStage
from .eviction import Scratch
from .records import Buffer, Parked
from .table import InstanceBuffers

@dataclass(frozen=True)
class DispatchPlan:
    """What the transaction needs to know about a kernel (from the compiler's KernelPlan)."""

    pipeline: ComputePipeline
    used_slots: tuple[int, ...]
    write_slots: frozenset[int]
    read_before_write: frozenset[int]
    error_word: bool = False
    loop_budget: int = 0  # the parameter block's word 1: loop-head passes one invocation may make
    memory: int = -1  # the guest memory its loads read (snapshots.py), bound after the error word; -1: none
    memory_low: int = 0
    overwritten_slots: frozenset[int] = frozenset()  # KernelPlan.overwritten_slots: replaced whole at a full count


class DispatchEnd(enum.Enum):
    PUBLISHED = "published"  # the outputs are committed: status 0, outcome GPU
    REFUSED = "refused"  # the guest gets `status` (LIMIT_EXCEEDED, CANCELLED); nothing published
    FALL_BACK = "fall back"  # nothing published; the guest's CPU runner answers (reason_code says why)


@dataclass(frozen=True, slots=True)
class DispatchResult:
    end: DispatchEnd
    status: Status = Status.OK
    reason_code: ReasonCode = ReasonCode.NONE
    reason: str = ""


PUBLISHED = DispatchResult(DispatchEnd.PUBLISHED)


@dataclass(eq=False, slots=True)
class Upload:
    """A range of a buffer's CPU copy (words, or a prestaged UploadStage) bound for its device copy."""

    buf: Buffer
    gpu: BufferHandle  # buf's committed device copy, where the words go
    start: int
    end: int
    words: np.ndarray | UploadStage


class Transaction:
    """Everything one dispatch attempt has taken so far. A plain slotted class: one is made per
    dispatch, and a dataclass's generated __init__ with six default factories cost ~3 us."""

    __slots__ = ("inst", "plan", "bound", "count", "deadline", "op", "pipelined", "transient", "acquired",
                 "uploads", "seeds", "outputs", "storage", "readahead", "held_aside", "params",
                 "guest_memory")

    def __init__(self, inst: InstanceBuffers, plan: DispatchPlan, bound: dict[int, Buffer], count: int,
                 deadline: float, op: BufferOperation, pipelined: bool = False) -> None:
        self.inst = inst
        self.plan = plan
        self.bound = bound
        self.count = count
        self.deadline = deadline
        self.op = op
        self.pipelined = pipelined  # committed when recorded, confirmed later (pending.py)
        self.transient = 0  # bytes reserved only for this submission
        self.acquired: list[Scratch] = []  # scratch taken from the pool or allocated
        self.uploads: list[Upload] = []
        self.seeds: list[tuple[BufferHandle, BufferHandle, int, int]] = []  # (src, dst, offset, bytes)
        self.outputs: dict[int, Scratch] = {}  # slot -> what the kernel writes
        self.storage: list[BufferHandle] = []  # binding order
        self.readahead: list[BufferHandle] = []
        self.held_aside: dict[int, tuple[Buffer, Parked]] = {}  # outputs written in place
        self.params: bytes | None = None  # a new parameter block to upload
        self.guest_memory: tuple[int, int] | None = None  # (address, bytes) of plan.memory, for its snapshot

    def reattach(self) -> None:
        """Give the outputs written in place their parked readbacks back."""
        for buf, parked in self.held_aside.values():
            buf.parked = parked


# Statuses a refused dispatch hands the guest as they are; any other failure falls back to the CPU.
_REFUSALS = frozenset({Status.LIMIT_EXCEEDED, Status.CANCELLED})


def refused_or_fallback(status: Status, quarantine_reason: str) -> DispatchResult:
    """How a dispatch that stopped with `status` answers: the status itself, or a CPU fallback
    (reason DEVICE_FAILURE, with the quarantine reason if there is one)."""
    if status in _REFUSALS:
        return DispatchResult(DispatchEnd.REFUSED, status)
    return DispatchResult(DispatchEnd.FALL_BACK, status, ReasonCode.DEVICE_FAILURE, quarantine_reason)
