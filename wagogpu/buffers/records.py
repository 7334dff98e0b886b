"""A buffer as the buffer layer sees it: its accessor record as named fields, and the state only
Python keeps (device copy, held stage, parked readback, read-ahead hints).

The record's words live in the accessor memory because the Wasm scalar fast path reads and updates
them (abi/accessor.py). BufferRecord names them after RECORD_DTYPE, the one description of the
layout, and reads them through a memoryview of the record's own words: a field read is one index
returning a plain int (a numpy scalar costs several times more, a structured row microseconds).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import overload

from ..abi import accessor as acc
from ..abi.kernel import GPU_WORDS
from ..abi.table import TYPE_INFO, ElementType
from ..diagnostics import BufferState
from ..gpu import BufferHandle, UploadStage

if sys.byteorder != "little":  # pragma: no cover - the accessor module's records are little-endian words
    raise ImportError("wagogpu needs a little-endian host")

WORDS_PER_RECORD = acc.RECORD_BYTES // 4
U32 = 0xFFFFFFFF


class _Word:
    """One u32 field of a record, at the word RECORD_DTYPE puts it."""

    __slots__ = ("word",)

    def __init__(self, name: str) -> None:
        assert acc.RECORD_DTYPE[name].itemsize == 4 and acc.RECORD_OFFSETS[name] % 4 == 0
        self.word = acc.RECORD_OFFSETS[name] // 4

    @overload
    def __get__(self, obj: None, owner: type) -> _Word: ...
    @overload
    def __get__(self, obj: BufferRecord, owner: type) -> int: ...

    def __get__(self, obj: BufferRecord | None, owner: type) -> int | _Word:
        if obj is None:
            return self
        return obj.words[self.word]

    def __set__(self, obj: BufferRecord, value: int) -> None:
        obj.words[self.word] = value


class _DoubleWord:
    """One u64 field of a record: two little-endian words."""

    __slots__ = ("word",)

    def __init__(self, name: str) -> None:
        assert acc.RECORD_DTYPE[name].itemsize == 8 and acc.RECORD_OFFSETS[name] % 4 == 0
        self.word = acc.RECORD_OFFSETS[name] // 4

    @overload
    def __get__(self, obj: None, owner: type) -> _DoubleWord: ...
    @overload
    def __get__(self, obj: BufferRecord, owner: type) -> int: ...

    def __get__(self, obj: BufferRecord | None, owner: type) -> int | _DoubleWord:
        if obj is None:
            return self
        w, i = obj.words, self.word
        return w[i] | w[i + 1] << 32

    def __set__(self, obj: BufferRecord, value: int) -> None:
        w, i = obj.words, self.word
        w[i] = value & U32
        w[i + 1] = value >> 32


class BufferRecord:
    """One buffer's record in the accessor memory, read and written in place.

    ``words`` is re-bound (bind) whenever the accessor memory is viewed anew after growing.
    """

    __slots__ = ("index", "words")

    type = _Word("type")
    length = _Word("length")
    ptr = _Word("ptr")
    flags = _Word("flags")
    version = _DoubleWord("version")
    dirty_start = _Word("dirty_start")
    dirty_end = _Word("dirty_end")

    def __init__(self, table_words: memoryview, index: int) -> None:
        self.index = index
        self.words = table_words[index * WORDS_PER_RECORD:(index + 1) * WORDS_PER_RECORD]

    def bind(self, table_words: memoryview) -> None:
        i = self.index
        self.words = table_words[i * WORDS_PER_RECORD:(i + 1) * WORDS_PER_RECORD]

    def fill(self, element_type: int, length: int, ptr: int) -> None:
        """A new buffer: CPU-current, version 1, nothing dirty (docs/design/abi.md §4.1)."""
        self.type, self.length, self.ptr = element_type, length, ptr
        self.flags = acc.CPU_CURRENT
        self.version = 1
        self.dirty_start = self.dirty_end = 0

    def clear(self) -> None:
        for i in range(WORDS_PER_RECORD):
            self.words[i] = 0

    def bump_version(self) -> None:
        self.version = self.version + 1

    def dirty(self) -> tuple[int, int] | None:
        """The element range written on the CPU since the GPU copy was current, if any."""
        w = self.words
        if not w[_FLAGS] & acc.DIRTY:
            return None
        return w[_DIRTY_START], w[_DIRTY_END]

    def note_cpu_write(self, start: int, end: int) -> None:
        """A committed CPU write of [start, end): version +1, GPU copy stale, dirty interval (docs/design/abi.md §4.5).
        (The words indexed directly: this runs on every set.)"""
        w = self.words
        flags = w[_FLAGS]
        _next_version(w)
        if flags & acc.GPU_CURRENT:
            w[_DIRTY_START], w[_DIRTY_END] = start, end
            flags = (flags & ~acc.GPU_CURRENT) | acc.DIRTY
        elif flags & acc.DIRTY:
            w[_DIRTY_START] = min(w[_DIRTY_START], start)
            w[_DIRTY_END] = max(w[_DIRTY_END], end)
        w[_FLAGS] = (flags | acc.CPU_CURRENT) & _NOT_LOST

    def mark_uploaded(self) -> None:
        """The device copy holds the current version now (an upload completed)."""
        w = self.words
        w[_FLAGS] = (w[_FLAGS] | acc.GPU_CURRENT) & ~acc.DIRTY

    def mark_cpu_current(self) -> None:
        w = self.words
        w[_FLAGS] |= acc.CPU_CURRENT

    def mark_gpu_written(self) -> None:
        """A committed GPU write: only the device copy is current, one version later (the words
        indexed directly: this runs on every dispatch)."""
        w = self.words
        w[_FLAGS] = (w[_FLAGS] | _GPU_CURRENT) & _NOT_CPU_OR_DIRTY
        low = w[_VERSION]
        if low < U32:
            w[_VERSION] = low + 1
        else:
            _next_version(w)  # (the carry into the high word)

    def mark_quarantined(self) -> None:
        """The device is gone: whatever only it held is lost (docs/design/abi.md §4.7)."""
        flags = self.flags
        if not flags & acc.CPU_CURRENT:
            flags |= acc.LOST
        self.flags = flags & ~(acc.GPU_CURRENT | acc.DIRTY)


# Word indices of the fields the per-call paths read and write without a descriptor call.
_FLAGS = BufferRecord.flags.word
_VERSION = BufferRecord.version.word
_DIRTY_START = BufferRecord.dirty_start.word
_DIRTY_END = BufferRecord.dirty_end.word
FLAGS_WORD = _FLAGS
_NOT_CPU_OR_DIRTY = U32 & ~(acc.CPU_CURRENT | acc.DIRTY)
_GPU_CURRENT = acc.GPU_CURRENT  # (a global: read on every dispatch)
_NOT_LOST = U32 & ~acc.LOST


def _next_version(w: memoryview) -> None:
    """The record's 64-bit version + 1, on its two little-endian words."""
    low = w[_VERSION] + 1
    if low > U32:
        w[_VERSION + 1] += 1
        low = 0
    w[_VERSION] = low

