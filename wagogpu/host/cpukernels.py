"""CPU kernels on the host (Config.cpu_kernels): the compiler's CPU module of a kernel
(compiler/cpukernel.py), compiled once per guest module and instantiated once per guest instance
in the instance's own store, over its accessor memory (and the guest memory its loads read).

The GPU's dispatch contract holds here too: a kernel that may trap gets a copy of every written
buffer's first `count` elements before it runs, put back when it traps, so a trap publishes
nothing; a run that finishes marks each written buffer written on the CPU (version + 1, the GPU
copy stale) as one committed write. An output the kernel replaces whole (replaced_slots) is not
read back from the GPU first: its stale CPU copy is neither kept nor restored, since a trap leaves
it stale and the GPU's version the buffer's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import wasmtime

from ..abi.accessor import CPU_CURRENT
from ..buffers import Buffer, InstanceBuffers
from ..compiler.contract import CompileError, KernelClass, KernelPlan
from ..compiler.cpukernel import (BUFFER_MEMORY, F16_IMPORTS, GUEST_MEMORY, IMPORT_MODULE, RUN_EXPORT, STACK_POINTER,
                                  CpuKernelModule, cpu_kernel_module)
from ..compiler.cpuwork import LEAD_EXPORT
from ..config import KernelConfig
from ..memcopy import copy_bytes
from . import cputhreads
from .context import RuntimeContext
from .cputhreads import (SHARED_PAGES, QueueCalls, Schedule, WorkerStores, chunk_size, cpu_thread_count, host_pool,
                         kernel_calls, mark, pieces, run_piece, thread_count, threaded)
from .engine import first_line

if TYPE_CHECKING:  # pragma: no cover  (type-only: closes no runtime circle)
    from .module import Module

_ELIGIBLE = KernelClass.ELIGIBLE
_TABLE_DTYPE = np.dtype("<u4")


@dataclass(frozen=True)
class CompiledCpuKernel:
    """A kernel's CPU module, compiled by the host's engine."""

    record: CpuKernelModule
    compiled: wasmtime.Module
    compile_seconds: float


def compiled_cpu_kernel(module: Module, kernel: KernelConfig, plan: KernelPlan) -> CompiledCpuKernel | str:
    """The kernel's compiled CPU module, or why it has none; built on first use, kept per module."""
    found = module.cpu_kernels.get(kernel.id)
    if found is not None:
        return found
    made: CompiledCpuKernel | str
    if plan.cls is not _ELIGIBLE:
        made = plan.reason or "the kernel is outside the GPU subset"
    else:
        started = time.perf_counter()
        try:
            shared = SHARED_PAGES if threaded(module.ctx.config) else 0
            record = cpu_kernel_module(module.wasm, kernel, plan, shared)
            made = CompiledCpuKernel(record, wasmtime.Module(module.ctx.engine, record.wasm),
                                     time.perf_counter() - started)
        except CompileError as exc:
            made = exc.message
        except wasmtime.WasmtimeError as exc:  # a backend bug: the guest's runner stays correct
            made = f"CPU kernel did not compile: {first_line(exc)}"
    module.cpu_kernels[kernel.id] = made
    return made


@dataclass(frozen=True)
class CpuRunResult:
    trapped: str  # "" when the kernel ran to the end, else the trap's first line
    seconds: float


