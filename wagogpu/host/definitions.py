"""The host's own imports: functions a Python program defines for its guests (Host.define_func).

They mean what wasmtime-py's ``Linker.define_func`` means: a guest importing ``module::name`` with
that type gets ``func``, called with a ``wasmtime.Caller`` first when ``access_caller``; a Python
exception it raises comes back to the export's caller as itself. A definition applies to every
instance made after it, and defining the same name twice is an error, as in a Linker.

The plugin's own modules are refused: ``wago_gpu_v1`` and ``wago_gpu`` are the ABI (a guest's
statuses and the buffer guarantees rest on the host serving them), ``wagogpu`` is the accessor
module's hook namespace and ``wagogpu:*`` names are the host's internal exports. A definition under
a WASI module replaces that WASI function for the instances that get WASI.

The type is copied per Host: wasmtime ties a FuncType to the first engine that uses it and aborts
the process when a second engine uses it, so one FuncType given to two Hosts would crash.

Host functions run outside the host lock (the lock guards only the plugin's own imports), so one
may call back into its instance's imports, block on another thread that takes the lock, or read
snapshots; closing the instance from inside one is deferred until the outermost call returns
(Instance.close).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable

import wasmtime

from ..abi.accessor import HOOK_MODULE
from ..abi.table import ABI_MODULE, LEGACY_MODULE
from ._wasmtime import host_func, value_kinds
from .public_path import refuse_unpassable, relaying

#: Modules that belong to the plugin: no host function may be defined under them.
RESERVED_MODULES = frozenset({ABI_MODULE, LEGACY_MODULE, HOOK_MODULE})
RESERVED_PREFIX = "wagogpu:"


@dataclass(frozen=True)
class HostFunction:
    """One Host.define_func call, kept until the host closes."""

    module: str
    name: str
    type: wasmtime.FuncType
    func: Callable[..., Any]
    access_caller: bool

    def make(self, store: wasmtime.Store) -> wasmtime.Func:
        """The function in one instance's store. With a Caller, wasmtime-py's own Func (the caller
        is a real wasmtime.Caller); without one, the host's fast crossing (same meaning). Either
        way what it raises comes out of the call on its own thread (relayed per thread)."""
        if self.access_caller:
            return wasmtime.Func(store, self.type, relaying(self.func), access_caller=True)
        return host_func(store, self.type, self.func)


def reserved_reason(module: str) -> str:
    """Why no host function may be defined under module ("" when one may)."""
    if module == ABI_MODULE:
        return "is the wago_gpu_v1 buffer ABI, served by the plugin"
    if module == LEGACY_MODULE:
        return "is the legacy wago_gpu ABI, served by the plugin"
    if module in RESERVED_MODULES or module.startswith(RESERVED_PREFIX):
        return "is internal to the plugin"
    return ""


class HostDefinitions:
    """The host functions of one Host, by (module, name), in definition order."""

    def __init__(self) -> None:
        self._by_name: dict[tuple[str, str], HostFunction] = {}

    def add(self, module: str, name: str, ty: wasmtime.FuncType, func: Callable[..., Any],
            access_caller: bool = False) -> HostFunction:
        """Check and keep one definition; ValueError or TypeError (one line) when it cannot be."""
        for what, value in (("module", module), ("name", name)):
            if not isinstance(value, str):
                raise TypeError(f"define_func: {what} must be a str, got {type(value).__name__}")
        if not isinstance(ty, wasmtime.FuncType):
            raise TypeError(f"define_func: ty must be a wasmtime.FuncType, got {type(ty).__name__}")
        refuse_unpassable(f"define_func: {module}::{name}", value_kinds(ty.params), value_kinds(ty.results))
        if not callable(func):
            raise TypeError(f"define_func: func must be callable, got {type(func).__name__}")
        if not isinstance(access_caller, bool):
            raise TypeError(f"define_func: access_caller must be a bool, got {access_caller!r}")
        why = reserved_reason(module)
        if why:
            raise ValueError(f"define_func: module {module!r} {why}; define host functions under another module")
        if (module, name) in self._by_name:
            raise ValueError(f"define_func: {module}::{name} is already defined")
        # A copy of the type: wasmtime binds a FuncType to the first engine that uses it and aborts
        # the process when another engine does, and each Host has its own engine.
        own_type = wasmtime.FuncType(list(ty.params), list(ty.results))
        defined = self._by_name[(module, name)] = HostFunction(module, name, own_type, func, access_caller)
        return defined

    def __iter__(self) -> Iterator[HostFunction]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def define(self, linker: wasmtime.Linker, store: wasmtime.Store) -> None:
        """Put every definition into one instance's linker (replacing a WASI function of that name)."""
        if not self._by_name:
            return
        linker.allow_shadowing = True
        try:
            for f in self._by_name.values():
                linker.define(store, f.module, f.name, f.make(store))
        finally:
            linker.allow_shadowing = False
