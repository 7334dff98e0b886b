"""Instance: one instantiated guest with its buffers (DESIGN.md public surface).

Ownership: each Instance owns a Store holding the guest and its accessor module (so Wasm->Wasm
scalar calls stay inside one store), the accessor memory (made here and imported by the accessor
module, so the buffer table exists before anything can call back into it) and the InstanceBuffers
charged to it; Instance.close() frees those.

Construction order, each part complete when made: store and accessor memory -> buffers -> the
import groups over them -> the accessor instance (its hooks are those groups) -> the guest, linked
to the accessor's scalar exports and to the groups' host functions, start function last.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from functools import partial
from typing import Any, Callable

import numpy as np
import wasmtime

from ..abi import accessor as acc
from ..abi.table import ABI_MODULE, GC_IMPORTS, IMPORTS, LEGACY_IMPORTS, LEGACY_MODULE, SCALAR_IMPORTS
from ..buffers import AccessorMemory, InstanceBuffers, view_at
from ..errors import ModuleError
from ._wasmtime import export_call, host_func, memory_span
from .calls import Handlers, ImportScope, guarded
from .context import RuntimeContext
from .dispatch import DispatchImport
from .engine import Extern, first_line, functype
from .hooks import AccessorHooks
from .legacy import LegacyRunner
from .management import ManagementImports
from .memexports import memory_export_name
from .module import Module
from .transfers import TransferImports

_ids = itertools.count(1)
ACCESSOR_PAGES = 1  # the accessor memory's initial size; it grows as buffers are created
_ACCESSOR_SERVED = frozenset(SCALAR_IMPORTS) | frozenset(GC_IMPORTS)


def next_id() -> int:
    """Module and instance IDs share one process-wide sequence."""
    return next(_ids)


class Instance:
    """One instantiated guest with its buffers; not safe to call from two threads at once."""

    def __init__(self, ctx: RuntimeContext, module: Module):
        self.ctx = ctx
        self.module = module
        self.id = next_id()
        self.closed = False
        self._store = wasmtime.Store(ctx.engine)
        self._calls: dict[str, Callable[..., Any]] = {}
        self._exports: Mapping[str, Extern] = {}
        memory = wasmtime.Memory(self._store, wasmtime.MemoryType(wasmtime.Limits(ACCESSOR_PAGES, None)))
        self.buffers = InstanceBuffers(
            self.id, AccessorMemory(partial(memory_span, memory, self._store), partial(memory.grow, self._store)),
            ctx.budget, ctx.limits, ctx.residency)
        scope = self._scope = ImportScope(ctx, module, self.buffers)
        hooks = AccessorHooks(scope)
        handlers: Handlers = {}
        for group in (ManagementImports(scope), DispatchImport(scope), TransferImports(scope)):
            handlers.update(group.handlers())
        accessor = self._accessor_instance(scope, hooks, memory)
        linker = self._linker(scope, accessor.exports(self._store), handlers, LegacyRunner(ctx, module).handlers())
        with ctx.lock:
            ctx.instances[self.id] = self
        self._instantiate(linker)

    def _accessor_instance(self, scope: ImportScope, hooks: AccessorHooks, memory: wasmtime.Memory) -> wasmtime.Instance:
        """The accessor module, its hooks served by this instance's groups (in its import order)."""
        fns = {"trap": hooks.trap, **{name: guarded(scope, name, fn) for name, (fn, _) in hooks.handlers().items()}}
        externs: list[Extern] = [host_func(self._store, functype(*acc.HOOK_SIGNATURES[name]), fns[name])
                              for name in acc.HOOK_SIGNATURES]
        return wasmtime.Instance(self._store, self.ctx.accessor, [*externs, memory])

    def _linker(self, scope: ImportScope, accessor_exports: Mapping[str, Extern], handlers: Handlers,
                legacy: Handlers) -> wasmtime.Linker:
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
        if any(imp.module.startswith("wasi") for imp in self.module.compiled.imports):
            wasi = wasmtime.WasiConfig()
            wasi.inherit_stdout()
            wasi.inherit_stderr()
            store.set_wasi(wasi)
            linker.define_wasi()
        return linker

    def _instantiate(self, linker: wasmtime.Linker) -> None:
        """Run the guest's start function; a failure closes this instance before it propagates."""
        try:
            guest = linker.instantiate(self._store, self.module.compiled)
        except wasmtime.Trap:
            self.close()
            raise
        except wasmtime.WasmtimeError as exc:
            self.close()
            if "wasm backtrace" in str(exc):
                raise  # the start function failed: keep wasmtime's own error
            raise ModuleError(f"cannot instantiate: {first_line(exc)}") from exc
        except BaseException:
            self.close()
            raise
        self._exports = guest.exports(self._store)
        self._scope.guest_memory = self._guest_memory_span

    @property
    def store(self) -> wasmtime.Store:
        """The wasmtime Store holding this guest (for embedding with wasmtime-py's own API)."""
        return self._store

    @property
    def exports(self) -> Mapping[str, Extern]:
        """The guest's exports (wasmtime-py's view), including the host's memory exports."""
        return self._exports

    def call(self, name: str, *args: Any) -> Any:
        """Call an exported function: None, one scalar, or a list of results."""
        fast = self._calls.get(name)
        if fast is None:
            if self.closed:
                raise KeyError("instance is closed")
            func = self._exports.get(name)
            if not isinstance(func, wasmtime.Func):
                raise KeyError(f"no exported function {name!r}")
            fast = self._calls[name] = export_call(func, self._store)
        return fast(*args)

    def _guest_memory_span(self, index: int) -> tuple[int, int] | None:
        """Where guest memory `index` is now, for a kernel's memory snapshot (None: none such)."""
        try:
            return memory_span(self._memory(index), self._store)
        except (IndexError, ValueError):
            return None

    def _memory(self, index: int) -> wasmtime.Memory | wasmtime.SharedMemory:
        if self.closed:
            raise ValueError("instance is closed")
        mem = self._exports.get(memory_export_name(index)) if 0 <= index < self.module.memory_count else None
        if not isinstance(mem, (wasmtime.Memory, wasmtime.SharedMemory)):
            raise IndexError(f"module has no memory {index}")
        return mem

    def memory_view(self, memory: int = 0) -> np.ndarray:
        """Zero-copy uint8 view of a guest memory; invalid after the memory grows."""
        return view_at(*memory_span(self._memory(memory), self._store))

    def read_memory(self, offset: int, size: int, memory: int = 0) -> bytes:
        view = self.memory_view(memory)
        if offset < 0 or size < 0 or offset + size > view.size:
            raise IndexError(f"range [{offset}, {offset + size}) outside memory {memory}")
        return view[offset:offset + size].tobytes()

    def write_memory(self, offset: int, data: bytes, memory: int = 0) -> None:
        view = self.memory_view(memory)
        data = bytes(data)
        if offset < 0 or offset + len(data) > view.size:
            raise IndexError(f"range [{offset}, {offset + len(data)}) outside memory {memory}")
        view[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def close(self) -> None:
        """Free the buffers and the wasmtime Store; idempotent. The Store is deleted now rather
        than at interpreter shutdown, where wasmtime-py's finalizers may already be gone."""
        with self.ctx.lock:
            self.buffers.close()
            self.ctx.instances.pop(self.id, None)
            self.closed = True
            self._calls = {}
            self._exports = {}
            self._store.close()

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
