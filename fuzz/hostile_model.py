"""A pure-Python model of the wago_gpu_v1 check orders (docs/design/abi.md §2, docs/check-order.md) for
the hostile-guest fuzzer: buffers, slots, guest memories and contents; for each import call it
predicts the status, the trap or the value, and what every later read must see.

It models one instance of a host configured as hostile.HOST_CONFIG, with the guest of
fuzz/hostile_guest.py (three memories: 0 a 32-bit, 1 a 64-bit, 2 a shared 32-bit one, one page
each). Not modelled, so the fuzzer never provokes them: cancellation and deadlines, device loss
and quarantine, INVALID_STATE (a closed instance cannot be called). The GPU host's byte charges
(device copies, scratch, staging) are not predicted exactly: a create whose answer would depend
on them is reported as Ambiguous and the fuzzer skips it on both hosts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from abitable import ELEMENTS_BY_ID, SLOTS, ElementInfo
from hostile_guest import DUMP, GC_KINDS
from hostile_kernels import KERNELS, ModelKernel, ScalarTrap
from wagogpu import Status

U32 = 0xFFFFFFFF
U64 = (1 << 64) - 1
PAGE = 65536


@dataclass(frozen=True)
class Memory:
    address64: bool
    shared: bool
    size: int = PAGE


MEMORIES = (Memory(False, False), Memory(True, False), Memory(False, True))


@dataclass(frozen=True)
class Limits:
    max_buffers: int
    max_elements: int
    instance_bytes: int


@dataclass
class Buffer:
    element: ElementInfo
    length: int
    data: bytearray

    def word(self, index: int) -> int:
        w = self.element.stored_bytes
        return int.from_bytes(self.data[index * w:(index + 1) * w], "little")

    def put(self, index: int, value: int) -> None:
        w = self.element.stored_bytes
        self.data[index * w:(index + 1) * w] = (value & ((1 << (8 * w)) - 1)).to_bytes(w, "little")


class Ambiguous(Exception):
    """The answer depends on what the model does not track (the GPU host's device charges)."""


# ---- F16 (§5.3), written again for the model --------------------------------------------------------
def half_to_f32(h: int) -> int:
    s, e, m = (h & 0x8000) << 16, (h >> 10) & 31, h & 0x3FF
    if e == 31:
        return 0x7FC00000 if m else s | 0x7F800000
    if e == 0:
        if m == 0:
            return s
        e = 113
        while not m & 0x400:
            m, e = m << 1, e - 1
        return s | (e << 23) | ((m & 0x3FF) << 13)
    return s | ((e + 112) << 23) | (m << 13)


def f32_to_half(x: int) -> int:
    s, e, m = (x >> 16) & 0x8000, (x >> 23) & 255, x & 0x7FFFFF
    if e == 255:
        return 0x7E00 if m else s | 0x7C00
    if e > 142:
        return s | 0x7C00
    if e < 102:
        return s
    if e < 113:
        m |= 0x800000
        k = 126 - e
        v, r, half = m >> k, m & ((1 << k) - 1), 1 << (k - 1)
    else:
        v, r, half = ((e - 112) << 10) | (m >> 13), m & 0x1FFF, 0x1000
    if r > half or (r == half and v & 1):
        v += 1
    return s | v


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


# the GC array element storage each element type accepts (docs/design/abi.md §5.4)
GC_STORAGE = {"I8": "i8", "U8": "i8", "I16": "i16", "U16": "i16", "F16": "i16", "I32": "i32", "U32": "i32",
              "I64": "i64", "U64": "i64", "F32": "f32", "F64": "f64"}

# the bits readBuffer<T> returns (as the guest wrapper widens them to i64), from a stored word
READ_BITS = {"I8": lambda w: _signed(w, 8) & U32, "U8": lambda w: w, "I16": lambda w: _signed(w, 16) & U32,
             "U16": lambda w: w, "I32": lambda w: w, "U32": lambda w: w, "F16": half_to_f32, "F32": lambda w: w,
             "I64": lambda w: w, "U64": lambda w: w, "F64": lambda w: w}
# the stored word writeBuffer<T> keeps, from the bits the wrapper passes
WRITE_WORD = {"F16": lambda b: f32_to_half(b & U32)}


@dataclass
class Model:
    """One instance's buffer state, as the spec says it must be."""

    limits: Limits
    gpu: bool  # the host runs eligible kernels on the GPU (else dispatch answers 1)
    next_handle: int  # the host-wide counter's next handle
    buffers: dict[int, Buffer] = field(default_factory=dict)
    slots: list[int] = field(default_factory=lambda: [0] * SLOTS)
    memories: list[bytearray] = field(default_factory=lambda: [bytearray(m.size) for m in MEMORIES])
    resident: set[int] = field(default_factory=set)  # handles whose only current copy may be on the GPU
    on_gpu: set[int] = field(default_factory=set)  # handles a GPU dispatch has used (they hold device storage)

    def _tight(self, extra: int = 0) -> bool:
        """On the GPU host, whether device charges might reach the byte budget (then a readback's
        staging buffer or a GPU dispatch may answer 6 where the model cannot tell)."""
        return self.gpu and self._cpu_bytes() + self.device_charges() + extra > self.limits.instance_bytes

    def _readback(self, handle: int) -> None:
        """Make a buffer CPU-current (docs/design/abi.md §4.4): a readback if the GPU holds its only copy."""
        if handle in self.resident and self._tight():
            raise Ambiguous("a readback near the byte budget on the GPU host")
        self.resident.discard(handle)

    # ---- management -------------------------------------------------------------------------------
    def create(self, etype: int, count: int) -> tuple[int, int]:
        etype, count = etype & U32, count & U32
        element = ELEMENTS_BY_ID.get(etype)
        if element is None:
            return 0, Status.TYPE_MISMATCH
        if count > self.limits.max_elements or len(self.buffers) >= self.limits.max_buffers:
            return 0, Status.LIMIT_EXCEEDED
        need = count * element.stored_bytes + self._cpu_bytes()
        if need > self.limits.instance_bytes:
            return 0, Status.LIMIT_EXCEEDED
        if self.gpu and need + self.device_charges() > self.limits.instance_bytes:
            raise Ambiguous("a create near the byte budget on the GPU host")
        handle, self.next_handle = self.next_handle, self.next_handle + 1
        self.buffers[handle] = Buffer(element, count, bytearray(count * element.stored_bytes))
        return handle, Status.OK

    def device_charges(self) -> int:
        """At most what the GPU host may hold besides CPU bytes and cannot evict: for each live
        buffer a GPU dispatch has used, its device copy and two output scratch buffers; the largest
        of them again twice (readback staging, narrow-type conversion); the 16-byte uniform."""
        lengths = [self.buffers[h].length for h in self.on_gpu if h in self.buffers]
        return 12 * sum(lengths) + 8 * max(lengths, default=0) + 16

    def free(self, handle: int) -> int:
        handle &= U32
        if handle not in self.buffers:
            return Status.INVALID_HANDLE
        del self.buffers[handle]
        self.resident.discard(handle)
        self.slots = [0 if s == handle else s for s in self.slots]
        return Status.OK

    def bind(self, slot: int, handle: int) -> int:
        slot, handle = slot & U32, handle & U32
        if slot >= SLOTS:
            return Status.INVALID_BINDING
        if handle and handle not in self.buffers:
            return Status.INVALID_HANDLE
        self.slots[slot] = handle
        return Status.OK

    # ---- scalar access (traps raise ScalarTrap) ---------------------------------------------------
    def get(self, slot: int) -> int:
        slot &= U32
        if slot >= SLOTS or not self.slots[slot]:
            raise ScalarTrap(Status.INVALID_BINDING)
        return self.slots[slot]

    def _element(self, handle: int, tname: str, index: int) -> Buffer:
        buf = self.buffers.get(handle & U32)
        if buf is None:
            raise ScalarTrap(Status.INVALID_HANDLE)
        if buf.element.name != tname:
            raise ScalarTrap(Status.TYPE_MISMATCH)
        if index & U32 >= buf.length:
            raise ScalarTrap(Status.INVALID_RANGE)
        return buf

    def read(self, tname: str, handle: int, index: int) -> int:
        buf = self._element(handle, tname, index)
        self._readback(handle & U32)
        return READ_BITS[tname](buf.word(index & U32))

    def write(self, tname: str, handle: int, index: int, bits: int) -> None:
        buf = self._element(handle, tname, index)
        self._readback(handle & U32)
        buf.put(index & U32, WRITE_WORD.get(tname, lambda b: b)(bits))

    # ---- bulk transfers ---------------------------------------------------------------------------
    def transfer(self, setting: bool, address64: bool, handle: int, offset: int, memory: int, guest: int,
                 count: int) -> int:
        handle, offset, memory, count = handle & U32, offset & U32, memory & U32, count & U32
        guest &= U64 if address64 else U32
        buf = self.buffers.get(handle)
        if buf is None:
            return Status.INVALID_HANDLE
        if offset + count > buf.length:
            return Status.INVALID_RANGE
        if memory >= len(MEMORIES):
            return Status.INVALID_RANGE
        mem = MEMORIES[memory]
        if mem.shared or mem.address64 != address64:
            return Status.UNSUPPORTED_STORAGE
        payload = count * buf.element.stored_bytes
        if guest + payload > mem.size:
            return Status.INVALID_RANGE
        if count == 0:
            return Status.OK
        if setting and offset == 0 and count == buf.length:
            self.resident.discard(handle)  # a full set needs no readback
        self._readback(handle)
        w = buf.element.stored_bytes
        if setting:
            buf.data[offset * w:offset * w + payload] = self.memories[memory][guest:guest + payload]
        else:
            self.memories[memory][guest:guest + payload] = buf.data[offset * w:offset * w + payload]
        return Status.OK

    def _cpu_bytes(self) -> int:
        return sum(len(b.data) for b in self.buffers.values())

    def gc_transfer(self, setting: bool, handle: int, offset: int, kind: int, length: int, array_offset: int,
                    count: int, fill: int = 0) -> int:
        """setBufferGC / copyBufferGC with the guest's array GC_KINDS[kind] of `length` elements
        (`fill` each for a set, zeros for a copy); copyGC then dumps a mutable array at DUMP."""
        gk = GC_KINDS[kind] if 0 <= kind < len(GC_KINDS) else GC_KINDS[0]
        array = bytearray((fill & ((1 << (8 * gk.width)) - 1)).to_bytes(gk.width, "little") * length
                          if setting else bytes(gk.width * length))
        status = self._gc_checks(setting, handle & U32, offset & U32, gk, length, array_offset & U32, count & U32)
        buf = self.buffers.get(handle & U32)
        if status == Status.OK and count & U32:
            w, off, aoff, n = buf.element.stored_bytes, offset & U32, array_offset & U32, count & U32
            if setting:
                buf.data[off * w:(off + n) * w] = array[aoff * w:(aoff + n) * w]
            else:
                array[aoff * w:(aoff + n) * w] = buf.data[off * w:(off + n) * w]
        if not setting and gk.storage and gk.mutable:
            self.memories[0][DUMP:DUMP + len(array)] = array
        return status

    def _gc_checks(self, setting: bool, handle: int, offset: int, gk, length: int, array_offset: int,
                   count: int) -> int:
        buf = self.buffers.get(handle)
        if buf is None:
            return Status.INVALID_HANDLE
        if offset + count > buf.length:
            return Status.INVALID_RANGE
        if not gk.storage:
            return Status.UNSUPPORTED_STORAGE
        if gk.storage != GC_STORAGE[buf.element.name]:
            return Status.TYPE_MISMATCH
        if not setting and not gk.mutable:
            return Status.UNSUPPORTED_STORAGE
        if array_offset + count > length:
            return Status.INVALID_RANGE
        if count == 0:
            return Status.OK
        if setting and offset == 0 and count == buf.length:
            self.resident.discard(handle)
        self._readback(handle)
        if setting and not gk.mutable:  # an immutable source: its whole size is reserved for the call
            need = self._cpu_bytes() + length * buf.element.stored_bytes
            if need > self.limits.instance_bytes:
                return Status.LIMIT_EXCEEDED
            if self.gpu and need + self.device_charges() > self.limits.instance_bytes:
                raise Ambiguous("an immutable GC source near the byte budget on the GPU host")
        return Status.OK

    # ---- dispatch and the CPU runner --------------------------------------------------------------
    def dispatch(self, kernel_id: int, count: int) -> int:
        kernel_id, count = kernel_id & U32, count & U32
        kernel = KERNELS.get(kernel_id)
        if kernel is None or not kernel.exported:
            return Status.INVALID_KERNEL
        seen: set[int] = set()
        for slot, etype, _access in kernel.bindings:
            handle = self.slots[slot]
            buf = self.buffers.get(handle)
            if buf is None or handle in seen:
                return Status.INVALID_BINDING
            seen.add(handle)
            if buf.element.id != etype:
                return Status.TYPE_MISMATCH
            if count > buf.length:
                return Status.INVALID_RANGE
        if count > self.limits.max_elements:
            return Status.LIMIT_EXCEEDED
        if count == 0:
            return Status.OK
        handles = [self.slots[slot] for slot, _, _ in kernel.bindings]
        if self.gpu and kernel.gpu_runs(self, count):
            if self._tight(sum(12 * self.buffers[h].length for h in handles) + 16):
                raise Ambiguous("a GPU dispatch near the byte budget")
            self.on_gpu |= set(handles)
            self.run(kernel, count)  # the GPU's answer is the runner's (it never traps here)
            self.resident |= {self.slots[slot] for slot, _, access in kernel.bindings if access & 2}
            return Status.OK
        for handle in handles:
            self._readback(handle)
        return Status.CPU_FALLBACK

    def run(self, kernel: ModelKernel, count: int) -> None:
        """The guest's CPU runner: the kernel for 0..count-1 through the scalar imports; a trap stops
        it with the writes before it kept (docs/design/abi.md §3.3)."""
        for index in range(count & U32):
            kernel.step(self, index)

