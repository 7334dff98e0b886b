"""The legacy scalar ABI: wago_gpu.run / run_batch over f32 arrays in memory 0 (docs/design/abi.md §2.16)."""
from __future__ import annotations

import time

import numpy as np

from ..abi.table import LEGACY_MAX_PASSES, LegacyStatus
from ..buffers import view_at
from ..gpu import ExecutePlan
from ._wasmtime import GuestCaller
from .calls import U32, Handlers, ImportScope
from .memexports import memory_export_name

PARAMETER_BYTES = 16
WORKGROUP = 256


class LegacyRunner:
    """run/run_batch bound to one instance. Statuses are the legacy table's, not wago_gpu_v1's."""

    def __init__(self, scope: ImportScope):
        self.scope = scope
        self.ctx = scope.ctx
        self.module = scope.module

    def handlers(self) -> Handlers:
        return {"run": (self.run, True), "run_batch": (self.run_batch, True)}

    def run(self, caller: GuestCaller, input_offset: int, output_offset: int, count: int) -> int:
        return self._run(caller, input_offset, output_offset, count, 1)

    def run_batch(self, caller: GuestCaller, input_offset: int, output_offset: int, count: int, passes: int) -> int:
        return self._run(caller, input_offset, output_offset, count, passes)

    def _run(self, caller: GuestCaller, in_off: int, out_off: int, count: int, passes: int) -> int:
        passes &= U32
        if passes == 0 or passes > LEGACY_MAX_PASSES:
            return LegacyStatus.INVALID_BATCH
        started = time.perf_counter()
        status = self._checked(caller, in_off & U32, out_off & U32, count & U32, passes, started)
        log = self.ctx.log
        if status == LegacyStatus.SUCCESS:
            log.legacy_successes += 1
        elif status == LegacyStatus.FALLBACK:
            log.legacy_fallbacks += 1
        return int(status)

    def _checked(self, caller: GuestCaller, in_off: int, out_off: int, count: int, passes: int,
                 started: float) -> LegacyStatus:
        ctx = self.ctx
        cfg = ctx.config
        memory = self.scope.memory(caller, memory_export_name(0)) if self.module.memory_count else None
        if memory is None or memory.is64:  # shared memories too
            return LegacyStatus.INVALID_RANGE
        nbytes = count * 4
        _address, size = caller.memory_span(memory.handle)
        if in_off + nbytes > size or out_off + nbytes > size:
            return LegacyStatus.INVALID_RANGE
        if in_off != out_off and in_off < out_off + nbytes and out_off < in_off + nbytes:
            return LegacyStatus.FALLBACK
        if count > cfg.max_elements or count < cfg.min_elements:
            return LegacyStatus.FALLBACK
        res = ctx.residency
        if res.pending and not (ctx.stopped or res.quarantined):  # a failure here must not hide theirs
            res.pending.settle(started + cfg.run_timeout)
        if ctx.stopped or res.quarantined or self.module.legacy_pipeline is None or not res.usable:
            return LegacyStatus.FALLBACK
        if count == 0:
            return LegacyStatus.SUCCESS
        deadline = started + cfg.run_timeout
        if time.perf_counter() >= deadline:
            return LegacyStatus.FALLBACK
        budget = ctx.budget
        footprint = 2 * nbytes + PARAMETER_BYTES  # storage, readback staging, uniform
        if budget.total + footprint > budget.max_bytes:
            return LegacyStatus.FALLBACK
        data = view_at(*caller.memory_span(memory.handle))[in_off:in_off + nbytes].view(np.uint32).copy()
        budget.legacy_bytes += footprint
        budget.note_peak()
        try:
            result = self._run_device(data, passes, deadline)
        except Exception as exc:  # any backend failure latches the runtime-wide quarantine
            res.quarantine(f"legacy run failed: {exc}")
            return LegacyStatus.FALLBACK
        finally:
            budget.legacy_bytes -= footprint
        t0 = time.perf_counter()
        view_at(*caller.memory_span(memory.handle))[out_off:out_off + nbytes] = result.view(np.uint8)
        stats = ctx.log.legacy
        stats.commit = time.perf_counter() - t0
        stats.total = time.perf_counter() - started
        stats.passes = passes
        stats.upload_bytes = stats.download_bytes = nbytes
        return LegacyStatus.SUCCESS

    def _run_device(self, data: np.ndarray, passes: int, deadline: float) -> np.ndarray:
        """All passes in place on one device buffer: one upload, passes dispatches, one readback."""
        dev = self.ctx.residency.live
        pipeline = self.module.legacy_pipeline
        assert pipeline is not None  # checked by _checked
        nbytes = data.nbytes
        owned = []
        try:
            storage = dev.create_storage(nbytes)
            owned.append(storage)
            uniform = dev.create_uniform(PARAMETER_BYTES)
            owned.append(uniform)
            staging = dev.create_staging(nbytes)
            owned.append(staging)
            groups = (-(-data.size // WORKGROUP), 1)
            params = np.array([data.size, 0, 0, 0], dtype="<u4").tobytes()
            stats = self.ctx.log.legacy
            stats.upload = stats.compute = 0.0
            for i in range(passes):
                plan = ExecutePlan(pipeline=pipeline, uniform=uniform,
                                   params=params if i == 0 else None, storage=[storage],
                                   uploads=[(storage, 0, data)] if i == 0 else [], seeds=[],
                                   workgroups=groups, separate_stages=self.ctx.config.profile_stages)
                result = dev.execute(plan, max(0.0, deadline - time.perf_counter()))
                stats.upload += result.upload_s
                stats.compute += result.compute_s
            t0 = time.perf_counter()
            out = dev.read(storage, staging, nbytes, max(0.0, deadline - time.perf_counter()))
            stats.download = time.perf_counter() - t0
            return out
        finally:
            for handle in owned:
                dev.release(handle)
