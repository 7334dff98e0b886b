"""The legacy scalar ABI: wago_gpu.run / run_batch over f32 arrays in memory 0 (abi.md §2.16)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import wasmtime

from .abi.table import LEGACY_MAX_PASSES, LegacyStatus
from .buffers import memory_view
from .memexports import memory_export_name

if TYPE_CHECKING:  # pragma: no cover
    from .host import Host, Instance, Module

U32 = 0xFFFFFFFF


class LegacyRunner:
    """run/run_batch bound to one instance. Statuses are the legacy table's, not wago_gpu_v1's."""

    def __init__(self, host: "Host", module: "Module", instance: "Instance"):
        self.host = host
        self.module = module
        self.instance = instance

    def run(self, caller: Any, input_offset: int, output_offset: int, count: int) -> int:
        return self._run(caller, input_offset, output_offset, count, 1)

    def run_batch(self, caller: Any, input_offset: int, output_offset: int, count: int, passes: int) -> int:
        return self._run(caller, input_offset, output_offset, count, passes)

    def _run(self, caller: Any, in_off: int, out_off: int, count: int, passes: int) -> int:
        passes &= U32
        if passes == 0 or passes > LEGACY_MAX_PASSES:
            return LegacyStatus.INVALID_BATCH
        in_off &= U32
        out_off &= U32
        count &= U32
        host = self.host
        started = time.perf_counter()
        status = self._checked(caller, in_off, out_off, count, passes, started)
        if status == LegacyStatus.SUCCESS:
            host.legacy_successes += 1
        elif status == LegacyStatus.FALLBACK:
            host.legacy_fallbacks += 1
        return int(status)

    def _checked(self, caller: Any, in_off: int, out_off: int, count: int, passes: int, started: float) -> int:
        host = self.host
        cfg = host.config
        memory = caller.get(memory_export_name(0)) if self.module.memory_count else None
        if not isinstance(memory, wasmtime.Memory) or memory.type(caller).is_64:  # shared memories too
            return LegacyStatus.INVALID_RANGE
        nbytes = count * 4
        size = memory.data_len(caller)
        if in_off + nbytes > size or out_off + nbytes > size:
            return LegacyStatus.INVALID_RANGE
        if in_off != out_off and in_off < out_off + nbytes and out_off < in_off + nbytes:
            return LegacyStatus.FALLBACK
        if count > cfg.max_elements or count < cfg.min_elements:
            return LegacyStatus.FALLBACK
        res = host._residency
        if host._stopped or res.quarantined or self.module.legacy_pipeline is None or not res.usable:
            return LegacyStatus.FALLBACK
        if count == 0:
            return LegacyStatus.SUCCESS

        if time.perf_counter() >= started + cfg.run_timeout:
            return LegacyStatus.FALLBACK
        budget = host._budget
        footprint = 2 * nbytes + 16  # storage, readback staging, uniform
        if budget.total + footprint > budget.max_bytes:
            return LegacyStatus.FALLBACK
        view = memory_view(memory, caller)
        data = view[in_off:in_off + nbytes].view(np.uint32).copy()
        budget.legacy_bytes += footprint
        budget.peak_bytes = max(budget.peak_bytes, budget.total)
        try:
            result = self._run_device(data, passes, started + cfg.run_timeout)
        except Exception as exc:  # any backend failure latches the runtime-wide quarantine
            res.quarantine(f"legacy run failed: {exc}")
            return LegacyStatus.FALLBACK
        finally:
            budget.legacy_bytes -= footprint
        t0 = time.perf_counter()
        memory_view(memory, caller)[out_off:out_off + nbytes] = result.view(np.uint8)
        stats = host.legacy_stats
        stats.commit = time.perf_counter() - t0
        stats.total = time.perf_counter() - started
        stats.passes = passes
        stats.upload_bytes = stats.download_bytes = nbytes
        return LegacyStatus.SUCCESS

    def _run_device(self, data: np.ndarray, passes: int, deadline: float) -> np.ndarray:
        """All passes in place on one device buffer: one upload, passes dispatches, one readback."""
        from .gpu import ExecutePlan

        dev = self.host._residency.device
        nbytes = data.nbytes
        owned = []
        try:
            storage = dev.create_storage(nbytes)
            owned.append(storage)
            uniform = dev.create_uniform(16)
            owned.append(uniform)
            staging = dev.create_staging(nbytes)
            owned.append(staging)
            groups = (-(-data.size // 256), 1)
            params = np.array([data.size, 0, 0, 0], dtype="<u4").tobytes()
            stats = self.host.legacy_stats
            stats.upload = stats.compute = 0.0
            for i in range(passes):
                plan = ExecutePlan(pipeline=self.module.legacy_pipeline, uniform=uniform,
                                   params=params if i == 0 else None, storage=[storage],
                                   uploads=[(storage, 0, data)] if i == 0 else [], seeds=[],
                                   workgroups=groups, separate_stages=self.host.config.profile_stages)
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
