"""Crossing between Python and Wasm through wasmtime-py's public API only.

The fallback of the fast path in _wasmtime.py (used when the installed wasmtime-py is not the
tested version, or WAGOGPU_PUBLIC_WASMTIME=1), and its shape: both hand host functions a
GuestCaller and call exports through a callable with the same argument check and results.
"""
from __future__ import annotations

import ctypes
import operator
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

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


class _Relay(threading.local):
    """The exception a host function raised, on its way out of the call that ran it: one slot per
    thread (wasmtime-py's own relay is one process-wide global, so under threads an exception came
    out of whichever call looked first). A call takes it right after the guest returns, on the
    thread that ran the host function; nested calls take theirs before an outer host function
    returns, so one slot per thread is enough."""

    exc: BaseException | None = None


_RELAY = _Relay()


#: The attribute a relayed exception carries: the thread whose host function raised it.
RELAYED_BY = "_wagogpu_relayed_by"


def relay(exc: BaseException) -> None:
    """Keep the exception a host function raised for the call that ran it (this thread's)."""
    _RELAY.exc = exc
    try:
        setattr(exc, RELAYED_BY, threading.get_ident())
    except AttributeError:  # pragma: no cover - an exception type without a __dict__
        pass


def take_relayed() -> BaseException | None:
    """This thread's relayed exception, if a host function raised one during the call (cleared)."""
    exc = _RELAY.exc
    if exc is not None:
        _RELAY.exc = None
    return exc


#: (lowest, highest) value an integer parameter takes: its signed and its unsigned spellings, as
#: wasmtime-py takes them (it would truncate anything beyond; the host refuses it).
INT_RANGES = {"i32": (-(1 << 31), (1 << 32) - 1), "i64": (-(1 << 63), (1 << 64) - 1)}


def argument_error(name: str, kinds: Sequence[str], args: Sequence[Any]) -> Exception:
    """The first argument that does not fit its parameter, as a one-line TypeError or ValueError."""
    for i, (kind, value) in enumerate(zip(kinds, args)):
        where = f"{name or 'call'}: argument {i + 1} ({kind})"
        if kind in INT_RANGES:
            try:
                number = operator.index(value)
            except TypeError:
                return TypeError(f"{where} must be an integer, got {type(value).__name__}")
            low, high = INT_RANGES[kind]
            if not low <= number <= high:
                return ValueError(f"{where} is {number}, outside {low}..{high}")
        elif kind in ("f32", "f64") and not isinstance(value, (int, float)):
            try:
                float(value)
            except (TypeError, ValueError):
                return TypeError(f"{where} must be a number, got {type(value).__name__}")
    return TypeError(f"{name or 'call'}: arguments {args!r} do not fit ({', '.join(kinds)})")


def check_arguments(name: str, kinds: Sequence[str], args: Sequence[Any]) -> None:
    """Raise argument_error unless every integer argument fits its parameter."""
    for kind, value in zip(kinds, args):
        bounds = INT_RANGES.get(kind)
        if bounds is not None:
            try:
                fits = bounds[0] <= operator.index(value) <= bounds[1]
            except TypeError:
                fits = False
            if not fits:
                raise argument_error(name, kinds, args)


#: Value kinds Python cannot hand to or take from a call: wasmtime-py has no v128 values, and its
#: runtime aborts the whole process on one (a panic, not an exception).
NO_PYTHON_VALUE = frozenset({"v128"})


def refuse_unpassable(what: str, params: Sequence[str], results: Sequence[str]) -> None:
    """TypeError (one line) when a signature has a value Python cannot pass or receive."""
    for side, kinds in (("parameter", params), ("result", results)):
        for i, kind in enumerate(kinds):
            if kind in NO_PYTHON_VALUE:
                raise TypeError(f"{what}: {kind} {side} {i + 1} cannot cross to Python (wasmtime-py has no "
                                f"{kind} values); call it from Wasm, or export a wrapper with scalar values")


class PublicCall:
    """Calls one exported function with wasmtime-py's Func.__call__."""

    __slots__ = ("_func", "_store", "_n", "_name", "_kinds")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store, name: str = ""):
        self._func = func
        self._store = store
        self._name = name
        self._kinds = [str(t) for t in func.type(store).params]  # export_call refused v128 first
        self._n = len(self._kinds)

    def __call__(self, *args: Any) -> Any:
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        check_arguments(self._name, self._kinds, args)
        try:
            return self._func(self._store, *args)
        except BaseException as exc:
            own = take_relayed()  # what this thread's host function raised, not another thread's
            if own is not None and own is not exc:
                raise own from None
            if own is None and getattr(exc, RELAYED_BY, None) not in (None, threading.get_ident()):
                # wasmtime-py's process-wide slot handed this call another thread's exception in
                # place of its own trap, whose message it dropped: say so rather than raise theirs.
                raise wasmtime.Trap("wasm trap (its message was displaced by another thread's host-function "
                                    "exception in wasmtime-py's process-wide relay)") from None
            raise


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


def relaying(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, relaying what it raises per thread (for a function wasmtime-py's own Func calls)."""
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except BaseException as exc:
            relay(exc)
            raise

    return call


def public_host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Callable[..., Any],
                     access_caller: bool) -> wasmtime.Func:
    """A host function through wasmtime-py's Func; what it raises is also relayed per thread."""
    if not access_caller:
        return wasmtime.Func(store, ftype, relaying(fn))

    def with_caller(caller: wasmtime.Caller, *args: Any) -> Any:
        guest = PublicCaller(caller)
        try:
            return fn(guest, *args)
        finally:
            guest.invalidate()

    return wasmtime.Func(store, ftype, relaying(with_caller), access_caller=True)


def public_memory_span(memory: wasmtime.Memory | wasmtime.SharedMemory,
                       store: wasmtime.Store | wasmtime.Caller) -> tuple[int, int]:
    """(address, byte length) of a memory, valid until it grows."""
    if isinstance(memory, wasmtime.SharedMemory):
        size = memory.data_len()
        return (ctypes.addressof(memory.data_ptr().contents) if size else 0), size
    size = memory.data_len(store)
    return (ctypes.addressof(memory.data_ptr(store).contents) if size else 0), size
