"""The snapshots a Host reports (docs/design/abi.md §8): copied out of the runtime context under its lock."""
from __future__ import annotations

import time
from dataclasses import replace

from ..compiler.contract import KernelClass
from ..compiler import reader
from ..config import KernelConfig
from ..diagnostics import (BufferOperation, BufferSnapshot, DeviceState, KernelDiagnostic, KernelState,
                           RuntimeState, Snapshot)
from .context import RuntimeContext
from .module import Module


def settle_pending(ctx: RuntimeContext, seconds: float | None = None) -> None:
    """A snapshot (or close) reports what the device confirmed: pipelined dispatches are waited
    for first, for run_timeout (or ``seconds``). Called under the host lock."""
    pending = ctx.residency.pending
    if pending:
        wait = ctx.config.run_timeout if seconds is None else seconds
        pending.settle(time.perf_counter() + wait)


def runtime_state(ctx: RuntimeContext) -> RuntimeState:
    """Later states take precedence: STOPPED over DISABLED over FAILED over READY/UNAVAILABLE."""
    if ctx.stopped:
        return RuntimeState.STOPPED
    if ctx.config.disabled:
        return RuntimeState.DISABLED
    if ctx.residency.quarantined:
        return RuntimeState.FAILED
    return RuntimeState.READY if ctx.residency.device is not None else RuntimeState.UNAVAILABLE


def _state_reason(ctx: RuntimeContext, state: RuntimeState) -> str:
    if state is RuntimeState.READY:
        return ""
    if state is RuntimeState.FAILED:
        return ctx.residency.quarantine_reason
    if state is RuntimeState.DISABLED:
        return "GPU disabled"
    return ctx.device_reason


def _copy(op: BufferOperation) -> BufferOperation:
    return replace(op)


def buffer_snapshot(ctx: RuntimeContext) -> BufferSnapshot:
    """State, Last, Totals, kernels and instances of the wago_gpu_v1 runtime (docs/design/abi.md §8.2-8.5)."""
    res = ctx.residency
    settle_pending(ctx)
    res.check_loss()
    device = res.device
    state = runtime_state(ctx)
    device_state = (DeviceState.QUARANTINED if res.quarantined else
                    DeviceState.USABLE if device is not None else DeviceState.UNAVAILABLE)
    kernels = sorted((kernel_diagnostic(ctx, module, k) for module in ctx.modules for k in ctx.config.kernels),
                     key=lambda d: d.kernel_id)
    stats = device.stats if device is not None else None
    budget = ctx.budget
    return BufferSnapshot(
        state=state, device_state=device_state, reason=_state_reason(ctx, state),
        last=_copy(ctx.log.last), last_dispatch=_copy(ctx.log.last_dispatch),
        last_failure=_copy(ctx.log.last_failure), totals=ctx.log.totals.counters(),
        totals_complete=res.totals_complete, kernels=kernels,
        instances=[i.buffers.diagnostic() for i in ctx.instances.values() if not i.buffers.closed],
        pipeline_hits=stats.pipeline_hits if stats else 0, pipeline_misses=stats.pipeline_misses if stats else 0,
        runtime_buffer_bytes=budget.total, runtime_pool_bytes=budget.idle_bytes(),
        legacy_buffer_bytes=budget.legacy_bytes, peak_runtime_buffer_bytes=budget.peak_bytes,
        device=device.info.name if device is not None else "", device_init=ctx.device_init,
        timestamps_supported=bool(device.has_timestamps) if device is not None else False,
        loop_limits=res.loop_limits, loop_budget=res.loop_budget(1, reader.LOOP_BUDGET), quarantine=res.quarantine_report,
        lost_dispatches=tuple(res.pending.lost_sequences))


def kernel_diagnostic(ctx: RuntimeContext, module: Module, k: KernelConfig) -> KernelDiagnostic:
    contract = module.contract
    plan = contract.kernels.get(k.id) if contract.verified else None
    d = KernelDiagnostic(module=module.id, kernel_id=k.id, state=KernelState.UNVERIFIED_CONTRACT,
                         contract_verified=plan is not None,
                         translate=plan.translate_seconds if plan else 0.0,
                         pipeline=module.pipeline_seconds.get(k.id, 0.0))
    if plan is None:
        d.reason = contract.reason
    elif plan.cls is KernelClass.INVALID:
        d.state, d.reason = KernelState.INVALID_CONTRACT, plan.reason
    elif k.id in module.pipeline_failures:
        d.state, d.reason = KernelState.PIPELINE_FAILED, module.pipeline_failures[k.id]
    elif k.id in module.dispatch_plans:
        d.state = KernelState.PIPELINE_READY
        d.loop_budget = module.dispatch_plans[k.id].loop_budget
    else:
        d.state = KernelState.CPU_ONLY
        d.reason = plan.reason or ctx.gpu_decision(module, k, plan, 1 << 32)[1]
    model = ctx.costs.kernels.get((module.id, k.id))
    if model is not None:
        d.placement = {**model.report(), "copies": ctx.costs.report()}
    return d


def legacy_snapshot(ctx: RuntimeContext) -> Snapshot:
    """Legacy wago_gpu.run / run_batch diagnostics (docs/design/abi.md §8.1)."""
    settle_pending(ctx)
    res = ctx.residency
    log = ctx.log
    return Snapshot(
        device=res.device.info.name if res.device is not None else "",
        reason=res.quarantine_reason or ctx.device_reason, gpu_failed=res.quarantined,
        device_init=ctx.device_init, translate=0.0, pipeline=0.0,
        last=replace(log.legacy), successes=log.legacy_successes, fallbacks=log.legacy_fallbacks,
        modules=len(ctx.modules), instances=len(ctx.instances),
        pipelines=sum(1 for m in ctx.modules if m.legacy_pipeline is not None),
        buffer_bytes=ctx.budget.legacy_bytes)
