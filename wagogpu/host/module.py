"""Module: a compiled guest and what the compiler proved about it; build_module makes one.

Compiling inspects the exact bytes the guest gave (the kernel contract), compiles a copy with an
export per memory (memexports.py) for wasmtime, and builds a GPU pipeline for every kernel the
device may run. Modules hold no device memory of their own; pipelines live in the device's cache.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
import wasmtime

from ..buffers import DispatchPlan
from ..compiler.contract import KernelClass, ModuleContract
from ..errors import ModuleError
from ..gpu import ComputePipeline
from .context import RuntimeContext
from .engine import first_line
from .memexports import add_memory_exports, count_defined_memories
from .source import Source, to_wasm


@dataclass(eq=False)
class Module:
    """A compiled guest module and what the compiler proved about it."""

    ctx: RuntimeContext
    id: int
    wasm: bytes
    compiled: wasmtime.Module
    contract: ModuleContract
    memory_count: int
    dispatch_plans: dict[int, DispatchPlan] = field(default_factory=dict)
    pipeline_failures: dict[int, str] = field(default_factory=dict)
    pipeline_seconds: dict[int, float] = field(default_factory=dict)
    legacy_pipeline: ComputePipeline | None = None
    legacy_reason: str = ""
    closed: bool = False
    # kernel ID -> its compiled CPU kernel, or why it has none (host/cpukernels.py; built on first use)
    cpu_kernels: dict[int, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Modules hold no device memory of their own; live instances keep working."""
        with self.ctx.lock:
            self.closed = True
            if self in self.ctx.modules:
                self.ctx.modules.remove(self)


def build_module(ctx: RuntimeContext, module_id: int, source: Source) -> Module:
    """Compile Wasm bytes, WAT text or a file; ModuleError (a ValueError) with wasmtime's message if bad."""
    wasm = to_wasm(source)
    from ..compiler import inspect_module

    cfg = ctx.config
    if cfg.kernels:
        contract = inspect_module(wasm, cfg.kernels, cfg.kernel_export)
    else:
        contract = ModuleContract(verified=False, reason="no buffer kernels configured")
    memory_count = len(contract.memories) if contract.verified else _count_memories(ctx.engine, wasm)
    try:
        globals_ = contract.mutable_i32_globals if cfg.cpu_kernels and contract.verified else ()
        compiled = wasmtime.Module(ctx.engine, add_memory_exports(wasm, memory_count, globals_))
    except ValueError:
        compiled = _compile_plain(ctx.engine, wasm)
    except wasmtime.WasmtimeError as exc:
        raise ModuleError(f"invalid module: {first_line(exc)}") from exc
    module = Module(ctx, module_id, wasm, compiled, contract, memory_count)
    build_pipelines(ctx, module)
    _build_legacy(ctx, module)
    return module


def _compile_plain(engine: wasmtime.Engine, wasm: bytes) -> wasmtime.Module:
    try:
        return wasmtime.Module(engine, wasm)
    except wasmtime.WasmtimeError as exc:
        raise ModuleError(f"invalid module: {first_line(exc)}") from exc


def _count_memories(engine: wasmtime.Engine, wasm: bytes) -> int:
    plain = _compile_plain(engine, wasm)
    imported = sum(isinstance(i.type, wasmtime.MemoryType) for i in plain.imports)
    try:
        return imported + count_defined_memories(wasm)
    except ValueError:
        return imported


def build_pipelines(ctx: RuntimeContext, module: Module) -> None:
    """A pipeline for every kernel the device may run; a failure is kept per kernel (its dispatches
    fall back with PIPELINE_FAILURE)."""
    contract = module.contract
    if not contract.verified or not ctx.residency.usable or ctx.config.disabled:
        return
    for kernel in ctx.config.kernels:
        plan = contract.kernels.get(kernel.id)
        if plan is None or plan.cls is not KernelClass.ELIGIBLE or plan.wgsl is None:
            continue
        if plan.is_float and not kernel.relaxed_float:
            continue
        if plan.needs_f64 and not ctx.residency.live.has_f64:
            continue  # (dispatch gives the reason: RuntimeContext.gpu_decision)
        t0 = time.perf_counter()
        try:
            read_only = [slot not in plan.write_slots for slot in plan.used_slots] + (
                [False] if plan.error_word else []) + ([True] if plan.memory >= 0 else [])
            pipeline = ctx.residency.live.pipeline(plan.wgsl, read_only, warm=True)  # (first run here)
        except Exception as exc:  # PipelineError or a device failure while building
            module.pipeline_failures[kernel.id] = first_line(exc)
            continue
        finally:
            module.pipeline_seconds[kernel.id] = time.perf_counter() - t0
        budget = ctx.residency.loop_budget(wgsl_loops(plan.wgsl), plan.loop_budget)
        module.dispatch_plans[kernel.id] = DispatchPlan(
            pipeline, plan.used_slots, plan.write_slots, plan.read_before_write, plan.error_word, budget,
            plan.memory, plan.memory_low, plan.overwritten_slots)


def wgsl_loops(wgsl: str) -> int:
    """The kernel's WGSL loop statements: its Wasm loops and the compiler's block wrappers (loops
    that never repeat). Where a driver counts loop passes, each wrapper may cost its group a pass
    every time it runs (lavapipe keeps some), so the loop budget counts them all (gpu/probe.py)."""
    return wgsl.count("loop {")


def _build_legacy(ctx: RuntimeContext, module: Module) -> None:
    cfg = ctx.config
    if not cfg.kernel_export:
        return
    from ..compiler import CompileError, compile_wgsl

    # The device's layouts put the 16-byte count uniform at binding 0; the legacy shader needs
    # none, so its one storage array goes to binding 1 and binding 0 stays unused.
    try:
        wgsl = compile_wgsl(module.wasm, cfg.kernel_export, storage_binding=1)
    except CompileError as exc:
        module.legacy_reason = exc.message
        return
    if not ctx.residency.usable or cfg.disabled or not cfg.relaxed_float:
        module.legacy_reason = ctx.device_reason or "no device"
        return
    try:
        module.legacy_pipeline = ctx.residency.live.pipeline(wgsl, [False])
    except Exception as exc:
        module.legacy_reason = first_line(exc)
