"""Calling a Wasm export from Python without wasmtime-py's per-call type introspection.

wasmtime-py's Func.__call__ rebuilds the function's type, converts each value through Val objects
and costs about 30 us here; the native call itself is a few us. For numeric signatures this
caller looks the type up once and reuses its raw value arrays (a call is not re-entrant per
function, and an Instance is not for use by two threads at once). Other signatures use the
ordinary path.
"""
from __future__ import annotations

from ctypes import byref
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime._func import enter_wasm

_KINDS = {"i32": (ffi.WASMTIME_I32.value, "i32"), "i64": (ffi.WASMTIME_I64.value, "i64"),
          "f32": (ffi.WASMTIME_F32.value, "f32"), "f64": (ffi.WASMTIME_F64.value, "f64")}


class FastCall:
    __slots__ = ("_func", "_store", "_params", "_fields", "_results", "_result_fields", "_fallback", "_n", "_m")

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

    def __call__(self, *args: Any) -> Any:
        if self._fallback:
            return self._func(self._store, *args)
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        params = self._params
        for i, (field, value) in enumerate(zip(self._fields, args)):
            setattr(params[i].of, field, value)
        with enter_wasm(self._store) as trap:
            error = ffi.wasmtime_func_call(self._store._context(), byref(self._func._func), params, self._n,
                                           self._results, self._m, trap)
            if error:
                raise wasmtime.WasmtimeError._from_ptr(error)
        if self._m == 0:
            return None
        values = [getattr(self._results[i].of, f) for i, f in enumerate(self._result_fields)]
        return values[0] if self._m == 1 else values


# -- Python host functions called from Wasm ---------------------------------------------------------
# wasmtime-py's trampoline wraps every argument and result in Val objects (about 15 us per call
# here). Host functions with numeric signatures take this path instead: raw values straight from
# and into the wasmtime_val_t arrays. Exceptions travel the way wasmtime-py's own trampoline sends
# them, so a Python exception raised in an import re-surfaces at the Python call site.
import ctypes  # noqa: E402
import itertools  # noqa: E402

import wasmtime._func as _wfunc  # noqa: E402

_HOST_FUNCS: dict[int, tuple[Any, list[str], list[tuple[int, str]], bool]] = {}
_host_ids = itertools.count(1)


@ffi.wasmtime_func_callback_t
def _host_trampoline(idx, caller_ptr, params, nparams, results, nresults):  # type: ignore[no-untyped-def]
    caller = None
    try:
        fn, param_fields, result_kinds, access_caller = _HOST_FUNCS[idx or 0]
        args = [getattr(params[i].of, f) for i, f in enumerate(param_fields)]
        if access_caller:
            caller = wasmtime.Caller(caller_ptr)
            out = fn(caller, *args)
        else:
            out = fn(*args)
        if nresults == 1:
            kind, f = result_kinds[0]
            results[0].kind = kind
            setattr(results[0].of, f, out)
        elif nresults:
            for i, (kind, f) in enumerate(result_kinds):
                results[i].kind = kind
                setattr(results[i].of, f, out[i])
        return 0
    except BaseException as exc:  # noqa: BLE001 - handed to wasmtime-py's exception relay
        _wfunc.LAST_EXCEPTION = exc
        trap = wasmtime.Trap("python exception")._consume()
        return ctypes.cast(trap, ctypes.c_void_p).value
    finally:
        if caller is not None:
            caller._invalidate()


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
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
    _HOST_FUNCS[idx] = (fn, [_KINDS[n][1] for n in params], [_KINDS[n] for n in results], access_caller)
    raw = ffi.wasmtime_func_t()
    ffi.wasmtime_func_new(store._context(), ftype.ptr(), _host_trampoline, idx, _host_finalize, byref(raw))
    func = wasmtime.Func.__new__(wasmtime.Func)
    func._func = raw
    return func
