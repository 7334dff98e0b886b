"""The Python floor under bench.host_overhead's host-only figures: the work guest's three round-trip
imports (setBuffer32, dispatch, copyBuffer32) served by a direct Python host with none of the
package's layers, over the same wasmtime crossing (Host.define_func's trampoline, the host lock).

Each import makes the spec's checks in the spec's order (docs/check-order.md: entry, handle,
range, memory, count, currency, deadline), moves its words with one memmove, keeps a
one-flag residency (CPU- or device-current) and writes a record of its call (name, instance,
count, kernel, status, queue wait, total) plus per-import totals. The device is stubbed as in
host_only: the dispatch marks the output device-current and the copy back takes the words
from the output's device-side array. What it leaves out is everything the package adds
beyond those steps: placement, the steady plan's currency per binding, scratch swaps, the
read-ahead, the Last record's transfer and stage fields, the diagnostics log.

    python -m bench.python_floor
"""
from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from functools import partial

import numpy as np
import wasmtime

from bench.bytecodes import count_bytecodes
from bench.common import emit, environment
from bench.host_overhead import median_us
from wagogpu import Config, Host
from wagogpu.abi.table import IMPORTS_BY_NAME, Status
from wagogpu.host import _wasmtime

#: The guest: the work guest's round trip, its imports renamed into a module of this bench's own.
_IMPORTS = ("setBuffer32", "set"), ("copyBuffer32", "copy"), ("dispatch", "dispatch")
FLOOR_MODULE = "floor"
_OK, _INVALID_HANDLE, _INVALID_RANGE, _INVALID_STATE = Status.OK, Status.INVALID_HANDLE, Status.INVALID_RANGE, \
    Status.INVALID_STATE
_CANCELLED, _INVALID_KERNEL, _LIMIT = Status.CANCELLED, Status.INVALID_KERNEL, Status.LIMIT_EXCEEDED
_U32 = 0xFFFFFFFF
_IN, _OUT = 1, 2  # the two buffers' handles


def floor_wat() -> str:
    decls = "\n".join("  " + IMPORTS_BY_NAME[name].wat_import(local).replace('"wago_gpu_v1"', f'"{FLOOR_MODULE}"')
                      for name, local in _IMPORTS)
    return f"""(module
{decls}
  (memory (export "memory") 1)
  (func (export "upload") (param $n i32) (result i32)
    (call $set (i32.const {_IN}) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
  (func (export "dispatch") (param $k i32) (param $n i32) (result i32) (call $dispatch (local.get $k) (local.get $n)))
  (func (export "sample") (param $k i32) (param $n i32) (result i32) (local $s i32)
    (local.set $s (call $set (i32.const {_IN}) (i32.const 0) (i32.const 0) (i32.const 0) (local.get $n)))
    (if (local.get $s) (then (return (i32.or (local.get $s) (i32.const 0x100)))))
    (local.set $s (call $dispatch (local.get $k) (local.get $n)))
    (if (local.get $s) (then (return (local.get $s))))
    (call $copy (i32.const {_OUT}) (i32.const 0) (i32.const 0) (i32.shl (local.get $n) (i32.const 3)) (local.get $n))))"""


class _Buffer:
    __slots__ = ("handle", "length", "cpu", "cpu_address", "device", "gpu_current")

    def __init__(self, handle: int, length: int) -> None:
        self.handle, self.length = handle, length
        self.cpu = np.zeros(length, np.uint32)
        self.cpu_address = self.cpu.ctypes.data
        self.device = np.zeros(length, np.uint32)  # the stubbed device's copy
        self.gpu_current = False


class _Record:
    __slots__ = ("import_name", "instance", "count", "kernel_id", "status", "queue_wait", "total")


