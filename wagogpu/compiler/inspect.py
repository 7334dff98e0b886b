"""inspect_module: what the host calls at host.compile (docs/design/abi.md §6.2-6.3).

It decodes the exact bytes once, then lowers every configured kernel against that one decoding
and classifies each as INVALID, REJECTED or ELIGIBLE. It never raises: a decoder rejection makes
the contract unverified, and an unexpected internal failure is reported as a rejection (the CPU
path is always correct), never as an exception into the host.
"""
from __future__ import annotations

import time
from typing import Iterable

from ..abi.kernel import KernelConfig
from . import reader as lim
from .buffer import lower_kernel, validate_kernel
from .contract import CompileError, CompileErrorKind, KernelClass, KernelPlan, ModuleContract
from .decoder import DecodedModule, decode_module
from .intrinsics import I32
from .legacy import compile_wgsl

COMPILATION_LIMIT = "per-compilation WGSL limit"


def _slots(mask: int) -> frozenset[int]:
    return frozenset(s for s in range(mask.bit_length()) if mask >> s & 1)


def _failed_plan(kernel_id: int, err: CompileError, seconds: float) -> KernelPlan:
    cls = KernelClass.INVALID if err.kind == CompileErrorKind.INVALID_CONTRACT else KernelClass.REJECTED
    return KernelPlan(kernel_id, cls, reason=err.message, error_kind=err.kind, translate_seconds=seconds)


def _plan(module: DecodedModule, kernel: KernelConfig, budget_left: int) -> KernelPlan:
    start = time.perf_counter()
    try:
        validate_kernel(kernel)
        lowered = lower_kernel(module, kernel)
        if len(lowered.wgsl) > budget_left:
            raise CompileError(CompileErrorKind.LIMIT, COMPILATION_LIMIT)
    except CompileError as e:
        return _failed_plan(kernel.id, e, time.perf_counter() - start)
    except Exception as e:  # a compiler bug must not take the host down; the CPU path stays correct
        err = CompileError(CompileErrorKind.UNSUPPORTED, f"internal compiler error: {type(e).__name__}")
        return _failed_plan(kernel.id, err, time.perf_counter() - start)
    return KernelPlan(kernel.id, KernelClass.ELIGIBLE, wgsl=lowered.wgsl,
                      read_slots=_slots(lowered.reads), write_slots=_slots(lowered.writes),
                      read_before_write=_slots(lowered.read_before_write), is_float=lowered.is_float,
                      error_word=lowered.error_word, loop_budget=lowered.loop_budget, memory=lowered.memory,
                      memory_low=lowered.memory_low, needs_f64=lowered.f64,
                      translate_seconds=time.perf_counter() - start)


def _legacy(source: bytes, kernel_export: str) -> tuple[str | None, str]:
    if not kernel_export:
        return None, ""
    try:
        return compile_wgsl(source, kernel_export), ""
    except CompileError as e:
        return None, e.message
    except Exception as e:
        return None, f"internal compiler error: {type(e).__name__}"


def inspect_module(source: bytes, kernels: Iterable[KernelConfig], kernel_export: str = "") -> ModuleContract:
    """Decode `source` once and classify every kernel; never raises."""
    try:
        data = source if isinstance(source, bytes) else memoryview(source).tobytes()
    except Exception as e:
        return ModuleContract(verified=False, reason=f"module bytes unreadable: {type(e).__name__}")
    legacy_wgsl, legacy_reason = _legacy(data, kernel_export)
    try:
        module = decode_module(data)
    except CompileError as e:
        return ModuleContract(verified=False, reason=e.message, legacy_wgsl=legacy_wgsl, legacy_reason=legacy_reason)
    except Exception as e:
        return ModuleContract(verified=False, reason=f"internal decoder error: {type(e).__name__}",
                              legacy_wgsl=legacy_wgsl, legacy_reason=legacy_reason)
    plans: dict[int, KernelPlan] = {}
    budget = lim.MAX_COMPILATION_WGSL
    try:
        kernel_list = list(kernels or ())
    except Exception:
        kernel_list = []
    for kernel in kernel_list:
        try:
            plan = _plan(module, kernel, budget)
        except Exception as e:  # e.g. not a KernelConfig at all
            plan = KernelPlan(getattr(kernel, "id", 0), KernelClass.INVALID, reason=f"invalid kernel config: {e}",
                              error_kind=CompileErrorKind.INVALID_CONTRACT)
        if plan.wgsl is not None:
            budget -= len(plan.wgsl)
        plans[plan.kernel_id] = plan
    globals_ = tuple(i for i, g in enumerate(module.statics.globals) if g.mutable and g.type == I32)
    return ModuleContract(verified=True, memories=tuple(module.memories), kernels=plans,
                          legacy_wgsl=legacy_wgsl, legacy_reason=legacy_reason, mutable_i32_globals=globals_)
