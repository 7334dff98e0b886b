"""A tiny stand-in host for the example guests (no wagogpu, no GPU).

It implements the ``wago_gpu_v1`` imports that the example guests use, on top
of wasmtime-py, with buffers kept as numpy arrays.  It exists so the guests
can be proven correct before (and independently of) the real host in
``wagogpu``.  It follows the status and trap rules of spec/abi.md §2 for the
cases the guests can hit, but it is not a conformance implementation: no
budgets, no cancellation, no GPU state machine.

``dispatch`` validates the declared bindings of the kernel like the real host
(§2.6 step 4) and then, depending on ``mode``:

* ``"cpu"``    returns 1 (CPU_FALLBACK): the guest must run its CPU runner;
* ``"kernel"`` runs the guest's own kernel export once per index through the
  scalar imports (a slow, sequential "GPU") and returns 0, enforcing the
  declared access of every slot (no write to a READ slot, no read from a
  WRITE slot);
* an int     returns that status (to exercise the guests' error paths).

Usage::

    host = StubHost({1: StubKernel("double", [(0, F32, READ), (1, F32, WRITE)])})
    inst = host.instantiate(open("double.wasm", "rb").read())
    assert inst.call("run") == 1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

import numpy as np
import wasmtime
from wasmtime import FuncType, Linker, Module, Store, Trap, ValType

MODULE = "wago_gpu_v1"

# Element types (spec/abi.md §1.2).
I8, U8, I16, U16, I32, U32, F16, F32, I64, U64, F64 = range(1, 12)
DTYPES = {
    I8: np.int8, U8: np.uint8, I16: np.int16, U16: np.uint16,
    I32: np.int32, U32: np.uint32, F16: np.uint16,  # F16 kept as raw bits
    F32: np.float32, I64: np.int64, U64: np.uint64, F64: np.float64,
}
TYPE_NAMES = {I8: "I8", U8: "U8", I16: "I16", U16: "U16", I32: "I32", U32: "U32",
              F16: "F16", F32: "F32", I64: "I64", U64: "U64", F64: "F64"}

# Access modes (spec/abi.md §7.2).
READ, WRITE, READ_WRITE = 1, 2, 3

# Statuses (spec/abi.md §1.3).
OK, CPU_FALLBACK, INVALID_HANDLE, INVALID_RANGE, TYPE_MISMATCH = 0, 1, 2, 3, 4
INVALID_BINDING, LIMIT_EXCEEDED, INVALID_KERNEL, UNSUPPORTED_STORAGE = 5, 6, 10, 11

SLOTS = 8
MAX_ELEMENTS = 10_000_000
MAX_BUFFERS = 64
U32_MASK = 0xFFFFFFFF


def _u32(v: int) -> int:
    return v & U32_MASK


def _i32(v: int) -> int:
    v &= U32_MASK
    return v - (1 << 32) if v >= (1 << 31) else v


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= (1 << 63) else v


class ScalarTrap(Exception):
    """Raised (and so trapped) by the scalar imports, carrying the status."""

    def __init__(self, status: int):
        super().__init__(f"wago_gpu_v1 scalar access: status {status}")
        self.status = status


@dataclass(frozen=True)
class StubKernel:
    """One configured kernel: ``name`` gives ``wago_gpu.kernel.<name>`` and
    ``wago_gpu.cpu.<name>``; ``bindings`` is a list of (slot, type, access)."""

    name: str
    bindings: Sequence[tuple[int, int, int]]

    @property
    def export(self) -> str:
        return f"wago_gpu.kernel.{self.name}"

    @property
    def cpu_export(self) -> str:
        return f"wago_gpu.cpu.{self.name}"


Mode = Union[str, int]


@dataclass
class DispatchRecord:
    kernel_id: int
    count: int
    status: int


class StubInstance:
    """One guest instance with its own buffers and slot table."""

    def __init__(self, host: "StubHost", wasm: bytes, wasi: bool = False):
        self.host = host
        self.store = Store(host.engine)
        self.module = Module(host.engine, wasm)
        self.buffers: dict[int, tuple[int, np.ndarray]] = {}
        self.slots = [0] * SLOTS
        self.dispatches: list[DispatchRecord] = []
        # handle -> declared access while a kernel runs in "kernel" mode.
        self._kernel_access: dict[int, int] | None = None
        linker = Linker(host.engine)
        if wasi:  # only for guests built by toolchains that insist on WASI
            self.store.set_wasi(wasmtime.WasiConfig())
            linker.define_wasi()
        for imp in self.module.imports:
            if wasi and imp.module.startswith("wasi_"):
                continue
            if imp.module != MODULE:
                raise ValueError(f"stub host cannot satisfy import {imp.module}.{imp.name}")
            impl, params, results = self._import(imp.name)
            ty = FuncType([_valtype(p) for p in params], [_valtype(r) for r in results])
            linker.define_func(MODULE, imp.name, ty, impl, access_caller=True)
        self.instance = linker.instantiate(self.store, self.module)
        self.exports = self.instance.exports(self.store)
        if "_initialize" in self.exports:  # reactor-style guests (TinyGo, Go)
            self.call("_initialize")

    # -- public helpers ------------------------------------------------------
    def call(self, name: str, *args):
        return self.exports[name](self.store, *args)

    def memory(self) -> wasmtime.Memory:
        return self.exports["memory"]

    def read_memory(self, ptr: int, nbytes: int) -> bytes:
        return bytes(self.memory().read(self.store, ptr, ptr + nbytes))

    @property
    def live_buffers(self) -> int:
        return len(self.buffers)

    # -- import table --------------------------------------------------------
    def _import(self, name: str):
        table: dict[str, tuple[Callable, list[str], list[str]]] = {
            "createBuffer": (self._create_buffer, ["i32", "i32"], ["i32", "i32"]),
            "createBufferPacked": (self._create_buffer_packed, ["i32", "i32"], ["i64"]),
            "freeBuffer": (self._free_buffer, ["i32"], ["i32"]),
            "bindBuffer": (self._bind_buffer, ["i32", "i32"], ["i32"]),
            "getBuffer": (self._get_buffer, ["i32"], ["i32"]),
            "dispatch": (self._dispatch, ["i32", "i32"], ["i32"]),
            "setBuffer32": (self._set_buffer32, ["i32"] * 5, ["i32"]),
            "copyBuffer32": (self._copy_buffer32, ["i32"] * 5, ["i32"]),
        }
        for t, wasm_t in ((I8, "i32"), (U8, "i32"), (I16, "i32"), (U16, "i32"),
                          (I32, "i32"), (U32, "i32"), (F32, "f32")):
            suffix = TYPE_NAMES[t]
            table[f"readBuffer{suffix}"] = (self._reader(t), ["i32", "i32"], [wasm_t])
            table[f"writeBuffer{suffix}"] = (self._writer(t), ["i32", "i32", wasm_t], [])
        if name not in table:
            raise ValueError(f"stub host does not implement {MODULE}.{name}")
        return table[name]

    # -- management ----------------------------------------------------------
    def _create(self, element_type: int, count: int) -> tuple[int, int]:
        element_type, count = _u32(element_type), _u32(count)
        if element_type not in DTYPES:
            return 0, TYPE_MISMATCH
        if count > MAX_ELEMENTS or len(self.buffers) >= MAX_BUFFERS:
            return 0, LIMIT_EXCEEDED
        handle = self.host.next_handle
        self.host.next_handle += 1
        self.buffers[handle] = (element_type, np.zeros(count, dtype=DTYPES[element_type]))
        return handle, OK

    def _create_buffer(self, caller, element_type, count):
        handle, status = self._create(element_type, count)
        return [_i32(handle), status]

    def _create_buffer_packed(self, caller, element_type, count):
        handle, status = self._create(element_type, count)
        return _signed64((status << 32) | _u32(handle))

    def _free_buffer(self, caller, handle):
        handle = _u32(handle)
        if handle not in self.buffers:
            return INVALID_HANDLE
        del self.buffers[handle]
        self.slots = [0 if h == handle else h for h in self.slots]
        return OK

    def _bind_buffer(self, caller, slot, handle):
        slot, handle = _u32(slot), _u32(handle)
        if slot >= SLOTS:
            return INVALID_BINDING
        if handle != 0 and handle not in self.buffers:
            return INVALID_HANDLE
        self.slots[slot] = handle
        return OK

    def _get_buffer(self, caller, slot):
        slot = _u32(slot)
        if slot >= SLOTS or self.slots[slot] == 0:
            raise ScalarTrap(INVALID_BINDING)
        return _i32(self.slots[slot])

    # -- dispatch ------------------------------------------------------------
    def _dispatch(self, caller, kernel_id, count):
        kernel_id, count = _u32(kernel_id), _u32(count)
        status = self._dispatch_status(caller, kernel_id, count)
        self.dispatches.append(DispatchRecord(kernel_id, count, status))
        return status

    def _dispatch_status(self, caller, kernel_id: int, count: int) -> int:
        kernel = self.host.kernels.get(kernel_id)
        if kernel is None:
            return INVALID_KERNEL
        for export in (kernel.export, kernel.cpu_export):
            if caller.get(export) is None:
                return INVALID_KERNEL
        seen: set[int] = set()
        for slot, element_type, _access in kernel.bindings:
            handle = self.slots[slot]
            if handle == 0 or handle not in self.buffers or handle in seen:
                return INVALID_BINDING
            seen.add(handle)
            buf_type, data = self.buffers[handle]
            if buf_type != element_type:
                return TYPE_MISMATCH
            if count > len(data):
                return INVALID_RANGE
        if count == 0:
            return OK
        mode = self.host.mode
        if isinstance(mode, int):
            return mode
        if mode == "cpu":
            return CPU_FALLBACK
        if mode == "kernel":
            fn = caller.get(kernel.export)
            self._kernel_access = {self.slots[s]: a for s, _t, a in kernel.bindings}
            try:
                for i in range(count):
                    fn(caller, i)
            finally:
                self._kernel_access = None
            return OK
        raise ValueError(f"unknown stub mode {mode!r}")

    # -- transfers -----------------------------------------------------------
    def _transfer_target(self, caller, handle, offset, memory_index, guest, count):
        handle, offset = _u32(handle), _u32(offset)
        memory_index, guest, count = _u32(memory_index), _u32(guest), _u32(count)
        if handle not in self.buffers:
            return INVALID_HANDLE, None
        element_type, data = self.buffers[handle]
        if offset + count > len(data):
            return INVALID_RANGE, None
        if memory_index != 0:
            return INVALID_RANGE, None
        memory = caller.get("memory")
        if not isinstance(memory, wasmtime.Memory):
            return UNSUPPORTED_STORAGE, None
        nbytes = count * data.itemsize
        if guest + nbytes > memory.data_len(caller):
            return INVALID_RANGE, None
        return OK, (memory, data, offset, guest, count, nbytes)

    def _set_buffer32(self, caller, handle, offset, memory_index, guest, count):
        status, t = self._transfer_target(caller, handle, offset, memory_index, guest, count)
        if status != OK or t[4] == 0:
            return status
        memory, data, offset, guest, count, nbytes = t
        raw = memory.read(caller, guest, guest + nbytes)
        data[offset:offset + count] = np.frombuffer(bytes(raw), dtype=data.dtype)
        return OK

    def _copy_buffer32(self, caller, handle, offset, memory_index, guest, count):
        status, t = self._transfer_target(caller, handle, offset, memory_index, guest, count)
        if status != OK or t[4] == 0:
            return status
        memory, data, offset, guest, count, _nbytes = t
        memory.write(caller, data[offset:offset + count].tobytes(), guest)
        return OK

    # -- scalar access -------------------------------------------------------
    def _element(self, element_type: int, handle: int, index: int, access: int) -> np.ndarray:
        handle, index = _u32(handle), _u32(index)
        if handle not in self.buffers:
            raise ScalarTrap(INVALID_HANDLE)
        buf_type, data = self.buffers[handle]
        if buf_type != element_type:
            raise ScalarTrap(TYPE_MISMATCH)
        if index >= len(data):
            raise ScalarTrap(INVALID_RANGE)
        if self._kernel_access is not None:
            declared = self._kernel_access.get(handle)
            if declared is None or not (declared & access):
                raise AssertionError(
                    f"kernel used handle {handle} (declared access {declared}) "
                    f"for {'read' if access == READ else 'write'}")
        return data

    def _reader(self, element_type: int):
        is_float = element_type == F32

        def read(caller, handle, index):
            data = self._element(element_type, handle, index, READ)
            v = data[_u32(index)]
            return float(v) if is_float else _i32(int(v))

        return read

    def _writer(self, element_type: int):
        is_float = element_type == F32

        def write(caller, handle, index, value):
            data = self._element(element_type, handle, index, WRITE)
            if is_float:
                data[_u32(index)] = np.float32(value)
            else:
                bits = np.iinfo(data.dtype).bits
                v = value & ((1 << bits) - 1)
                if np.issubdtype(data.dtype, np.signedinteger) and v >= 1 << (bits - 1):
                    v -= 1 << bits
                data[_u32(index)] = v

        return write


def _valtype(name: str) -> ValType:
    return {"i32": ValType.i32(), "i64": ValType.i64(),
            "f32": ValType.f32(), "f64": ValType.f64()}[name]


@dataclass
class StubHost:
    """Kernel table (ID -> StubKernel) plus the dispatch ``mode``."""

    kernels: dict[int, StubKernel]
    mode: Mode = "cpu"
    engine: wasmtime.Engine = field(default_factory=wasmtime.Engine)
    next_handle: int = 1  # runtime-wide handle counter, like the reference

    def instantiate(self, wasm: bytes, wasi: bool = False) -> StubInstance:
        return StubInstance(self, wasm, wasi=wasi)


# Kernel tables for the example guests (the same IDs/bindings the real host
# must be configured with; see README.md).
DOUBLE_KERNELS = {
    1: StubKernel("double", [(0, F32, READ), (1, F32, WRITE)]),
}
MANDELBROT_KERNELS = {
    1: StubKernel("step", [(0, F32, READ), (1, F32, READ), (2, F32, READ_WRITE), (3, F32, READ_WRITE)]),
    2: StubKernel("mandel", [(0, U32, READ), (1, U32, WRITE)]),
}
