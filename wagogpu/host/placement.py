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
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..abi import accessor as acc
from ..buffers import Buffer
from ..buffers.records import FLAGS_WORD
from ..compiler.contract import KernelClass, KernelPlan
from ..config import KernelConfig
from ..diagnostics import BufferOperation, ReasonCode
from .context import RuntimeContext
from .costmodel import Device, Probe

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
    cfg = ctx.config
    cpu = cfg.cpu_kernels and plan.cls is KernelClass.ELIGIBLE
    if cfg.placement == MEASURED and cpu:
        # min_elements aside: could the GPU run it? (the only check that depends on the count)
        code, reason = ctx.gpu_decision(module, kernel, plan, max(count, kernel.min_elements))
        if code is ReasonCode.NONE:
            return _ON_GPU if measured_where(ctx, module, kernel, plan, count, bound) is Where.GPU else _ON_CPU
        return Placement(Where.CPU, code, reason)
    code, reason = ctx.gpu_decision(module, kernel, plan, count)
    if code is ReasonCode.NONE:
        return _ON_GPU
    return Placement(Where.CPU if cpu else Where.GUEST, code, reason)


def measured_where(ctx: RuntimeContext, module: Module, kernel: KernelConfig, plan: KernelPlan, count: int,
                   bound: dict[int, Buffer] | None) -> Where:
    """The measured choice for a dispatch both devices can run (host/dispatch.py asks it directly
    once the kernel's fixed GPU checks passed): the copies each device needs first, priced on the
    measured copy lines, and the kernel's model. Runs on every dispatch: kept to plain reads."""
    costs = ctx.costs
    model = costs.kernels.get((module.id, kernel.id))
    if model is not None:  # a settled decision repeats without asking (costmodel.STREAK; a move ends it)
        settled = model.repeat(count)
        if settled is not None:
            return _WHERE_GPU if settled is _GPU_DEVICE else _WHERE_CPU
    else:
        model = costs.model(module.id, kernel.id)
    if isinstance(module.cpu_kernels.get(kernel.id), str):  # its CPU module did not build: the GPU's
        return _WHERE_GPU
    move_gpu = move_cpu = 0.0
    if bound:
        up = down = ups = downs = 0
        overwritten = plan.overwritten_slots
        for b in kernel.bindings:
            buf = bound[b.slot]
            flags = buf.record.words[FLAGS_WORD]
            if flags & _BOTH != _BOTH:
                # Neither device needs the stale copy of a slot this dispatch replaces whole (KernelPlan.replaces_whole).
                whole = count == buf.length and b.slot in overwritten
                if not flags & _CPU and not buf.parked_valid() and not whole:  # the CPU path reads it back first
                    down += buf.gpu_bytes
                    downs += 1
                if not flags & _GPU and not whole and (b.slot in plan.read_slots or b.slot in plan.write_slots):
                    # the GPU path uploads a slot its shader binds (a dirty range, if one is kept) first
                    start, end = buf.record.dirty() or (0, buf.length)
                    up += (end - start) * buf.gpu_stride
                    ups += 1
        if ups:
            move_gpu = costs.to_gpu.seconds(up, ups)
        if downs:
            move_cpu = costs.to_cpu.seconds(down, downs)
    return _WHERE_GPU if model.choose(count, move_gpu, move_cpu) is _GPU_DEVICE else _WHERE_CPU


_CPU, _GPU = acc.CPU_CURRENT, acc.GPU_CURRENT
_BOTH = _CPU | _GPU
_WHERE_GPU, _WHERE_CPU = Where.GPU, Where.CPU
_GPU_DEVICE, _CPU_DEVICE = Device.GPU, Device.CPU
_NO_PROBE = Probe.NONE
_ON_GPU = Placement(Where.GPU)
_ON_CPU = Placement(Where.CPU, ReasonCode.NONE, "")


def observe(ctx: RuntimeContext, module: Module, kernel_id: int, where: Where, count: int, op: BufferOperation,
            started: float) -> None:
    """A finished dispatch (called before its record is closed, while its stage times still stand),
    for the measured model of the device it ran on: its wall time since `started`, the copies it
    made taken out. Its readbacks feed the copy line toward the CPU when the record closes
    (CostModels.note_readbacks); its uploads feed the line toward the GPU here."""
    seconds = time.perf_counter() - started
    costs = ctx.costs
    model = costs.kernels.get((module.id, kernel_id)) or costs.model(module.id, kernel_id)
    bd = model.bands.get(count.bit_length())
    if bd is not None and bd.streak and not (op.download_count or op.upload_count) and bd.probe is _NO_PROBE:
        bd.since += seconds  # a repeated decision's dispatch, nothing moved: the streak's last one is the sample
        return
    moved = op.download + op.conversion
    if where is _WHERE_CPU:
        model.observe(_CPU_DEVICE, count, seconds, moved)
        return
    ups = op.upload_count
    if ups:
        # The recorded upload time is the host's part (into staging); the device's copy runs in the
        # same submission, so where the band's kernel time is known the rest counts too.
        uploaded = op.upload
        known = model.estimate(_GPU_DEVICE, count)
        if known is not None:
            uploaded = max(uploaded, seconds - moved - known)
        costs.to_gpu.add(op.gpu_upload_bytes, uploaded, ups)
        moved += uploaded
    model.observe(_GPU_DEVICE, count, seconds, moved + op.device_copy)
