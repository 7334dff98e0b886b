"""Instance: one instantiated guest with its buffers (DESIGN.md public surface).

Ownership: each Instance owns a Store holding the guest and its accessor module (so Wasm->Wasm
scalar calls stay inside one store), the accessor memory (made here and imported by the accessor
module, so the buffer table exists before anything can call back into it) and the InstanceBuffers
charged to it; Instance.close() frees those.

Construction order, each part complete when made: store (and its WASI context) and accessor
memory -> buffers -> the import groups over them -> the accessor instance (its hooks are those
groups) -> the guest, linked to the accessor's scalar exports, to the groups' host functions and to
the host's own functions (Host.define_func), start function last.

Closing while a call into the guest is under way (from a host function, or from another thread)
marks the instance closed and frees its buffers at once, but deletes the Store only when the
outermost Instance.call returns: deleting it under running Wasm crashes the process.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable

import numpy as np
import wasmtime

from ..abi import accessor as acc
from ..abi.table import ABI_MODULE, GC_IMPORTS, IMPORTS, LEGACY_IMPORTS, LEGACY_MODULE, SCALAR_IMPORTS
from ..buffers import AccessorMemory, InstanceBuffers, view_at
from ..errors import ModuleError
from ._wasmtime import SharedMemory, export_call, host_func, memory_span, own_memory
from .access import BufferAccess
from .calls import Handlers, ImportScope, guarded
from .context import RuntimeContext
from .dispatch import DispatchImport
from .engine import Extern, first_line, functype
from .exports import GuestExports
from .hooks import AccessorHooks
from .legacy import LegacyRunner
from .cpukernels import CpuKernelRunner
from .cputhreads import SHARED_PAGES, threaded
from .management import ManagementImports
from .memexports import global_export_name, memory_export_name
from .module import Module
from .transfers import TransferImports
from .wasi import set_wasi

_ids = itertools.count(1)
ACCESSOR_PAGES = 1  # the accessor memory's initial size; it grows as buffers are created
_ACCESSOR_SERVED = frozenset(SCALAR_IMPORTS) | frozenset(GC_IMPORTS)
_NO_EXPORTS: Mapping[str, Extern] = {}


def next_id() -> int:
    """Module and instance IDs share one process-wide sequence."""
    return next(_ids)


class Instance:
    """One instantiated guest with its buffers; not safe to call from two threads at once."""

    def __init__(self, ctx: RuntimeContext, module: Module, wasi: wasmtime.WasiConfig | None = None):
        self.ctx = ctx
        self.module = module
        self.id = next_id()
        self.closed = False
        self._depth = 0  # calls into the guest under way (Instance.call, the start function)
        self._released = False  # the Store is closed (once, whoever gets there first)
        self._store = wasmtime.Store(ctx.engine)
        self._calls: dict[str, Callable[..., Any]] = {}
        self._exports: GuestExports | None = None
        try:
            with_wasi = set_wasi(self._store, wasi, module)
        except BaseException:
            self._store.close()
            raise
        memory = self._accessor_memory = self._new_accessor_memory()
        limits = ctx.guest_limits
        self._limits = limits if limits.per_call else None
        if limits.stores_limited:  # (after the accessor memory: it is the host's, not the guest's)
            limits.restrict(self._store)
        grow: Callable[[int], object]
        if isinstance(memory, wasmtime.SharedMemory):  # the engine's: outside the store limits
            grow = memory.grow
        else:
            grow = limits.host_grow(self._store, partial(memory.grow, self._store))
        self.buffers = InstanceBuffers(
            self.id, AccessorMemory(partial(memory_span, memory, self._store), grow),
            ctx.budget, ctx.limits, ctx.residency)
        scope = self._scope = ImportScope(ctx, module, self.buffers)
        self._access = BufferAccess(scope)
        hooks = self._hooks = AccessorHooks(scope, interruptible=limits.per_call)
        handlers: Handlers = {}
        for group in (ManagementImports(scope), DispatchImport(scope), TransferImports(scope)):
            handlers.update(group.handlers())
        accessor = self._accessor_instance(scope, hooks, memory)
        linker = self._linker(scope, accessor.exports(self._store), handlers, LegacyRunner(scope).handlers(),
                              with_wasi)
        if ctx.config.cpu_kernels:  # from the start function on; guest-memory kernels once exports exist
            scope.cpu_kernels = CpuKernelRunner(ctx, self._store, memory, self._memory,
                                                lambda index: self.exports.get(global_export_name(index)),
                                                lambda name: accessor.exports(self._store)[name])
        with ctx.lock:
            ctx.instances[self.id] = self
        self._instantiate(linker)

    def _new_accessor_memory(self) -> wasmtime.Memory | wasmtime.SharedMemory:
        """The accessor memory: shared when CPU kernels run on several threads (cputhreads.py)."""
        if threaded(self.ctx.config):
            return SharedMemory(self.ctx.engine, wasmtime.MemoryType(
                wasmtime.Limits(ACCESSOR_PAGES, SHARED_PAGES), shared=True))
        return wasmtime.Memory(self._store, wasmtime.MemoryType(wasmtime.Limits(ACCESSOR_PAGES, None)))

    def _accessor_instance(self, scope: ImportScope, hooks: AccessorHooks,
                           memory: wasmtime.Memory | wasmtime.SharedMemory) -> wasmtime.Instance:
        """The accessor module, its hooks served by this instance's groups (in its import order)."""
        fns = {"trap": hooks.trap, **{name: guarded(scope, name, fn) for name, (fn, _) in hooks.handlers().items()}}
        externs: list[Extern] = [host_func(self._store, functype(*acc.HOOK_SIGNATURES[name]), fns[name])
                                 for name in acc.HOOK_SIGNATURES]
        return wasmtime.Instance(self._store, self.ctx.accessor, [*externs, memory])

    def _linker(self, scope: ImportScope, accessor_exports: Mapping[str, Extern], handlers: Handlers,
                legacy: Handlers, with_wasi: bool) -> wasmtime.Linker:
        store = self._store
        linker = wasmtime.Linker(self.ctx.engine)
        for spec in IMPORTS:
            if spec.name in _ACCESSOR_SERVED:
                linker.define(store, ABI_MODULE, spec.name, accessor_exports[spec.name])
                continue
            fn, takes_caller = handlers[spec.name]
            linker.define(store, ABI_MODULE, spec.name, host_func(
                store, functype(spec.params, spec.results), guarded(scope, spec.name, fn), access_caller=takes_caller))
        for spec in LEGACY_IMPORTS:
            fn, takes_caller = legacy[spec.name]
            linker.define(store, LEGACY_MODULE, spec.name, host_func(
                store, functype(spec.params, spec.results), guarded(scope, spec.name, fn), access_caller=takes_caller))
        if with_wasi:
            linker.define_wasi()
        self.ctx.definitions.define(linker, store)
        return linker

    def _instantiate(self, linker: wasmtime.Linker) -> None:
        """Run the guest's start function; a failure closes this instance before it propagates."""
        self._depth += 1
        if self._limits is not None:
            self._limits.arm(self._store)
        try:
            guest = linker.instantiate(self._store, self.module.compiled)
        except BaseException as exc:
            self._depth -= 1
            limited = self._limited(exc, "the start function") if isinstance(exc, wasmtime.Trap) else exc
            self.close()
            if isinstance(exc, wasmtime.WasmtimeError) and "wasm backtrace" not in str(exc):
                text = self.ctx.guest_limits.refusal(link_problem(exc))
                raise ModuleError(f"cannot instantiate: {text}") from exc
            if limited is not exc:
                raise limited from None
            raise  # a trap, or the start function failing: keep wasmtime's own error
        self._depth -= 1
        if self.closed:  # closed by a host function during the start function
            self._release_store()
            return
        self._exports = GuestExports(linker, self._store, guest, self.module.compiled)
        store = self._store
        self._scope.own_memory = lambda name: own_memory(self._host_export(name), store)
        self._scope.guest_memory = self._guest_memory_span

    @property
    def store(self) -> wasmtime.Store:
        """The wasmtime Store holding this guest (for embedding with wasmtime-py's own API)."""
        return self._store

    @property
    def exports(self) -> Mapping[str, Extern]:
        """The guest's exports (wasmtime-py's view, each read on first use), without the memory
        exports the host adds for itself; empty once the instance is closed."""
        return self._exports if self._exports is not None and not self.closed else _NO_EXPORTS

    def _host_export(self, name: str) -> Extern | None:
        """An export by name, the host's memory exports included (None: none, or the instance closed)."""
        if self._exports is None or self.closed:
            return None
        try:
            return self._exports.lookup(name)
        except KeyError:
            return None

    def call(self, name: str, *args: Any) -> Any:
        """Call an exported function: None, one scalar, or a list of results. Integer arguments
        must fit their parameter, signed or unsigned (ValueError otherwise)."""
        self._depth += 1  # before anything reaches into the Store (close() defers to it)
        try:
            if self.closed:  # after the count: a close() from another thread either sees it or is seen here
                raise ValueError(f"instance {self.id} is closed")
            fast = self._calls.get(name)
            if fast is None:
                fast = self._resolve(name)
            if self._limits is not None and self._depth == 1:  # a re-entry shares the outer call's budget
                self._limits.arm(self._store)
            return fast(*args)
        except wasmtime.Trap as exc:
            limited = self._limited(exc, name)
            if limited is exc:
                raise
            raise limited from None
        finally:
            self._depth -= 1
            if self.closed and not self._depth:
                self._release_store()

    def _limited(self, exc: wasmtime.Trap, what: str) -> wasmtime.Trap:
        """exc, or the LimitTrap naming the limit that stopped the call; a GC transfer the limit cut
        short (the only accessor code with a loop) is finished first (hooks.py)."""
        if self._limits is None:
            return exc
        limited = self._limits.translate(exc, what)
        if limited is not exc:
            with self.ctx.lock:
                self._hooks.interrupted()
        return limited

    def _resolve(self, name: str) -> Callable[..., Any]:
        self._check_open()
        func = self.exports.get(name)
        if not isinstance(func, wasmtime.Func):
            self._check_open()  # closed meanwhile (another thread): say so, not 'no such export'
            raise KeyError(f"no exported function {name!r}")
        fast = self._calls[name] = export_call(func, self._store, name)
        return fast

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"instance {self.id} is closed")

    def _guest_memory_span(self, index: int) -> tuple[int, int] | None:
        """Where guest memory `index` is now, for a kernel's memory snapshot (None: none such)."""
        try:
            return memory_span(self._memory(index), self._store)
        except (IndexError, ValueError):
            return None

    def _memory(self, index: int) -> wasmtime.Memory | wasmtime.SharedMemory:
        self._check_open()
        mem = self._host_export(memory_export_name(index)) if 0 <= index < self.module.memory_count else None
        if not isinstance(mem, (wasmtime.Memory, wasmtime.SharedMemory)):
            raise IndexError(f"module has no memory {index}")
        return mem

    def memory_view(self, memory: int = 0) -> np.ndarray:
        """Zero-copy uint8 view of a guest memory; invalid after the memory grows or the instance
        closes (read_memory and write_memory are safe against a close from another thread)."""
        return view_at(*memory_span(self._memory(memory), self._store))

    def read_memory(self, offset: int, size: int, memory: int = 0) -> bytes:
        with self._in_store():
            view = self.memory_view(memory)
            if offset < 0 or size < 0 or offset + size > view.size:
                raise IndexError(f"range [{offset}, {offset + size}) outside memory {memory}")
            return view[offset:offset + size].tobytes()

    def write_memory(self, offset: int, data: bytes, memory: int = 0) -> None:
        data = bytes(data)
        with self._in_store():
            view = self.memory_view(memory)
            if offset < 0 or offset + len(data) > view.size:
                raise IndexError(f"range [{offset}, {offset + len(data)}) outside memory {memory}")
            view[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    @contextmanager
    def _in_store(self) -> Iterator[None]:
        """Hold the Store open like a call does (a close() from another thread waits for the end)."""
        self._depth += 1
        try:
            self._check_open()
            yield
        finally:
            self._depth -= 1
            if self.closed and not self._depth:
                self._release_store()

    # -- the plugin's buffers, from the host (access.py) ----------------------------------------------
    def read_buffer(self, handle: int) -> np.ndarray:
        """A copy of buffer `handle`'s contents (dtype of its element type; F16 as float16), read
        back from the device when only it holds them; ValueError naming the ABI status if refused."""
        self._check_open()
        return self._access.read(handle)

    def write_buffer(self, handle: int, values: Any, offset: int = 0) -> None:
        """Write values (one-dimensional, fitting the element type) into buffer `handle` from element
        `offset`: a committed CPU write, as the guest's setBuffer32 makes one; ValueError naming the
        ABI status if refused."""
        self._check_open()
        self._access.write(handle, values, offset)

    def close(self) -> None:
        """Free the buffers and the wasmtime Store; idempotent. The Store is deleted now rather
        than at interpreter shutdown, where wasmtime-py's finalizers may already be gone (or, when a
        call is under way, as soon as the outermost one returns)."""
        with self.ctx.lock:
            self.buffers.close()
            self.ctx.instances.pop(self.id, None)
            self.closed = True
            self._calls = {}
            if not self._depth:
                self._release_store()

    def _release_store(self) -> None:
        """Once: close() and the outermost call returning may both get here (threads)."""
        with self.ctx.lock:
            if self._released:
                return
            self._released = True
        if self._exports is not None:
            self._exports.close()
        self._scope.own_memory = None
        self._scope.memories.clear()
        self._store.close()

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def link_problem(exc: wasmtime.WasmtimeError) -> str:
    """wasmtime's link error in one line, with what to do about an import nobody defined."""
    text = first_line(exc)
    if "unknown import" in text:
        text += " (define it with Host.define_func before instantiating)"
    return text
