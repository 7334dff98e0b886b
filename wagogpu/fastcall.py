"""Calling a Wasm export from Python without wasmtime-py's per-call type introspection.

wasmtime-py's Func.__call__ rebuilds the function's type, converts each value through Val objects
and costs about 30 us here; the native call itself is a few us. For numeric signatures this
caller looks the type up once and reuses its raw value arrays (a call is not re-entrant per
function, and an Instance is not for use by two threads at once). Other signatures use the
ordinary path.
"""
from __future__ import annotations

import ctypes
from typing import Any

import wasmtime
import wasmtime._func as _wfunc
from wasmtime import _ffi as ffi

_func_call = ffi.wasmtime_func_call
_KINDS = {"i32": (ffi.WASMTIME_I32.value, "i32"), "i64": (ffi.WASMTIME_I64.value, "i64"),
          "f32": (ffi.WASMTIME_F32.value, "f32"), "f64": (ffi.WASMTIME_F64.value, "f64")}


class FastCall:
    __slots__ = ("_func", "_store", "_params", "_fields", "_results", "_result_fields", "_fallback", "_n", "_m",
                 "_setters", "_call_args", "_trap")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store):
        self._func = func
        self._store = store
        ftype = func.type(store)
        names = [str(t) for t in ftype.params]
        result_names = [str(t) for t in ftype.results]
        self._fallback = not all(n in _KINDS for n in names + result_names)
        self._n, self._m = len(names), len(result_names)
        self._params = (ffi.wasmtime_val_t * max(1, self._n))()
        self._results = (ffi.wasmtime_val_t * max(1, self._m))()
        self._fields = [_KINDS[n][1] if n in _KINDS else "" for n in names]
        self._result_fields = [_KINDS[n][1] if n in _KINDS else "" for n in result_names]
        for i, n in enumerate(names):
            if n in _KINDS:
                self._params[i].kind = _KINDS[n][0]
        # Reused per call: the union of each parameter slot, and the native call's argument tuple.
        self._setters = [(self._params[i].of, f) for i, f in enumerate(self._fields)]
        self._trap = ctypes.POINTER(ffi.wasm_trap_t)()
        self._call_args = (store._context(), ctypes.byref(func._func), self._params, self._n,
                           self._results, self._m, ctypes.byref(self._trap))

    def __call__(self, *args: Any) -> Any:
        if self._fallback:
            return self._func(self._store, *args)
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        for (of, field), value in zip(self._setters, args):
            setattr(of, field, value)
        error = _func_call(*self._call_args)
        if error or self._trap:
            self._raise(error)
        if self._m == 0:
            return None
        values = [getattr(self._results[i].of, f) for i, f in enumerate(self._result_fields)]
        return values[0] if self._m == 1 else values

    def _raise(self, error: Any) -> None:
        """A trap or error: raised the way wasmtime-py's Func.__call__ raises it (a Python exception
        raised inside an import comes back as itself)."""
        trap = self._trap
        if trap:
            trap_obj = wasmtime.Trap._from_ptr(ctypes.POINTER(ffi.wasm_trap_t)(trap.contents))
            ctypes.cast(ctypes.byref(trap), ctypes.POINTER(ctypes.c_void_p))[0] = None  # reset for the next call
            _wfunc.maybe_raise_last_exn()
            raise trap_obj
        _wfunc.maybe_raise_last_exn()
        raise wasmtime.WasmtimeError._from_ptr(error)


# -- Python host functions called from Wasm ---------------------------------------------------------
# wasmtime-py's trampoline wraps every argument and result in Val objects (about 15 us per call
# here). Host functions with numeric signatures take this path instead: the callback receives the
# value arrays as plain addresses, reads all arguments with one precompiled struct unpack and
# writes the result with one memmove. Exceptions travel the way wasmtime-py's own trampoline sends
# them, so a Python exception raised in an import re-surfaces at the Python call site.
import itertools  # noqa: E402
import struct  # noqa: E402

_VAL_BYTES = ctypes.sizeof(ffi.wasmtime_val_t)
_VAL_OFFSET = ffi.wasmtime_val_t.of.offset
_CODES = {"i32": "i", "i64": "q", "f32": "f", "f64": "d"}


