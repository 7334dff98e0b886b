"""wagogpu's low-level GPU backend on wgpu-native (through wgpu-py's cffi handle).

A small, fast, failure-honest device layer: adapter choice, buffers,
pipelines cached by WGSL text, one-submission dispatch transactions, staged
readbacks (copied out, or left mapped for the caller), upload stages the caller
fills ahead of a dispatch, GPU timestamps and fault injection for tests.  It knows nothing of
Wasm; the host (buffers.py) keeps buffer states and byte budgets on top of it.
"""

from .adapters import AdapterInfo, list_adapters
from .device import BufferHandle, ComputePipeline, DeviceStats, ExecutePlan, ExecuteResult, GpuDevice, UploadStage
from .errors import DeviceAllocationError, DeviceFailure, GpuError, GpuUnavailable, PipelineError
from .faults import STAGES, FaultInjector

__all__ = [
    "GpuDevice", "AdapterInfo", "GpuUnavailable", "DeviceFailure", "DeviceAllocationError", "PipelineError",
    "ExecutePlan", "ExecuteResult", "FaultInjector", "list_adapters",
    "BufferHandle", "ComputePipeline", "DeviceStats", "GpuError", "STAGES", "UploadStage",
]