class CpuKernelRunner:
    """One guest instance's CPU kernels: an instance of each kernel's CPU module in its store, and
    in each worker store when they run on several threads (cputhreads.py)."""

    def __init__(self, ctx: RuntimeContext, store: wasmtime.Store, accessor: wasmtime.Memory | wasmtime.SharedMemory,
                 guest_memory: Callable[[int], wasmtime.Memory | wasmtime.SharedMemory],
                 guest_global: Callable[[int], object], accessor_export: Callable[[str], object]) -> None:
        self._ctx = ctx
        self._accessor_export = accessor_export
        self._guest_global = guest_global
        self._store = store
        self._accessor = accessor
        self._guest_memory = guest_memory
        self._runs: dict[int, QueueCalls] = {}
        self.threads = cpu_thread_count(ctx.config.cpu_threads)
        self._workers = WorkerStores(ctx.engine, accessor, RUN_EXPORT) \
            if isinstance(accessor, wasmtime.SharedMemory) and self.threads > 1 else None
        self._tags: dict[int, int] = {}  # kernel ID -> its tag in the work queue (cpuwork.py; 0 recalls)
        # A limit that can interrupt any run (limits' call_timeout, fuel): outputs are always kept to restore.
        self._saved = SavedOutputs()
        # What the accessor memory's kernel table (one per instance, rewritten for each kernel) holds:
        # the module record and the bound buffers it was written for, held so that neither identity
        # is reused. A kernel's bound dict is its checked binding set's (host/dispatch.BindingSet), the
        # same object while that set stands and a new one after a bind, a free or close; a buffer's
        # address and length are fixed for its life.
        self._table_for: tuple[CpuKernelModule, dict[int, Buffer]] | None = None
        self._interruptible = ctx.guest_limits.per_call
        # The pool's stores are armed per run only where a limit needs it (GuestLimits.arm).
        self._arm = ctx.guest_limits.arm if self._interruptible else None

    def _run_call(self, kernel: CompiledCpuKernel) -> QueueCalls:
        found = self._runs.get(kernel.record.kernel_id)
        if found is None:
            externs: list[object] = []
            for imp in kernel.compiled.imports:
                assert imp.module == IMPORT_MODULE and imp.name in (GUEST_MEMORY, BUFFER_MEMORY, STACK_POINTER,
                                                                    *F16_IMPORTS)
                if imp.name in F16_IMPORTS:
                    externs.append(self._accessor_export(imp.name))
                elif imp.name == BUFFER_MEMORY:
                    externs.append(self._accessor)
                elif imp.name == GUEST_MEMORY:
                    externs.append(self._guest_memory(kernel.record.guest_memory))
                else:
                    externs.append(self._guest_global(kernel.record.stack_pointer))
            inst = wasmtime.Instance(self._store, kernel.compiled, externs)  # type: ignore[arg-type]
            shared = self._accessor if isinstance(self._accessor, wasmtime.SharedMemory) else None
            driver = host_pool(self._ctx).driver if self._workers is not None and not _alone(kernel.record) else None
            found = self._runs[kernel.record.kernel_id] = kernel_calls(self._store, inst, RUN_EXPORT, driver, shared,
                                                                       LEAD_EXPORT)
        return found

    def run(self, kernel: CompiledCpuKernel, buffers: InstanceBuffers, bound: dict[int, Buffer],
            count: int) -> CpuRunResult:
        """Run the kernel over [0, count) with every bound buffer CPU-current; commit or restore."""
        rec = kernel.record
        calls = self._run_call(kernel)
        started = time.perf_counter()
        mark("begin")
        table_for = self._table_for
        if table_for is None or table_for[0] is not rec or table_for[1] is not bound:
            write_table(buffers, rec, bound)
            self._table_for = (rec, bound)
        saved = self._saved
        if rec.can_trap or self._interruptible:
            saved.save(buffers, rec, bound, count)
        else:
            saved.clear()
        mark("staged")
        stack = self._guest_global(rec.stack_pointer) if rec.stack_pointer >= 0 else None
        stack_at = stack.value(self._store) if isinstance(stack, wasmtime.Global) else None
        n = 1 if _alone(rec) or calls.lead is None else thread_count(count, self.threads)
        trapped = run_piece(calls.run, 0, count) if n == 1 else self._threaded(kernel, buffers, calls, count, n)
        mark("joined")
        if trapped:
            saved.restore(buffers, bound)
            if isinstance(stack, wasmtime.Global):  # a frame the trap left open: the runner starts where the guest was
                stack.set_value(self._store, stack_at)
            mark("end")
            return CpuRunResult(trapped, time.perf_counter() - started)
        for slot in rec.write_slots:
            bound[slot].record.note_cpu_write(0, count)
        mark("end")
        return CpuRunResult("", time.perf_counter() - started)

    def _threaded(self, kernel: CompiledCpuKernel, buffers: InstanceBuffers, calls: QueueCalls, count: int,
                  n: int) -> str:
        """The range on n threads (this one and n - 1 of the Host's pool): the first trap's line or ""."""
        assert self._workers is not None and calls.lead is not None
        pool = host_pool(self._ctx)
        tag = self._tags.setdefault(kernel.record.kernel_id, len(self._tags) + 1)
        with pool.lock:
            self._workers.prepare(pool, tag, kernel.compiled, self._arm)
            mark("ready")
            if cputhreads.SCHEDULE is Schedule.QUEUE:
                return pool.run_queue(self._workers, tag, calls.lead, n, count, chunk_size(count, n), buffers.view(),
                                      once=self._interruptible)
            split = pieces(count, n)
            pool.settle()
            return pool.run([calls.run, *self._workers.runs(min(n, len(split)) - 1, tag)], split)


