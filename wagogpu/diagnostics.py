"""Snapshot records (docs/design/abi.md §8) and the closed sets of names they carry.

A leaf every layer may import: the buffer layer fills BufferOperation, the host copies the records
out under its lock. Every closed set is a StrEnum whose values are the names docs/design/abi.md §8 prints, so
a snapshot compares equal to (and serialises as) the same strings as before.
"""
from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass, field, fields
from operator import attrgetter
from typing import Any, Callable, Iterable


class Outcome(enum.StrEnum):
    """How a non-scalar import ended (docs/design/abi.md §8.3); NONE only in a record no import has filled."""

    NONE = ""
    OK = "OK"
    GPU = "GPU"
    CPU = "CPU"  # a CPU kernel (Config.cpu_kernels) ran it and committed its outputs
    CPU_FALLBACK_READY = "CPU_FALLBACK_READY"
    NOOP = "NOOP"
    ERROR = "ERROR"


class ReasonCode(enum.StrEnum):
    """Why a dispatch did not run on the GPU, or which failure decided an error status."""

    NONE = "NONE"
    DISABLED = "DISABLED"
    NO_DEVICE = "NO_DEVICE"
    FLOAT_MODE = "FLOAT_MODE"
    BELOW_THRESHOLD = "BELOW_THRESHOLD"
    UNSUPPORTED_KERNEL = "UNSUPPORTED_KERNEL"
    PIPELINE_FAILURE = "PIPELINE_FAILURE"
    KERNEL_TRAP = "KERNEL_TRAP"
    LOOP_BUDGET = "LOOP_BUDGET"
    INDEX_RANGE = "INDEX_RANGE"
    DEVICE_FAILURE = "DEVICE_FAILURE"
    CONTRACT_ERROR = "CONTRACT_ERROR"
    CONTRACT_UNVERIFIED = "CONTRACT_UNVERIFIED"
    RESOURCE_LIMIT = "RESOURCE_LIMIT"
    CANCELLED = "CANCELLED"
    CONTENTS_LOST = "CONTENTS_LOST"


class RuntimeState(enum.StrEnum):
    """BufferSnapshot.state; later members take precedence when several hold (docs/design/abi.md §8.2)."""

    UNAVAILABLE = "UNAVAILABLE"
    READY = "READY"
    FAILED = "FAILED"
    DISABLED = "DISABLED"
    STOPPED = "STOPPED"


class DeviceState(enum.StrEnum):
    UNAVAILABLE = "UNAVAILABLE"
    USABLE = "USABLE"
    QUARANTINED = "QUARANTINED"


class KernelState(enum.StrEnum):
    """KernelDiagnostic.state: what the host made of one configured kernel of one module."""

    UNVERIFIED_CONTRACT = "UNVERIFIED_CONTRACT"
    INVALID_CONTRACT = "INVALID_CONTRACT"
    PIPELINE_READY = "PIPELINE_READY"
    PIPELINE_FAILED = "PIPELINE_FAILED"
    CPU_ONLY = "CPU_ONLY"


class BufferState(enum.StrEnum):
    """Where a buffer's current contents are (docs/design/abi.md §4.1)."""

    CPU_CURRENT = "CPU_CURRENT"
    GPU_CURRENT = "GPU_CURRENT"
    BOTH_CURRENT = "BOTH_CURRENT"
    CONTENTS_LOST = "CONTENTS_LOST"


class Stage(enum.StrEnum):
    """The profiled stages of an import (BufferOperation's duration fields of the same names)."""

    UPLOAD = "upload"
    DEVICE_COPY = "device_copy"
    COMPUTE = "compute"
    DOWNLOAD = "download"
    CONVERSION = "conversion"
    COMMIT = "commit"


@dataclass
class TransferCounters:
    guest_set_bytes: int = 0
    guest_set_count: int = 0
    guest_copy_bytes: int = 0
    guest_copy_count: int = 0
    logical_upload_bytes: int = 0
    gpu_upload_bytes: int = 0
    upload_count: int = 0
    logical_download_bytes: int = 0
    gpu_download_bytes: int = 0
    download_count: int = 0
    device_copy_bytes: int = 0
    device_copy_count: int = 0
    parameter_upload_bytes: int = 0
    parameter_upload_count: int = 0

    def add(self, other: "TransferCounters") -> None:
        """Add ``other``'s counters: only those it holds itself (a record made by
        BufferOperation.start holds the few fields its import set, the rest are the class's zeros),
        found by one C loop over its own fields."""
        mine = self.__dict__
        theirs = other.__dict__
        for name in _COUNTER_SET.intersection(theirs):
            mine[name] += theirs[name]

    def add_sums(self, names: tuple[str, ...], sums: Iterable[int]) -> None:
        """Add ``sums``, one per counter of ``names`` (a CounterGroup's records, summed)."""
        mine = self.__dict__
        for name, total in zip(names, sums):
            mine[name] += total

    def counters(self) -> "TransferCounters":
        return TransferCounters(**{name: self.__dict__[name] for name in COUNTER_NAMES})


