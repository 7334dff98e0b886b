"""Exceptions of the GPU backend.

The host maps them onto ABI statuses: ``GpuUnavailable`` means "no GPU path"
(CPU only), ``DeviceAllocationError`` is a failed allocation that does not
quarantine (status 7 for that step), ``PipelineError`` makes a kernel fall
back, and ``DeviceFailure`` is anything that leaves GPU state uncertain: the
host quarantines the device after it (abi.md §4.7).
"""

from __future__ import annotations

from typing import Any

__all__ = ["GpuError", "GpuUnavailable", "DeviceFailure", "DeviceAllocationError", "PipelineError"]


class GpuError(Exception):
    """Base class of every exception raised by ``wagogpu.gpu``."""


class GpuUnavailable(GpuError):
    """No usable adapter or device; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeviceAllocationError(GpuError):
    """A buffer could not be created (zero size, beyond the device limits, out of memory, closed device)."""

    def __init__(self, message: str, nbytes: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.nbytes = nbytes


class PipelineError(GpuError):
    """WGSL or pipeline creation was rejected by the device; ``message`` is wgpu's report."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DeviceFailure(GpuError):
    """A device operation failed or its completion is unknown.

    ``stage`` names where: "submit" (recording or submission), "wait" (while
    waiting for completion), "timeout" (deadline passed while waiting),
    "after_completion" (the device ran the work but reported an error),
    "lost" (the device reports loss), "map" / "unmap" (readback staging),
    "closed" (the device was closed under the caller).
    ``submitted`` is True when work may have reached the queue, so its effect
    on device memory is unknown.  ``data`` carries a readback that was fully
    copied out before an unmap failure (abi.md §4.4 step 6), else None.
    """

    def __init__(
        self,
        stage: str,
        message: str,
        submitted: bool = False,
        timed_out: bool = False,
        data: Any = None,
    ) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message
        self.submitted = submitted
        self.timed_out = timed_out
        self.data = data
