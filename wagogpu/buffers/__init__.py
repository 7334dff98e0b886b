"""The buffer layer: per-instance buffer tables and typed records, byte budgets and eviction,
where contents live (residency), the quarantine that reads back what the device can still give
before anything is marked lost (quarantine.py) and the GPU dispatch transaction. Knows buffers and
the device, not Wasm: the host hands it each accessor memory as two callables (AccessorMemory)."""
from .budget import BufferLimits, HeapAllocator, RuntimeBudget
from .dispatch import Dispatcher
from .eviction import DeviceResources, Held
from .memory import AccessorMemory, view_at
from .pending import PendingWork
from .records import Buffer, BufferRecord
from .residency import Residency
from .table import InstanceBuffers
from .steady import SteadyPlan
from .transaction import PUBLISHED, DispatchEnd, DispatchPlan, DispatchResult, Transaction
from .tuning import HostTuning, PipelineTuning, TransferTuning

__all__ = ["AccessorMemory", "Buffer", "BufferLimits", "BufferRecord", "DeviceResources", "DispatchEnd",
           "DispatchPlan", "DispatchResult", "Dispatcher", "Held", "HeapAllocator", "HostTuning", "InstanceBuffers",
           "PUBLISHED", "PendingWork", "PipelineTuning", "Residency", "RuntimeBudget", "SteadyPlan", "Transaction",
           "TransferTuning", "view_at"]