Parked = tuple[BufferHandle, int]  # (mapped readback staging, its charged bytes)


@dataclass(eq=False)
class Buffer:
    """One buffer of one instance: its record, and what only the host side tracks."""

    handle: int
    type: ElementType
    length: int
    record: BufferRecord
    ptr: int
    gpu: BufferHandle | None = None  # committed device buffer, allocated lazily
    # Read-ahead hint: the guest read this buffer's GPU results back, so the next dispatch that
    # writes it asks the device for a mapped copy in the same submission (dropped when unused).
    readahead_hint: bool = False
    readahead_sent: bool = False
    # Prestaged upload (extension): a full set also wrote the words into a device upload stage,
    # so the dispatch that uploads that version copies them on the device. Charged while held.
    stage: UploadStage | None = None
    stage_version: int = 0
    stage_hint: bool = False  # the last dispatch uploaded this buffer whole: prestage the next full set
    # Parked readback (extension): the staging still mapped with the words of version
    # parked_version; it stands in for the CPU copy until the CPU bytes themselves are needed.
    parked: Parked | None = None
    parked_version: int = 0
    # Fixed for the buffer's life, read on every transfer and dispatch: plain attributes.
    stored_bytes: int = field(init=False)
    nbytes: int = field(init=False)  # bytes of the CPU copy
    gpu_stride: int = field(init=False)  # bytes per element on the device: one u32 word, two for 64-bit types
    gpu_bytes: int = field(init=False)  # bytes of the device copy
    raw: bool = field(init=False)  # the device copy's bytes are the stored bytes (32- and 64-bit types)

    def __post_init__(self) -> None:
        self.stored_bytes = TYPE_INFO[self.type].stored_bytes
        self.nbytes = self.length * self.stored_bytes
        self.gpu_stride = 4 * GPU_WORDS[self.type]
        self.gpu_bytes = self.length * self.gpu_stride
        self.raw = self.stored_bytes == self.gpu_stride

    def parked_valid(self) -> bool:
        """The parked readback holds the current version (so the buffer counts as CPU-current)."""
        return self.parked is not None and self.parked_version == self.record.version

    @property
    def state(self) -> BufferState:
        f = self.record.flags
        if f & acc.LOST:
            return BufferState.CONTENTS_LOST
        if f & acc.GPU_CURRENT and (f & acc.CPU_CURRENT or self.parked_valid()):
            return BufferState.BOTH_CURRENT
        if f & acc.CPU_CURRENT:
            return BufferState.CPU_CURRENT
        return BufferState.GPU_CURRENT
