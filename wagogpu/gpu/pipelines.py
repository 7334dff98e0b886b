"""Compute pipelines, cached by their WGSL text, and the bind groups that bind buffers to them.

A pipeline is built once per device and layout (the uniform parameter block at binding 0, the
storage buffers at 1..N, read-only or not); the host asks for it again on every dispatch of the
kernel and gets the cached one.  Bind groups are cached by (pipeline, uniform, storage handles)
up to ``tuning.bind_group_cache`` entries; releasing a member buffer or the pipeline drops the
groups that use it.  Called under the device lock.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from .backend import BackendError
from .core import DeviceCore
from .errors import DeviceFailure, FailureStage, PipelineError
from .handles import BufferHandle, BufferKind, ComputePipeline
from .natives import Native

__all__ = ["Pipelines"]

_id = operator.attrgetter("id")


class Pipelines:
    """The pipeline cache and the bind-group cache of one device."""

    def __init__(self, core: DeviceCore) -> None:
        self._core = core
        self._pipelines: dict[tuple[Any, ...], ComputePipeline] = {}
        self._groups: dict[tuple[int, ...], Native] = {}
        self.hits = self.misses = 0
        self.group_hits = self.group_misses = 0

    # -------------------------------------------------------------- pipelines

    def get(self, wgsl: str, bindings: Sequence[bool], entry_point: str) -> ComputePipeline:
        """The pipeline for ``wgsl``; PipelineError with wgpu's message when it is rejected."""
        core = self._core
        binds = tuple(bool(b) for b in bindings)
        key = (wgsl, binds, entry_point)
        if core.closed:
            raise PipelineError("the device is closed")
        found = self._pipelines.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        if core.hit(FailureStage.PIPELINE):
            raise PipelineError("injected pipeline creation failure")
        most = core.backend.limits["max-storage-buffers-per-shader-stage"]
        if len(binds) > most:
            raise PipelineError(f"{len(binds)} storage bindings exceed the device limit of {most}")
        natives = core.backend.create_pipeline(wgsl, binds, entry_point)
        pipeline = self._pipelines[key] = ComputePipeline(core.new_id(), key, binds, natives)
        return pipeline

    def release(self, pipeline: ComputePipeline) -> None:
        """Free a pipeline and its bind groups; idempotent."""
        if pipeline._ptr is None:
            return
        pipeline._ptr = None
        if self._pipelines.get(pipeline.key) is pipeline:
            del self._pipelines[pipeline.key]
        self._drop_groups(lambda key: key[0] == pipeline.id)
        for native in pipeline._natives:
            self._core.natives.release(native)

    @property
    def live(self) -> int:
        return len(self._pipelines)

    # -------------------------------------------------------------- bind groups

    def bind_group(self, pipe: ComputePipeline, uniform: BufferHandle, storage: Sequence[BufferHandle]) -> Any:
        """The cached bind group of these handles, or a new one (DeviceFailure "submit" when the
        plan does not fit the pipeline or wgpu rejects it)."""
        return self.group(pipe, uniform, storage).obj

    def group(self, pipe: ComputePipeline, uniform: BufferHandle, storage: Sequence[BufferHandle]) -> Native:
        """bind_group's Native: the device keeps it on the plan (ExecutePlan.group) and uses it
        again while it lives (released, as every cached group is when its pipeline or a buffer it
        binds is released or the cache evicts it, its obj is None)."""
        ids = [pipe.id, uniform.id]
        for s in storage:  # (a loop: map() over a list this short costs more, ~200 ns a call)
            ids.append(s.id)
        key = tuple(ids)
        group = self._groups.get(key)
        if group is not None:
            self.group_hits += 1
            return group
        self.group_misses += 1
        self._check(pipe, uniform, storage)
        try:
            group = self._core.backend.create_bind_group(pipe._bgl, uniform._ptr, [s._ptr for s in storage])
        except BackendError as exc:
            raise DeviceFailure(FailureStage.SUBMIT, f"bind group: {exc}") from None
        if len(self._groups) >= self._core.tuning.bind_group_cache:
            self._core.natives.release(self._groups.pop(next(iter(self._groups))))
        self._groups[key] = group
        return group

    @staticmethod
    def _check(pipe: ComputePipeline, uniform: BufferHandle, storage: Sequence[BufferHandle]) -> None:
        if pipe._ptr is None:
            raise DeviceFailure(FailureStage.SUBMIT, "the pipeline was released")
        if len(storage) != len(pipe.bindings):
            raise DeviceFailure(FailureStage.SUBMIT, f"the pipeline has {len(pipe.bindings)} storage bindings, "
                                                     f"the plan binds {len(storage)} buffers")
        if uniform._ptr is None or uniform.kind is not BufferKind.UNIFORM:
            raise DeviceFailure(FailureStage.SUBMIT, f"binding 0 needs a live uniform buffer, got {uniform!r}")
        for i, s in enumerate(storage, 1):
            if s._ptr is None or s.kind is not BufferKind.STORAGE:
                raise DeviceFailure(FailureStage.SUBMIT, f"storage binding {i} needs a live storage buffer, got {s!r}")

    def forget_buffer(self, buffer_id: int) -> None:
        """A buffer is being released: drop every group that binds it."""
        self._drop_groups(lambda key: buffer_id in key[1:])

    def _drop_groups(self, match: Callable[[tuple[int, ...]], bool]) -> None:
        for key in [k for k in self._groups if match(k)]:
            self._core.natives.release(self._groups.pop(key))

    @property
    def groups_live(self) -> int:
        return len(self._groups)

    def close(self) -> None:
        """The device is closing (its NativeSet frees the objects): mark every pipeline released."""
        for pipeline in self._pipelines.values():
            pipeline._ptr = None
        self._pipelines.clear()
        self._groups.clear()