def _alone(rec: CpuKernelModule) -> bool:
    """What only the guest's own store reaches: its memory (loads, a shadow stack), the accessor's F16 conversions."""
    return rec.guest_memory >= 0 or rec.f16


def write_table(buffers: InstanceBuffers, rec: CpuKernelModule, bound: dict[int, Buffer]) -> None:
    """(address, length) of each used slot's buffer into the accessor memory's kernel table."""
    table = buffers.view()[rec.table_offset:rec.table_offset + 64].view(_TABLE_DTYPE)
    for slot in rec.used_slots:
        buf = bound[slot]
        table[2 * slot] = buf.ptr
        table[2 * slot + 1] = buf.length


def replaced_slots(plan: KernelPlan, bound: dict[int, Buffer], count: int) -> frozenset[int]:
    """Written slots this dispatch replaces whole (KernelPlan.replaces_whole), so a stale CPU copy
    of them need not be read back first."""
    return frozenset(s for s in plan.write_slots if plan.replaces_whole(s, count, bound[s].length))


class SavedOutputs:
    """The bytes a trap must put back: each written buffer's first `count` elements, where its CPU
    copy is current (a stale one, left so by replaced_slots, stays stale on a trap: nothing to
    keep). A buffer at version 1 holds the zeros it was created with (every store is a new
    version: docs/design/abi.md §4), so it is zeroed back instead of kept. The rest go to one
    scratch array kept across runs (a fresh one per run may pay its page faults every time) by
    memcopy's copies, split over threads when large."""

    def __init__(self) -> None:
        self._scratch = np.empty(0, np.uint8)
        self.kept: list[tuple[int, int, int]] = []  # (slot, offset in the scratch or -1 for zeros, bytes)

    def save(self, buffers: InstanceBuffers, rec: CpuKernelModule, bound: dict[int, Buffer], count: int) -> None:
        self.kept = []
        total = 0
        for s in rec.write_slots:
            record = bound[s].record
            if record.flags & CPU_CURRENT:
                size = count * bound[s].stored_bytes
                fresh = record.version == 1
                self.kept.append((s, -1 if fresh else total, size))
                total += 0 if fresh else size
        if total > self._scratch.size:
            self._scratch = np.empty(total, np.uint8)
        base = self._scratch.ctypes.data
        for s, offset, size in self.kept:
            if offset >= 0:
                copy_bytes(base + offset, buffers.cpu_address(bound[s]), size)

    def restore(self, buffers: InstanceBuffers, bound: dict[int, Buffer]) -> None:
        base = self._scratch.ctypes.data
        for s, offset, size in self.kept:
            if offset < 0:
                buffers.cpu_bytes(bound[s])[:size] = 0
            else:
                copy_bytes(buffers.cpu_address(bound[s]), base + offset, size)

    def clear(self) -> None:
        self.kept = []
