"""Where a valid dispatch runs: the one decision function for the dispatch path (its per-kernel
fast path included: host/dispatch.py takes it only where this function would answer GPU without
asking) and the demo.

`threshold` (Config.placement's default) is the reference's rule, docs/design/abi.md §2.6 step 8: the GPU
when RuntimeContext.gpu_decision finds nothing against it (a device, the subset, float consent,
min_elements, a pipeline), else the kernel's CPU module when Config.cpu_kernels, else status 1
for the guest's own runner. `measured` asks the cost model (costmodel.py) whenever both devices
can run the kernel, min_elements aside: each dispatch goes where it is predicted faster, copies
that residency implies included.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..abi import accessor as acc
from ..abi.table import Access
from ..buffers import Buffer
from ..compiler.contract import KernelClass, KernelPlan
from ..config import KernelConfig
from ..diagnostics import BufferOperation, ReasonCode
from .context import RuntimeContext
from .costmodel import Device

if TYPE_CHECKING:  # pragma: no cover  (type-only: closes no runtime circle)
    from .module import Module

MEASURED = "measured"


class Where(enum.StrEnum):
    GPU = "GPU"
    CPU = "CPU"  # the kernel's CPU module (Config.cpu_kernels)
    GUEST = "GUEST"  # status 1: the guest's own CPU runner


@dataclass(frozen=True, slots=True)
class Placement:
    where: Where
    reason_code: ReasonCode = ReasonCode.NONE  # why not on the GPU (NONE when it is)
    reason: str = ""


def place(ctx: RuntimeContext, module: Module, kernel: KernelConfig, plan: KernelPlan, count: int,
          bound: dict[int, Buffer] | None = None) -> Placement:
    """Where a dispatch of `count` elements of `kernel` runs now (`bound`: its buffers, for the
    copies a device change implies under measured placement)."""
    code, reason = ctx.gpu_decision(module, kernel, plan, count)
    cfg = ctx.config
    cpu = cfg.cpu_kernels and plan.cls is KernelClass.ELIGIBLE
    if cfg.placement == MEASURED and cpu:
        if code is ReasonCode.BELOW_THRESHOLD:  # min_elements aside, could the GPU run it?
            code, reason = ctx.gpu_decision(module, kernel, plan, kernel.min_elements)
            if code is not ReasonCode.NONE:
                return Placement(Where.CPU, code, reason)
        if code is ReasonCode.NONE:
            return _measured(ctx, module, kernel, count, bound)
    if code is ReasonCode.NONE:
        return Placement(Where.GPU)
    return Placement(Where.CPU if cpu else Where.GUEST, code, reason)


def _measured(ctx: RuntimeContext, module: Module, kernel: KernelConfig, count: int,
              bound: dict[int, Buffer] | None) -> Placement:
    costs = ctx.costs
    to_cpu = to_gpu = 0
    if bound:
        for b in kernel.bindings:
            buf = bound[b.slot]
            flags = buf.record.flags
            if not flags & acc.CPU_CURRENT:  # the CPU path reads every stale binding back first
                to_cpu += buf.nbytes
            if not flags & acc.GPU_CURRENT and not (b.access == Access.WRITE and count == buf.length):
                to_gpu += buf.gpu_bytes  # (an output the GPU replaces whole is not uploaded: buffers/setup.py)
    device = costs.model(module.id, kernel.id).choose(
        count, costs.copy_seconds(Device.GPU, to_gpu), costs.copy_seconds(Device.CPU, to_cpu))
    return _ON_GPU if device is Device.GPU else _ON_CPU


_ON_GPU = Placement(Where.GPU)
_ON_CPU = Placement(Where.CPU, ReasonCode.NONE, "")


def observe(ctx: RuntimeContext, module: Module, kernel_id: int, where: Where, count: int, op: BufferOperation) -> None:
    """A finished dispatch's wall time, for the measured model of the device it ran on: the copies
    it made (uploads, readbacks, device copies) taken out, since the model prices those apart."""
    if ctx.config.placement == MEASURED and where is not Where.GUEST:
        device = Device.GPU if where is Where.GPU else Device.CPU
        seconds = op.total - op.upload - op.download - op.device_copy
        ctx.costs.model(module.id, kernel_id).observe(device, count, seconds)