class FloorHost:
    """The three imports, direct (see the module docstring)."""

    def __init__(self, n: int, kernel_id: int, run_timeout: float = 5.0) -> None:
        self.lock = threading.RLock()
        self.stopped = self.closed = False
        self.buffers = {_IN: _Buffer(_IN, n), _OUT: _Buffer(_OUT, n)}
        self.kernel_id, self.max_elements, self.run_timeout = kernel_id, 1 << 28, run_timeout
        self.last: _Record | None = None
        self.calls = {name: 0 for name, _ in _IMPORTS}
        self.statuses = {name: 0 for name, _ in _IMPORTS}  # non-OK answers per import
        self.span = lambda: (0, 0)  # (address, bytes) of memory 0; set once instantiated

    def _record(self, name: str, count: int, kernel_id: int, status: int, started: float, entered: float) -> int:
        rec = _Record()
        rec.import_name, rec.instance, rec.count, rec.kernel_id, rec.status = name, 1, count, kernel_id, status
        rec.queue_wait, rec.total = entered - started, time.perf_counter() - started
        self.last = rec
        self.calls[name] += 1
        if status:
            self.statuses[name] += 1
        return status

    def _transfer(self, name: str, handle: int, offset: int, memory: int, at: int, count: int, into: bool) -> int:
        started = time.perf_counter()
        with self.lock:
            entered = time.perf_counter()
            handle, offset, memory, at, count = handle & _U32, offset & _U32, memory & _U32, at & _U32, count & _U32
            if self.stopped or self.closed:
                return self._record(name, count, 0, _INVALID_STATE, started, entered)
            buf = self.buffers.get(handle)
            if buf is None:
                return self._record(name, count, 0, _INVALID_HANDLE, started, entered)
            if offset + count > buf.length or memory != 0:
                return self._record(name, count, 0, _INVALID_RANGE, started, entered)
            address, size = self.span()
            nbytes = count * 4
            if at + nbytes > size:
                return self._record(name, count, 0, _INVALID_RANGE, started, entered)
            if count == 0:
                return self._record(name, count, 0, _OK, started, entered)
            full = into and offset == 0 and count == buf.length
            if buf.gpu_current and not full:  # made CPU-current first (the stubbed readback)
                buf.cpu[:] = buf.device
                buf.gpu_current = False
            if time.perf_counter() >= started + self.run_timeout:
                return self._record(name, count, 0, _CANCELLED, started, entered)
            host = buf.cpu_address + offset * 4
            if into:
                ctypes.memmove(host, address + at, nbytes)
                buf.gpu_current = False
            else:
                ctypes.memmove(address + at, host, nbytes)
            return self._record(name, count, 0, _OK, started, entered)

    def set(self, handle: int, offset: int, memory: int, at: int, count: int) -> int:
        return self._transfer("setBuffer32", handle, offset, memory, at, count, True)

    def copy(self, handle: int, offset: int, memory: int, at: int, count: int) -> int:
        return self._transfer("copyBuffer32", handle, offset, memory, at, count, False)

    def dispatch(self, kernel_id: int, count: int) -> int:
        started = time.perf_counter()
        with self.lock:
            entered = time.perf_counter()
            kernel_id, count = kernel_id & _U32, count & _U32
            if self.stopped or self.closed:
                return self._record("dispatch", count, kernel_id, _INVALID_STATE, started, entered)
            if kernel_id != self.kernel_id:
                return self._record("dispatch", count, kernel_id, _INVALID_KERNEL, started, entered)
            if count > self.buffers[_IN].length or count > self.buffers[_OUT].length:
                return self._record("dispatch", count, kernel_id, _INVALID_RANGE, started, entered)
            if count > self.max_elements:
                return self._record("dispatch", count, kernel_id, _LIMIT, started, entered)
            if count == 0:
                return self._record("dispatch", count, kernel_id, _OK, started, entered)
            if time.perf_counter() >= started + self.run_timeout:
                return self._record("dispatch", count, kernel_id, _CANCELLED, started, entered)
            src, out = self.buffers[_IN], self.buffers[_OUT]
            if not src.gpu_current:  # the stubbed upload
                src.device[:count] = src.cpu[:count]
                src.gpu_current = True
            out.gpu_current = True  # the stubbed device wrote it
            return self._record("dispatch", count, kernel_id, _OK, started, entered)


def span_reader(inst) -> Callable[[], tuple[int, int]]:
    """(address, bytes) of the instance's memory 0 now: the two C calls alone, their store context
    and memory handle taken once (both hold for the store's life)."""
    if not _wasmtime.FAST_PATH:
        return partial(_wasmtime.memory_span, inst._memory(0), inst._store)
    context = _wasmtime._store_context(inst._store)
    handle = _wasmtime._memory_handle(inst._memory(0))
    data, size = _wasmtime._memory_data, _wasmtime._memory_size
    return lambda: (data(context, handle), size(context, handle))


def floor_figures(n: int = 1024, kernel_id: int = 0) -> dict[str, float | bool]:
    """The floor's round trip and resident dispatch (medians, µs), and whether its round trip moved
    the input into the input buffer and the output's device words back out (checked after the
    timer)."""
    floor = FloorHost(n, kernel_id)
    i32 = wasmtime.ValType.i32()
    with Host(Config(disabled=True)) as host:
        for name, fn in (("setBuffer32", floor.set), ("copyBuffer32", floor.copy), ("dispatch", floor.dispatch)):
            ty = wasmtime.FuncType([i32] * len(IMPORTS_BY_NAME[name].params), [i32])
            host.define_func(FLOOR_MODULE, name, ty, fn)
        inst = host.instantiate(host.compile(floor_wat()))
        floor.span = span_reader(inst)
        view = inst.memory_view().view(np.uint32)
        x = np.arange(n, dtype=np.uint32) * 3 + 1
        view[:n] = x
        floor.buffers[_OUT].device[:] = x ^ 0x5A5A5A5A  # what the stubbed kernel "wrote"
        figures: dict[str, float | bool] = {
            "python_floor_round_trip_us": median_us(lambda: inst.call("sample", kernel_id, n)),
            "python_floor_resident_dispatch_us": median_us(lambda: inst.call("dispatch", kernel_id, n)),
            "python_floor_set_us": median_us(lambda: inst.call("upload", n)),
        }
        for name, fn in (("round_trip", lambda: inst.call("sample", kernel_id, n)),
                         ("resident_dispatch", lambda: inst.call("dispatch", kernel_id, n))):
            figures[f"bytecodes_python_floor_{name}"] = count_bytecodes(fn, ("bench/python_floor", "wagogpu/")).opcodes
        view = inst.memory_view().view(np.uint32)
        figures["python_floor_checked"] = bool(
            np.array_equal(floor.buffers[_IN].cpu, x) and np.array_equal(view[2 * n:3 * n], x ^ 0x5A5A5A5A)
            and floor.last is not None and floor.last.status == 0 and not any(floor.statuses.values()))
    return figures


def main(argv: list[str] | None = None) -> int:
    figures = floor_figures()
    emit({"bench": "python_floor", "elements": 1024, **figures, "adapter": "none (device stubbed)",
          **environment()})
    return 0 if figures["python_floor_checked"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