COUNTER_NAMES = tuple(f.name for f in fields(TransferCounters))
_COUNTER_SET = frozenset(COUNTER_NAMES)


def _no_values(_record: object) -> tuple[int, ...]:
    return ()


class CounterGroup:
    """The counters a common successful import's record can hold (the rest stay at the class's
    zeros), for OperationLog.record: such a record's values are read in one C call and summed into
    Totals when Totals are read, not counter by counter on every import (a copy back's five cost
    about 1 us that way on the 2-core machine). The tests' conftest checks every record against
    the group it is added by."""

    __slots__ = ("names", "values")

    def __init__(self, *names: str) -> None:
        assert _COUNTER_SET.issuperset(names) and len(names) != 1  # (attrgetter of one name gives no tuple)
        self.names = names
        self.values: Callable[[Any], tuple[int, ...]] = attrgetter(*names) if names else _no_values

    def __repr__(self) -> str:
        return f"CounterGroup{self.names}"


#: A whole set of guest words (setBuffer*), a copy back (a readback, then the guest's copy), a
#: steady dispatch's uploads, and a record that holds no counter.
SET_COUNTERS = CounterGroup("guest_set_bytes", "guest_set_count")
COPY_COUNTERS = CounterGroup("logical_download_bytes", "gpu_download_bytes", "download_count", "guest_copy_bytes",
                             "guest_copy_count")
UPLOAD_COUNTERS = CounterGroup("logical_upload_bytes", "gpu_upload_bytes", "upload_count")
NO_COUNTERS = CounterGroup()
STAGE_FIELDS = tuple(str(s) for s in Stage)  # BufferOperation fields zeroed when a profile is invalid


@dataclass
class BufferOperation(TransferCounters):
    """The last non-scalar wago_gpu_v1 import (docs/design/abi.md §8.3). Durations are seconds."""

    sequence: int = 0
    instance: int = 0
    kernel_id: int = 0
    import_name: str = ""
    status: int = 0
    count: int = 0
    outcome: Outcome = Outcome.NONE
    reason_code: ReasonCode = ReasonCode.NONE
    reason: str = ""
    # (Every field an import sets on its common paths comes in the first SHARED_FIELDS: CPython
    # 3.11 and 3.12 keep a record's attributes inline only while its class's shared keys hold them,
    # and a record given a field past them keeps a dict of its own, every read and write of it then
    # a slower, generic one. profile_valid, the 30th, is set only when True.)
    queue_wait: float = 0.0
    total: float = 0.0
    hardware_submitted: bool = False
    pipelined: bool = False  # ours: a dispatch that returned once recorded, before the device ran it
    confirmed: bool = False  # ours: the device reported this call's GPU work complete (maybe later)
    transfer_counts_complete: bool = True
    profile_valid: bool = False
    timestamps_valid: bool = False
    device_compute: float = 0.0
    upload: float = 0.0
    device_copy: float = 0.0
    compute: float = 0.0
    download: float = 0.0
    conversion: float = 0.0
    commit: float = 0.0

    def __str__(self) -> str:
        """One line: the import, status, outcome, reason code and reason, and the times that were
        measured (`repr` keeps every field)."""
        if not self.import_name:
            return "no import yet"
        what = self.import_name
        if what == "dispatch":
            what += f" kernel {self.kernel_id} count {self.count}"
        text = f"{what}: status {self.status}, {self.outcome}"
        if self.reason_code != ReasonCode.NONE or self.reason:
            text += f" ({self.reason_code}: {self.reason})" if self.reason else f" ({self.reason_code})"
        stages = ", ".join(f"{name} {getattr(self, name) * 1e3:.3f} ms" for name in ("upload", "compute", "download")
                           if getattr(self, name))
        return text + f", {self.total * 1e3:.3f} ms" + (f" ({stages})" if stages else "")

    @classmethod
    def start(cls, import_name: str, instance: int, count: int, kernel_id: int) -> "BufferOperation":
        """A fresh record for an import being served. The dataclass __init__ with its 38 keyword
        defaults costs several microseconds per import, and so does copying a dict of them; every
        default is immutable and lives on the class, so the record holds only what was set."""
        op = object.__new__(cls)
        op.import_name = import_name  # (attribute by attribute: see host/calls.py's _stage_times)
        op.instance = instance
        op.count = count
        op.kernel_id = kernel_id
        return op


_OPERATION_DEFAULTS = {f.name: f.default for f in fields(BufferOperation)}
assert MISSING not in _OPERATION_DEFAULTS.values(), "start() reads every default from the class: each needs a plain one"
#: The fields a record keeps inline. CPython 3.11 and 3.12 give a class 30 shared keys, less one
#: for every instance made before they fill; the first record, made here with every field in
#: declaration order, fills them with the first 29 fields, whatever the host makes later.
SHARED_FIELDS = 29
_FIRST_RECORD = BufferOperation()


