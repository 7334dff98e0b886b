"""Host-side buffer access: Instance.read_buffer and Instance.write_buffer.

The embedding program reaches a plugin buffer the way the guest's bulk imports do, under the host
lock and by the same rules (docs/design/abi.md §2.7-2.10, §4.4-4.7): a read makes the CPU copy current (reading
back from the device when only it holds the current contents), a write is a committed CPU write
(version +1, the device copy stale, the dirty range widened) exactly as setBuffer32 makes one, and a
buffer whose contents were lost to a device failure answers CONTENTS_LOST until a full write
replaces them. A refused access raises ValueError naming the ABI status; nothing is changed then.
These accesses are the host's, not the guest's: they leave the guest's `.last` record alone.
"""
from __future__ import annotations

import time

import numpy as np

from ..abi.f16 import f32_bits_to_half
from ..abi.table import TYPE_INFO, ElementType, Status
from ..buffers import Buffer, InstanceBuffers
from ..diagnostics import TransferCounters
from ..memcopy import copy_bytes
from .calls import ImportScope

#: numpy's dtype for each element type's stored form (F16 as binary16 bits, which numpy reads as float16).
DTYPES: dict[ElementType, np.dtype] = {t: np.dtype(info.numpy).newbyteorder("<") for t, info in TYPE_INFO.items()}


_TYPE_NAMES = {dtype: t.name for t, dtype in DTYPES.items()}


class BufferAccessError(ValueError):
    """A host-side buffer access refused with an ABI status (``.status``)."""

    def __init__(self, operation: str, status: Status, reason: str) -> None:
        super().__init__(f"{operation}: {status.name} ({int(status)}): {reason}")
        self.status = status


class BufferAccess:
    """read_buffer / write_buffer for one instance's buffers."""

    def __init__(self, scope: ImportScope) -> None:
        self.scope = scope
        self.ctx = scope.ctx
        self.buffers: InstanceBuffers = scope.buffers

    def read(self, handle: int) -> np.ndarray:
        """A copy of the buffer's current contents, dtype of its element type."""
        with self.ctx.lock:
            buf = self._buffer("read_buffer", handle)
            self._current("read_buffer", buf)
            return self.buffers.cpu_bytes(buf).view(DTYPES[buf.type]).copy()

    def write(self, handle: int, values: object, offset: int = 0) -> None:
        """Commit values into elements [offset, offset + len(values)) as one CPU write."""
        with self.ctx.lock:
            buf = self._buffer("write_buffer", handle)
            data = as_elements(buf, values)
            if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
                raise TypeError(f"write_buffer: offset must be an integer, got {offset!r}")
            offset = int(offset)
            if offset < 0 or offset + data.size > buf.length:
                raise BufferAccessError("write_buffer", Status.INVALID_RANGE,
                                        f"elements [{offset}, {offset + data.size}) lie outside buffer {buf.handle} "
                                        f"({buf.type.name}, {buf.length} elements)")
            if data.size:
                self._commit(buf, data, offset)

    def _buffer(self, operation: str, handle: int) -> Buffer:
        if isinstance(handle, bool) or not isinstance(handle, (int, np.integer)):
            raise TypeError(f"{operation}: handle must be an integer, got {handle!r}")
        if self.ctx.stopped or self.buffers.closed:
            raise BufferAccessError(operation, Status.INVALID_STATE, "the instance or its host is closed")
        self.ctx.residency.check_loss()
        buf = self.buffers.buffer(int(handle)) if 0 < handle <= 0xFFFFFFFF else None
        if buf is None:
            raise BufferAccessError(operation, Status.INVALID_HANDLE,
                                    f"handle {handle} is not a live buffer of instance {self.buffers.instance_id}")
        return buf

    def _current(self, operation: str, buf: Buffer) -> None:
        """Make the CPU copy current (a readback when only the device holds it), or raise."""
        counters = TransferCounters()
        deadline = time.perf_counter() + self.ctx.config.run_timeout
        status = self.ctx.residency.make_cpu_current(self.buffers, buf, deadline, counters)
        self.ctx.log.totals.add(counters)
        if status:
            raise BufferAccessError(operation, Status(status), _refusal(Status(status), buf))

    def _commit(self, buf: Buffer, data: np.ndarray, offset: int) -> None:
        """setBuffer32's commit: a full write replaces the contents (lost ones too); a partial one
        needs the current contents first."""
        res = self.ctx.residency
        inst = self.buffers
        if offset == 0 and data.size == buf.length:
            stage = res.set_copy(inst, buf, inst.cpu_address(buf), data.ctypes.data, data.nbytes)
            buf.record.note_cpu_write(0, buf.length)
            res.keep_stage(buf, stage)
            return
        self._current("write_buffer", buf)
        copy_bytes(inst.cpu_address(buf) + offset * buf.stored_bytes, data.ctypes.data, data.nbytes)
        buf.record.note_cpu_write(offset, offset + data.size)


