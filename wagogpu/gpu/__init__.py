"""wagogpu's low-level GPU backend on wgpu (wgpu-native's C API, or wgpu-py's public API).

A small, fast, failure-honest device layer: adapter choice, buffers, pipelines cached by WGSL
text, one-submission dispatch transactions, pending batches that record consecutive dispatches
into one submission and confirm them with one wait, staged readbacks (copied out, or left mapped for the
caller), upload stages the caller fills ahead of a dispatch, GPU timestamps and fault injection
for tests.  It knows nothing of Wasm; the buffer layer keeps buffer states and byte budgets on
top of it.

Importing this package loads no wgpu: the records, errors, tuning and fault injector are plain
Python, and GpuDevice (which needs wgpu) is imported on first use.
"""
from typing import Any

from .adapters import AdapterChoice, AdapterInfo, BackendName, list_adapters
from .errors import (AdapterNotFound, DeviceAllocationError, DeviceFailure, FailureStage, GpuError, GpuUnavailable,
                     PipelineError)
from .faults import STAGES, FaultInjector
from .handles import (BufferHandle, BufferKind, ComputePipeline, DeviceStats, ExecutePlan, ExecuteResult, PieceSink,
                      UploadStage)
from .tuning import DeviceTuning

__all__ = [
    "GpuDevice", "AdapterInfo", "GpuUnavailable", "DeviceFailure", "DeviceAllocationError", "PipelineError",
    "ExecutePlan", "ExecuteResult", "FaultInjector", "list_adapters",
    "BufferHandle", "ComputePipeline", "DeviceStats", "GpuError", "STAGES", "UploadStage",
    "AdapterChoice", "AdapterNotFound", "BackendName", "BufferKind", "DeviceTuning", "FailureStage",
    "PieceSink",
]


def __getattr__(name: str) -> Any:
    if name == "GpuDevice":
        from .device import GpuDevice

        return GpuDevice
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
