"""The runtime context: what one Host's import functions, legacy runners and instances share.

The Host makes one RuntimeContext and hands it to everything it constructs, so nothing reaches
into the Host's own attributes: the lock every import runs under, the byte budget, the residency
(device, quarantine) and its dispatcher, the diagnostics records, the GPU decision for a dispatch,
the stopped flag and why there is no device.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import wasmtime

from ..abi.table import Status
from ..buffers import BufferLimits, Dispatcher, Residency, RuntimeBudget
from ..compiler.contract import KernelClass, KernelPlan
from ..config import Config, KernelConfig
from ..diagnostics import NO_COUNTERS, BufferOperation, CounterGroup, LegacyTiming, ReasonCode, TransferCounters
from .costmodel import CostModels
from .definitions import HostDefinitions
from .guest_limits import GuestLimits

if TYPE_CHECKING:  # pragma: no cover  (type-only: closes no runtime circle)
    from ..gpu.device import GpuDevice
    from .instance import Instance
    from .module import Module

#: The import whose records the log keeps as last_dispatch.
DISPATCH_IMPORT = "dispatch"
#: Statuses above this one are failures: the log keeps their records as last_failure.
LAST_SUCCESS_STATUS = int(Status.CPU_FALLBACK)
#: A counter group's records kept unsummed at most (then summed into Totals at once).
MAX_UNSUMMED = 1024
# A kernel computing in f64 on a device without it (gpu.adapters.F64_FEATURES) runs on the CPU.
F64_REASON = "f64 needs the adapter's shader-f64 feature (and shader-int64)"


class OperationLog:
    """The diagnostics records of one host (docs/design/abi.md §8): the last non-scalar import, the last
    dispatch and the last failed import (both kept across later imports), the transfer totals and
    the legacy run counters."""

    def __init__(self) -> None:
        self.sequence = 0
        self.last = BufferOperation()
        self.last_dispatch = BufferOperation()
        self.last_failure = BufferOperation()
        self._totals = TransferCounters()
        # Per counter group, the values of each record added by it and not yet in _totals.
        self._unsummed: defaultdict[CounterGroup, list[tuple[int, ...]]] = defaultdict(list)
        self.legacy = LegacyTiming()
        self.legacy_successes = 0
        self.legacy_fallbacks = 0

    @property
    def totals(self) -> TransferCounters:
        """The transfer totals, with every record so far in them."""
        self._sum()
        return self._totals

    def record(self, op: BufferOperation, counters: CounterGroup | None = None) -> None:
        """Keep op as Last (and Last dispatch, Last failure where it is one); add its counters to
        Totals: any it holds, or where the caller knows the group it can hold (``counters``), that
        group's values, summed later (NO_COUNTERS: none)."""
        self.sequence += 1
        op.sequence = self.sequence
        self.last = op
        if op.import_name == DISPATCH_IMPORT:
            self.last_dispatch = op
        if op.status > LAST_SUCCESS_STATUS:
            self.last_failure = op
        if counters is None:
            self._totals.add(op)
        elif counters is not NO_COUNTERS:
            rows = self._unsummed[counters]
            rows.append(counters.values(op))
            if len(rows) >= MAX_UNSUMMED:
                self._sum()

    def _sum(self) -> None:
        for group, rows in self._unsummed.items():
            if rows:
                self._totals.add_sums(group.names, map(sum, zip(*rows)))
                rows.clear()


@dataclass(eq=False)
class RuntimeContext:
    """One Host's shared runtime state; every field is the Host's to change, everyone's to read."""

    config: Config
    engine: wasmtime.Engine
    accessor: wasmtime.Module  # the accessor module, compiled once per host
    budget: RuntimeBudget
    residency: Residency
    device_reason: str  # why no device was opened ("" when one was)
    device_init: float = 0.0  # seconds the device took to open
    lock: threading.RLock = field(default_factory=threading.RLock)
    log: OperationLog = field(default_factory=OperationLog)
    instances: dict[int, Instance] = field(default_factory=dict)
    modules: list[Module] = field(default_factory=list)
    definitions: HostDefinitions = field(default_factory=HostDefinitions)  # Host.define_func
    stopped: bool = False
    cpu_pool: Any = None  # cputhreads.WorkerPool, made on the first CPU kernel run on several threads
    costs: CostModels = field(default_factory=CostModels)  # placement="measured"'s models (costmodel.py)

    def __post_init__(self) -> None:
        cfg = self.config
        # Profile mode times waited stages: nothing is pipelined there.
        self.dispatcher = Dispatcher(self.residency, pipelined=cfg.pipelined and not cfg.profile_stages)
        self.limits = BufferLimits(cfg.max_buffers_per_instance, cfg.max_instance_buffer_bytes, cfg.max_elements)
        self.guest_limits = GuestLimits.from_config(cfg)

    @property
    def device(self) -> GpuDevice | None:
        return self.residency.device

    def gpu_decision(self, module: Module, kernel: KernelConfig, plan: KernelPlan,
                     count: int) -> tuple[ReasonCode, str]:
        """Why a valid dispatch does not go to the GPU (docs/design/abi.md §2.6 step 8), or (NONE, "")."""
        if self.config.disabled:
            return ReasonCode.DISABLED, "GPU disabled"
        if plan.cls is KernelClass.REJECTED:
            return ReasonCode.UNSUPPORTED_KERNEL, plan.reason
        if plan.is_float and not kernel.relaxed_float:
            return ReasonCode.FLOAT_MODE, "float kernel without relaxed_float consent"
        if count < kernel.min_elements:
            return ReasonCode.BELOW_THRESHOLD, f"count {count} below min_elements {kernel.min_elements}"
        if kernel.id in module.pipeline_failures:
            return ReasonCode.PIPELINE_FAILURE, module.pipeline_failures[kernel.id]
        res = self.residency
        if plan.needs_f64 and res.usable and not res.live.has_f64:
            return ReasonCode.UNSUPPORTED_KERNEL, F64_REASON
        if not res.usable or kernel.id not in module.dispatch_plans:
            return ReasonCode.NO_DEVICE, res.quarantine_reason or self.device_reason or "no device"
        return ReasonCode.NONE, ""
