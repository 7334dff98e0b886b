"""wagogpu's low-level GPU backend on wgpu-native (through wgpu-py's cffi handle).

A small, fast, failure-honest device layer: adapter choice, buffers,
pipelines cached by WGSL text, one-submission dispatch transactions, staged
readbacks (copied out, or left mapped for the caller), upload stages the caller
fills ahead of a dispatch, GPU timestamps and fault injection for tests.  It knows nothing of
Wasm; the buffer layer keeps buffer states and byte budgets on top of it.

Importing this package loads no wgpu: the records, errors and fault injector are plain Python,
and GpuDevice (which needs the native library) is imported on first use.
"""
from typing import Any

from .adapters import AdapterInfo, list_adapters
from .errors import DeviceAllocationError, DeviceFailure, GpuError, GpuUnavailable, PipelineError
from .faults import STAGES, FaultInjector
from .handles import BufferHandle, ComputePipeline, DeviceStats, ExecutePlan, ExecuteResult, UploadStage

__all__ = [
    "GpuDevice", "AdapterInfo", "GpuUnavailable", "DeviceFailure", "DeviceAllocationError", "PipelineError",
    "ExecutePlan", "ExecuteResult", "FaultInjector", "list_adapters",
    "BufferHandle", "ComputePipeline", "DeviceStats", "GpuError", "STAGES", "UploadStage",
]


def __getattr__(name: str) -> Any:
    if name == "GpuDevice":
        from .device import GpuDevice

        return GpuDevice
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