def _refusal(status: Status, buf: Buffer) -> str:
    if status == Status.CONTENTS_LOST:
        return f"buffer {buf.handle}'s only current copy was on a device that failed"
    if status == Status.CANCELLED:
        return "run_timeout passed while reading the buffer back from the device"
    return f"reading buffer {buf.handle} back from the device failed"


def _integers_as_given(values: object, target: np.dtype) -> np.ndarray:
    """values as an array; a sequence of Python ints for an integer buffer exactly as given (numpy
    would turn a U64 above 2**63 into a float64, and anything beyond 64 bits into objects)."""
    if target.kind not in "iu" or isinstance(values, np.ndarray) or not isinstance(values, (list, tuple)):
        return np.asarray(values)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return np.asarray(values)
    info = np.iinfo(target)
    for v in values:
        if not info.min <= v <= info.max:
            raise ValueError(f"write_buffer: {v} is outside the {_TYPE_NAMES[target]} range {info.min}..{info.max}")
    return np.array(values, dtype=target)


def as_elements(buf: Buffer, values: object) -> np.ndarray:
    """values as a C-contiguous one-dimensional array of buf's stored form, or TypeError/ValueError.

    Integers must fit the element type (nothing wraps); floats go to float buffers only. F16 takes
    float16 values as they are (their bits are stored, as setBuffer32 stores a guest's bits) and
    wider floats rounded as writeBufferF16 rounds an f32 (to nearest even, every NaN canonical).
    """
    target = DTYPES[buf.type]
    array = _integers_as_given(values, target)
    if array.dtype.kind in "SUV":  # bytes or text, whatever the shape: not numbers
        what = type(values).__name__ if isinstance(values, (bytes, str)) else str(array.dtype)
        raise BufferAccessError("write_buffer", Status.TYPE_MISMATCH,
                                f"{what} values cannot be written to a {buf.type.name} buffer"
                                + (" (for raw bytes, give np.frombuffer(data, dtype))" if what == "bytes" else ""))
    if array.ndim != 1:
        raise ValueError(f"write_buffer: values must be one-dimensional, got shape {array.shape}")
    kind = array.dtype.kind
    if kind == "O":
        raise ValueError(f"write_buffer: values must be numbers of a numeric dtype, got objects "
                         f"(an integer beyond 64 bits?) for a {buf.type.name} buffer")
    if kind not in "biuf" or (kind == "f" and target.kind != "f"):
        raise BufferAccessError("write_buffer", Status.TYPE_MISMATCH,
                                f"{array.dtype} values cannot be written to a {buf.type.name} buffer")
    if target.kind in "iu" and array.size:
        info = np.iinfo(target)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise ValueError(f"write_buffer: {bad} is outside the {buf.type.name} range {info.min}..{info.max}")
    if buf.type == ElementType.F16 and array.dtype != np.float16:
        bits = f32_bits_to_half(array.astype(np.float32).view(np.uint32))
        return np.ascontiguousarray(bits, dtype="<u2").view(target)
    return np.ascontiguousarray(array, dtype=target)
