"""Exceptions of the GPU backend, and the one closed set of stages they and the fault injector name.

The host maps them onto ABI statuses: ``GpuUnavailable`` means "no GPU path"
(CPU only), ``AdapterNotFound`` an adapter choice that matches nothing (a configuration
error), ``DeviceAllocationError`` a failed allocation that does not
quarantine (status 7 for that step), ``PipelineError`` makes a kernel fall
back, and ``DeviceFailure`` is anything that leaves GPU state uncertain: the
host quarantines the device after it (docs/design/abi.md §4.7).
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["FailureStage", "GpuError", "GpuUnavailable", "AdapterNotFound", "DeviceFailure",
           "DeviceAllocationError", "PipelineError"]


class FailureStage(enum.StrEnum):
    """Where a device operation failed, or which step the fault injector makes fail.

    ``DeviceFailure.stage`` is one of SUBMIT .. CLOSED; ALLOC and PIPELINE are fault
    stages only (they raise DeviceAllocationError and PipelineError), BLOCK is the
    injector's "stay inside execute until released" step.
    """

    ALLOC = "alloc"  # buffer or upload-stage creation
    PIPELINE = "pipeline"  # pipeline build
    SUBMIT = "submit"  # recording or submission (nothing ran when submitted is False)
    BLOCK = "block"  # execute, after submission: blocks until the test releases it
    WAIT = "wait"  # while waiting for completion
    TIMEOUT = "timeout"  # the deadline passed while waiting
    LOST = "lost"  # the device reports loss
    AFTER_COMPLETION = "after_completion"  # the work ran, then the device reported an error
    MAP = "map"  # mapping a readback buffer
    UNMAP = "unmap"  # unmapping it after the copy
    CLOSED = "closed"  # the device was closed under the caller (never injected)


class GpuError(Exception):
    """Base class of every exception raised by ``wagogpu.gpu``."""


class GpuUnavailable(GpuError):
    """No usable adapter or device; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AdapterNotFound(GpuUnavailable):
    """The adapter asked for (an index or a name, perhaps on one backend) matches nothing;
    the reason lists the adapters that exist, as `wagogpu info` numbers them."""


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

    ``stage`` (a FailureStage, equal to its string value) names where.
    ``submitted`` is True when work may have reached the queue, so its effect
    on device memory is unknown.  ``data`` carries a readback that was fully
    copied out before an unmap failure (docs/design/abi.md §4.4 step 6), else None.
    """

    def __init__(
        self,
        stage: FailureStage | str,
        message: str,
        submitted: bool = False,
        timed_out: bool = False,
        data: Any = None,
    ) -> None:
        self.stage = FailureStage(stage)
        super().__init__(f"{self.stage}: {message}")
        self.message = message
        self.submitted = submitted
        self.timed_out = timed_out
        self.data = data