def _values_struct(names: list[str]) -> struct.Struct:
    """Layout of an array of wasmtime_val_t holding these numeric kinds: kind byte, padding, value."""
    fmt = "<"
    for n in names:
        size = struct.calcsize("<" + _CODES[n])
        fmt += f"B{_VAL_OFFSET - 1}x{_CODES[n]}{_VAL_BYTES - _VAL_OFFSET - size}x"
    return struct.Struct(fmt)


class _RawFunc:
    """What the trampoline needs for one host function, resolved once at definition."""

    __slots__ = ("fn", "n", "params", "results", "result_kinds", "access_caller")

    def __init__(self, fn: Any, params: list[str], results: list[str], access_caller: bool) -> None:
        self.fn = fn
        self.n = len(params)
        self.params = _values_struct(params) if params else None
        self.results = _values_struct(results) if results else None
        self.result_kinds = tuple(_KINDS[r][0] for r in results)
        self.access_caller = access_caller


_HOST_FUNCS: dict[int, _RawFunc] = {}
_host_ids = itertools.count(1)
_string_at = ctypes.string_at
_memmove = ctypes.memmove

_raw_callback_t = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ffi.wasmtime_caller_t),
                                   ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_finalizer_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_func_new = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, _raw_callback_t, ctypes.c_void_p,
                             _finalizer_t, ctypes.c_void_p)(
    ctypes.cast(ffi.dll.wasmtime_func_new, ctypes.c_void_p).value)


@_raw_callback_t
def _host_trampoline(idx, caller_ptr, params, nparams, results, nresults):  # type: ignore[no-untyped-def]
    caller = None
    try:
        f = _HOST_FUNCS[idx or 0]
        if f.n:
            args = f.params.unpack(_string_at(params, f.params.size))[1::2]
        else:
            args = ()
        if f.access_caller:
            caller = wasmtime.Caller(caller_ptr)
            out = f.fn(caller, *args)
        else:
            out = f.fn(*args)
        if nresults:
            kinds = f.result_kinds
            if nresults == 1:
                data = f.results.pack(kinds[0], out)
            else:
                data = f.results.pack(*[v for pair in zip(kinds, out) for v in pair])
            _memmove(results, data, len(data))
        return 0
    except BaseException as exc:  # noqa: BLE001 - handed to wasmtime-py's exception relay
        _wfunc.LAST_EXCEPTION = exc
        trap = wasmtime.Trap("python exception")._consume()
        return ctypes.cast(trap, ctypes.c_void_p).value
    finally:
        if caller is not None:
            caller._invalidate()


@_finalizer_t
def _host_finalize(idx):  # type: ignore[no-untyped-def]
    funcs = _HOST_FUNCS  # None-safe: stores can be deleted while the interpreter shuts down
    if funcs is not None:
        funcs.pop(idx or 0, None)


# A Store deleted during interpreter shutdown still calls these; module globals may be gone by then,
# and a freed ctypes thunk would crash the process. Keep both thunks alive for the process's life.
# wasmtime-py's own trampoline and finalizer have the same exposure; they are kept alive as well.
for _thunk in (_host_trampoline, _host_finalize, _wfunc.trampoline, _wfunc.finalize):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_thunk))


def host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Any, access_caller: bool = False) -> wasmtime.Func:
    """A wasmtime.Func calling fn; the fast path when every value is numeric."""
    params = [str(t) for t in ftype.params]
    results = [str(t) for t in ftype.results]
    if not all(n in _KINDS for n in params + results):
        return wasmtime.Func(store, ftype, fn, access_caller=access_caller)
    idx = next(_host_ids)
    _HOST_FUNCS[idx] = _RawFunc(fn, params, results, access_caller)
    raw = ffi.wasmtime_func_t()
    _func_new(store._context(), ftype.ptr(), _host_trampoline, idx, _host_finalize, ctypes.addressof(raw))
    func = wasmtime.Func.__new__(wasmtime.Func)
    func._func = raw
    return func
