"""A new pipeline's first run, at build time rather than at the caller's first dispatch.

Drivers finish a pipeline lazily: on the H200 the first dispatch of a kernel took ~105 ms, later
ones microseconds. Building a pipeline with ``warm=True`` runs it once right away over dummy
buffers with a parameter block of count 0 (every invocation returns at the kernel's guard, so
nothing is written that matters), waits for it and frees the bind group; its queue write of the
parameter block pays the queue's own first-write set-up as well. The dummies (one zeroed
16-byte uniform, 16-byte storage buffers, one per binding) are kept for the device's life.
"""

from __future__ import annotations

import time

from .backend import CELL_OK, BackendError, Usage
from .core import DeviceCore
from .errors import DeviceFailure, PipelineError
from .handles import ComputePipeline
from .natives import Native

__all__ = ["WarmUp"]

_DUMMY_BYTES = 16  # the error word's size, and enough for any array binding
_ZEROS = bytes(_DUMMY_BYTES)  # count 0: every invocation returns at the guard


class WarmUp:
    """The warm-up runs of one device (called under its lock)."""

    def __init__(self, core: DeviceCore) -> None:
        self._core = core
        self._uniform: Native | None = None
        self._storage: list[Native] = []

    def run(self, pipeline: ComputePipeline, timeout: float) -> None:
        """Dispatch ``pipeline`` once with count 0 and wait; PipelineError when that fails."""
        core = self._core
        backend = core.backend
        deadline = time.perf_counter() + timeout
        try:
            if self._uniform is None:
                self._uniform = backend.create_buffer(_DUMMY_BYTES, Usage.UNIFORM)
            while len(self._storage) < len(pipeline.bindings):
                self._storage.append(backend.create_buffer(_DUMMY_BYTES, Usage.STORAGE))
            group = backend.create_bind_group(pipeline._bgl, self._uniform.obj,
                                              [d.obj for d in self._storage[:len(pipeline.bindings)]])
        except BackendError as exc:
            raise PipelineError(f"warm-up buffers: {exc}") from None
        try:
            core.submit_pending()
            del core.flags.errors[:]
            # The queue's first write sets up its staging memory (~4 ms on lavapipe): here too.
            backend.write_buffer(self._uniform.obj, 0, _ZEROS, _DUMMY_BYTES)
            enc = backend.encoder()
            backend.dispatch(enc, pipeline._ptr, group.obj, 1, 1, False)
            backend.submit(enc)
            cell = backend.fence()
            err = core.take_error()
            if err is not None:
                raise PipelineError(f"warm-up run: {err}")
            core.wait(deadline, (cell,), "the pipeline's warm-up run")
            if cell.status != CELL_OK:
                raise PipelineError(f"warm-up run: {cell.message}")
        except DeviceFailure as exc:
            raise PipelineError(f"warm-up run: {exc}") from None
        finally:
            core.natives.release(group)
