"""The upload ring a pending batch copies its parameter blocks and small uploads from.

A queue write lands before the next submission as a whole, so a batch recorded over several
dispatches cannot write a dispatch's parameter block or inputs with one: a later write would
overwrite what an earlier recorded dispatch still has to read. Each array is instead written into
the ring at an offset no other command of the open batch uses and copied from there in recorded
order. Offsets start again with each batch: a queue write made after a submission lands after it
on the queue, so the submitted batch has read its part of the ring by then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .backend import BackendError, Usage
from .core import DeviceCore
from .errors import DeviceFailure, FailureStage
from .handles import BufferHandle, ExecutePlan, UploadStage
from .natives import Native

__all__ = ["UploadRing", "ring_bytes"]

#: Ring offsets are multiples of this (copies need 4; 16 keeps each parameter block on its own line).
_ALIGN = 16
PARAMS_BYTES = 16


def ring_bytes(n: int) -> int:
    return (n + _ALIGN - 1) & ~(_ALIGN - 1)


class UploadRing:
    """One device's ring (allocated at first use, ``tuning.batch_ring_bytes`` long); the open
    batch keeps how much of it it used."""

    def __init__(self, core: DeviceCore) -> None:
        self._core = core
        self._ring: Native | None = None

    @property
    def size(self) -> int:
        return self._core.tuning.batch_ring_bytes

    def need(self, plan: ExecutePlan) -> int:
        """Ring bytes the plan takes: its parameter block, and its arrays when they fit beside it
        (else they go through the pool's upload buffers); stages are copied from where they are."""
        params = ring_bytes(PARAMS_BYTES) if plan.params is not None else 0
        return params + self.arrays_bytes(plan, params)

    def arrays_bytes(self, plan: ExecutePlan, params: int) -> int:
        arrays = sum(ring_bytes(a.nbytes) for _h, _o, a in plan.uploads if not isinstance(a, UploadStage))
        return arrays if arrays + params <= self.size else 0

    def record(self, enc: Any, items: Sequence[tuple[BufferHandle, int, np.ndarray]], at: int) -> int:
        """Write each array into the ring from offset ``at`` and record its copy into ``enc``;
        returns the offset after the last one."""
        backend = self._core.backend
        ring = self._buffer()
        for handle, offset, arr in items:
            backend.write_buffer(ring, at, arr, arr.nbytes)
            backend.copy(enc, ring, at, handle._ptr, offset, arr.nbytes)
            at += ring_bytes(arr.nbytes)
        return at

    def _buffer(self) -> Any:
        if self._ring is None:
            try:
                self._ring = self._core.backend.create_buffer(self.size, Usage.RING)
            except BackendError as exc:
                raise DeviceFailure(FailureStage.SUBMIT, f"upload ring: {exc}") from None
        return self._ring.obj
