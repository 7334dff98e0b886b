"""Crossing between Python and Wasm through wasmtime-py's public API only.

The fallback of the fast path in _wasmtime.py (used when the installed wasmtime-py is not the
tested version, or WAGOGPU_PUBLIC_WASMTIME=1), and its shape: both hand host functions a
GuestCaller and call exports through a callable with the same argument check and results.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import wasmtime


@dataclass(frozen=True)
class GuestMemory:
    """A non-shared guest memory found through the calling instance: ``handle`` is what the
    caller's memory_span takes, ``is64`` its address width. ``memory`` keeps the wasmtime.Memory
    alive (the fast path's handle points into it; it is valid for the store's life)."""

    handle: Any
    is64: bool
    memory: wasmtime.Memory


class GuestCaller(Protocol):
    """The instance calling an import, valid only during that call."""

    def get(self, name: str) -> Any: ...

    def memory(self, name: str) -> GuestMemory | None: ...

    def memory_span(self, handle: Any) -> tuple[int, int]: ...


class PublicCall:
    """Calls one exported function with wasmtime-py's Func.__call__."""

    __slots__ = ("_func", "_store", "_n")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store):
        self._func = func
        self._store = store
        self._n = len(func.type(store).params)

    def __call__(self, *args: Any) -> Any:
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        return self._func(self._store, *args)


class PublicCaller:
    """A GuestCaller over wasmtime-py's Caller, valid only during the import's call."""

    __slots__ = ("_caller",)

    def __init__(self, caller: wasmtime.Caller) -> None:
        self._caller: wasmtime.Caller | None = caller

    def invalidate(self) -> None:
        self._caller = None

    def _live(self) -> wasmtime.Caller:
        if self._caller is None:
            raise ValueError("the caller is gone (used after its import returned)")
        return self._caller

    def get(self, name: str) -> Any:
        return self._live().get(name)

    def memory(self, name: str) -> GuestMemory | None:
        return find_memory(self._live(), name, lambda memory: memory)

    def memory_span(self, handle: Any) -> tuple[int, int]:
        return public_memory_span(handle, self._live())


def find_memory(caller: wasmtime.Caller, name: str, handle_of: Callable[[wasmtime.Memory], Any]) -> GuestMemory | None:
    """The calling instance's export `name` as a GuestMemory, if it is a non-shared memory."""
    found = caller.get(name)
    if not isinstance(found, wasmtime.Memory):
        return None
    return GuestMemory(handle_of(found), found.type(caller).is_64, found)


def public_host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Callable[..., Any],
                     access_caller: bool) -> wasmtime.Func:
    if not access_caller:
        return wasmtime.Func(store, ftype, fn)

    def with_caller(caller: wasmtime.Caller, *args: Any) -> Any:
        guest = PublicCaller(caller)
        try:
            return fn(guest, *args)
        finally:
            guest.invalidate()

    return wasmtime.Func(store, ftype, with_caller, access_caller=True)


def public_memory_span(memory: wasmtime.Memory | wasmtime.SharedMemory,
                       store: wasmtime.Store | wasmtime.Caller) -> tuple[int, int]:
    """(address, byte length) of a memory, valid until it grows."""
    if isinstance(memory, wasmtime.SharedMemory):
        size = memory.data_len()
        return (ctypes.addressof(memory.data_ptr().contents) if size else 0), size
    size = memory.data_len(store)
    return (ctypes.addressof(memory.data_ptr(store).contents) if size else 0), size