@dataclass
class KernelDiagnostic:
    module: int
    kernel_id: int
    state: KernelState
    reason: str = ""
    contract_verified: bool = False
    translate: float = 0.0
    pipeline: float = 0.0
    loop_budget: int = 0  # ours: the loop budget its dispatches carry (0: no loop, or none is safe)
    # ours, placement="measured": per device its samples and median_us_from_elements (each size
    # band's estimate, the lower median in µs, keyed by its smallest count); the decisions count,
    # the last decisions and the host's measured copy lines ("copies": to_GPU, to_CPU)
    placement: dict[str, object] = field(default_factory=dict)


@dataclass
class InstanceDiagnostic:
    instance: int
    buffers: int = 0
    cpu_current: int = 0
    gpu_current: int = 0
    both_current: int = 0
    contents_lost: int = 0
    logical_bytes: int = 0
    cpu_bytes: int = 0
    gpu_bytes: int = 0
    staging_bytes: int = 0
    scratch_bytes: int = 0
    retained_pool_bytes: int = 0
    reserved_bytes: int = 0
    peak_bytes: int = 0


@dataclass
class BufferSnapshot:
    state: RuntimeState
    device_state: DeviceState
    reason: str
    last: BufferOperation
    totals: TransferCounters
    totals_complete: bool
    last_dispatch: BufferOperation = field(default_factory=BufferOperation)  # ours: survives later copies
    # ours: the last import that answered an error status (2..12), kept across later successes, so
    # that after a trap the status and reason the guest ignored can still be read
    last_failure: BufferOperation = field(default_factory=BufferOperation)
    kernels: list[KernelDiagnostic] = field(default_factory=list)
    instances: list[InstanceDiagnostic] = field(default_factory=list)
    pipeline_hits: int = 0
    pipeline_misses: int = 0
    runtime_buffer_bytes: int = 0
    runtime_pool_bytes: int = 0
    legacy_buffer_bytes: int = 0
    peak_runtime_buffer_bytes: int = 0
    pending_contracts: int = 0
    device: str = ""  # adapter description, "" when none (ours; names the adapter in every figure)
    device_init: float = 0.0
    timestamps_supported: bool = False
    #: Sequence numbers of pipelined dispatches that returned 0 and whose work the device never
    #: confirmed (their outputs became CONTENTS_LOST), oldest first.
    lost_dispatches: tuple[int, ...] = ()
    loop_limits: LoopLimits | None = None  # ours: the adapter's measured loop limits (None: no device)
    loop_budget: int = 0  # ours: loop-head passes an invocation of a one-loop kernel may make
    quarantine: QuarantineReport | None = None  # ours: what the quarantine read back and what it lost


@dataclass(frozen=True)
class LoopLimits:
    """What an adapter does to long shader loops, as measured when the device opened (gpu/probe.py).

    ``cut``: loop passes after which the adapter silently ends a loop (llvmpipe: 65,535), None when
    none was seen within ``probed_passes``. ``lanes``: invocations that share one count (llvmpipe:
    its SIMD width, 8 on a 256-bit host). ``across_loops``: the count spans the loops of an
    invocation one after another. ``single_pass_free``: the driver removed the probe's loops that
    never repeat (it keeps others, so the budget counts them all). ``budget``: loop-head passes one
    invocation of a one-loop kernel may make on this adapter (None: the adapter sets no limit; 0:
    loop kernels always fall back to the CPU).
    ``error``: why the probe could not measure (the budget is then 0).
    """

    cut: int | None
    lanes: int
    across_loops: bool
    single_pass_free: bool
    budget: int | None
    probed_passes: int
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class QuarantineReport:
    """What the quarantine kept (wagogpu's guarantee beyond docs/design/abi.md §4.7: nothing readable is lost).

    ``settled``: the work that timed-out waits left on the device finished within the bound, so the
    device could be read. ``rescued_*``: committed GPU-only buffers read back into their CPU copies;
    ``lost_buffers``: those that could not be (they are CONTENTS_LOST). Seconds are wall time.
    """

    reason: str
    settled: bool
    rescued_buffers: int
    rescued_bytes: int
    lost_buffers: int
    settle_seconds: float
    rescue_seconds: float


@dataclass
class LegacyTiming:
    upload: float = 0.0
    compute: float = 0.0
    download: float = 0.0
    commit: float = 0.0
    total: float = 0.0
    device_compute: float = 0.0
    timestamps_valid: bool = False
    upload_bytes: int = 0
    download_bytes: int = 0
    passes: int = 0


@dataclass
class Snapshot:
    """Legacy wago_gpu.run / run_batch diagnostics (docs/design/abi.md §8.1)."""

    device: str
    reason: str
    gpu_failed: bool
    device_init: float
    translate: float
    pipeline: float
    last: LegacyTiming
    successes: int
    fallbacks: int
    modules: int
    instances: int
    pipelines: int
    buffer_bytes: int
