"""Crossing between Python and Wasm without wasmtime-py's per-call type work.

wasmtime-py converts every value through Val objects on both sides of a call (about 30 us for a
Python -> Wasm call and 15 us for a Wasm -> Python import on the development box), and even its
raw ctypes entry points cost microseconds per crossing. For numeric signatures this module uses
wasmtime's *unchecked* C entry points through cffi instead: values travel as 16-byte raw slots,
the signature is looked up once, and cffi's calls and callbacks are several times cheaper than
ctypes' (a Python -> Wasm -> Python import round: 8.9 us through ctypes, 2.9 us here). Other
signatures use wasmtime-py's ordinary path.

Ownership: a FastCall borrows its Store and Func (it keeps both alive); a host function's Python
state lives in _HOST_FUNCS until wasmtime's finalizer for it runs (when its Store is dropped).
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any

import cffi
import wasmtime
import wasmtime._func as _wfunc
from wasmtime import _ffi as wffi

_ffi = cffi.FFI()
_ffi.cdef("""
typedef void *(*wagogpu_unchecked_callback)(void *env, void *caller, void *args_and_results, size_t n);
void wasmtime_func_new_unchecked(void *context, const void *type, wagogpu_unchecked_callback callback,
                                 void *env, void (*finalizer)(void *), void *ret);
void *wasmtime_func_call_unchecked(void *context, const void *func, void *args_and_results,
                                   size_t args_and_results_len, void **trap);
void *wasmtime_caller_context(void *caller);
uintptr_t wasmtime_memory_data(const void *context, const void *memory);  /* uint8_t *, as an int */
size_t wasmtime_memory_data_size(const void *context, const void *memory);
""")
_lib = _ffi.dlopen(wffi.dll._name)  # the library wasmtime-py loaded: same process-wide handle
_call_unchecked = _lib.wasmtime_func_call_unchecked
_NULL = _ffi.NULL

#: Bytes per wasmtime_val_raw_t (a union as wide as v128).
RAW_BYTES = ctypes.sizeof(wffi.wasmtime_val_raw_t)
# Per numeric kind: struct code, the mask an argument is reduced by (Python ints of either sign
# are accepted for integers, as wasmtime-py accepts them), and the cffi view a slot is read with.
_CODES = {"i32": "i", "i64": "q", "f32": "f", "f64": "d"}
_WRITE = {"i32": ("uint32_t *", 0xFFFFFFFF), "i64": ("uint64_t *", 0xFFFFFFFFFFFFFFFF),
          "f32": ("float *", None), "f64": ("double *", None)}
_READ = {"i32": "int32_t *", "i64": "int64_t *", "f32": "float *", "f64": "double *"}


def _numeric(names: list[str]) -> bool:
    return all(n in _CODES for n in names)


def _raw_struct(names: list[str]) -> struct.Struct:
    """Layout of consecutive raw slots holding these kinds (value first, then padding)."""
    return struct.Struct("<" + "".join(f"{_CODES[n]}{RAW_BYTES - struct.calcsize(_CODES[n])}x" for n in names))


def _address(ptr: Any) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


class FastCall:
    """Calls one exported function; not re-entrant (its raw slots are reused per call)."""

    __slots__ = ("_func", "_store", "_fallback", "_n", "_m", "_width", "_slots", "_ctx", "_fptr", "_trap",
                 "_writes", "_reads")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store):
        self._func = func
        self._store = store
        ftype = func.type(store)
        names = [str(t) for t in ftype.params]
        result_names = [str(t) for t in ftype.results]
        self._fallback = not _numeric(names + result_names)
        self._n, self._m = len(names), len(result_names)
        self._width = max(1, self._n, self._m)
        self._slots = _ffi.new("uint8_t[]", self._width * RAW_BYTES)
        if self._fallback:
            return
        stride = {kind: RAW_BYTES // _ffi.sizeof(ctype[:-2]) for kind, ctype in _READ.items()}
        # (typed view, index, mask) per parameter; (typed view, index) per result.
        self._writes = [(_ffi.cast(_WRITE[n][0], self._slots), i * stride[n], _WRITE[n][1])
                        for i, n in enumerate(names)]
        self._reads = [(_ffi.cast(_READ[n], self._slots), i * stride[n]) for i, n in enumerate(result_names)]
        self._ctx = store_context(store)
        self._fptr = _ffi.cast("void *", ctypes.addressof(func._func))
        self._trap = _ffi.new("void **")

    def __call__(self, *args: Any) -> Any:
        if self._fallback:
            return self._func(self._store, *args)
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        for (view, i, mask), value in zip(self._writes, args):
            view[i] = value & mask if mask is not None else value
        error = _call_unchecked(self._ctx, self._fptr, self._slots, self._width, self._trap)
        if error or self._trap[0]:
            self._raise(error)
        if self._m == 1:
            view, i = self._reads[0]
            return view[i]
        if self._m == 0:
            return None
        return [view[i] for view, i in self._reads]

    def _raise(self, error: Any) -> None:
        """A trap or error, raised the way wasmtime-py's Func.__call__ raises it (a Python exception
        raised inside an import comes back as itself)."""
        trap = self._trap[0]
        if trap:
            self._trap[0] = _NULL  # reset for the next call
            trap_obj = wasmtime.Trap._from_ptr(ctypes.cast(int(_ffi.cast("uintptr_t", trap)),
                                                           ctypes.POINTER(wffi.wasm_trap_t)))
            _wfunc.maybe_raise_last_exn()
            raise trap_obj
        _wfunc.maybe_raise_last_exn()
        raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(int(_ffi.cast("uintptr_t", error)),
                                                           ctypes.POINTER(wffi.wasmtime_error_t)))


# -- Python host functions called from Wasm ---------------------------------------------------------
class GuestCaller:
    """The instance calling an import, valid only during that call. Guest memory is reached through
    plain C calls; wasmtime-py's Caller (about 2 us to make) is made only for an export lookup.
    Stands in for a Store wherever wasmtime-py wants one (it has _context)."""

    __slots__ = ("_ptr", "_caller")

    def __init__(self, ptr: Any) -> None:
        self._ptr = ptr
        self._caller: wasmtime.Caller | None = None

    def get(self, name: str) -> Any:
        return self._wasmtime().get(name)

    def _context(self) -> Any:
        return self._wasmtime()._context()

    def memory_span(self, memory_address: Any) -> tuple[int, int]:
        """(address, byte length) of the guest memory at memory_address (see memory_address())."""
        if self._ptr is None:
            raise ValueError("the caller is gone (used after its import returned)")
        return memory_span(_caller_context(self._ptr), memory_address)

    def _wasmtime(self) -> wasmtime.Caller:
        if self._ptr is None:
            raise ValueError("the caller is gone (used after its import returned)")
        if self._caller is None:
            self._caller = wasmtime.Caller(ctypes.cast(int(_ffi.cast("uintptr_t", self._ptr)), _CallerPtr))
        return self._caller

    def _invalidate(self) -> None:
        self._ptr = None
        if self._caller is not None:
            self._caller._invalidate()


_caller_context = _lib.wasmtime_caller_context
_memory_data = _lib.wasmtime_memory_data
_memory_size = _lib.wasmtime_memory_data_size


def memory_address(memory: wasmtime.Memory) -> Any:
    """Where a Memory's wasmtime_memory_t lies (stable for the Memory object's life)."""
    return _ffi.cast("void *", ctypes.addressof(memory._memory))


def memory_span(context: Any, memory_address: Any) -> tuple[int, int]:
    """(address, byte length) of a non-shared memory, given a store context and where the memory's
    wasmtime_memory_t lies (plain ints, no wasmtime-py objects); valid until the memory grows."""
    return _memory_data(context, memory_address), _memory_size(context, memory_address)


def store_context(store: Any) -> Any:
    """A Store's (or Caller's) context as a pointer the C calls here take."""
    return _ffi.cast("void *", _address(store._context()))


class _HostFunc:
    """What the trampoline needs for one host function, resolved once at definition."""

    __slots__ = ("fn", "params", "results", "single", "access_caller", "handle")

    def __init__(self, fn: Any, params: list[str], results: list[str], access_caller: bool) -> None:
        self.fn = fn
        self.params = _raw_struct(params) if params else None
        self.results = _raw_struct(results) if results else None
        self.single = len(results) == 1
        self.access_caller = access_caller
        self.handle = _ffi.new_handle(self)


# Live host functions, by id of their _HostFunc: what keeps each cffi handle alive until wasmtime's
# finalizer for that function runs.
_HOST_FUNCS: dict[int, _HostFunc] = {}
_buffer = _ffi.buffer
_from_handle = _ffi.from_handle
_CallerPtr = ctypes.POINTER(wffi.wasmtime_caller_t)


@_ffi.callback("void *(void *, void *, void *, size_t)")
def _trampoline(env: Any, caller_ptr: Any, slots: Any, n: int) -> Any:
    caller = None
    try:
        f: _HostFunc = _from_handle(env)
        fmt = f.params
        args = fmt.unpack_from(_buffer(slots, fmt.size)) if fmt is not None else ()
        if f.access_caller:
            caller = GuestCaller(caller_ptr)
            out = f.fn(caller, *args)
        else:
            out = f.fn(*args)
        fmt = f.results
        if fmt is not None:
            fmt.pack_into(_buffer(slots, fmt.size), 0, *((out,) if f.single else out))
        return _NULL
    except BaseException as exc:  # noqa: BLE001 - handed to wasmtime-py's exception relay
        _wfunc.LAST_EXCEPTION = exc
        return _ffi.cast("void *", _address(wasmtime.Trap("python exception")._consume()))
    finally:
        if caller is not None:
            caller._invalidate()


@_ffi.callback("void(void *)")
def _finalize(env: Any) -> None:
    try:
        _HOST_FUNCS.pop(id(_from_handle(env)), None)
    except Exception:  # noqa: BLE001 - a Store dropped at interpreter shutdown, module globals gone
        pass


# A Store deleted during interpreter shutdown still calls these; module globals may be gone by then,
# and a freed callback would crash the process. Keep both alive for the process's life (wasmtime-py's
# own trampoline and finalizer have the same exposure and are kept alive as well).
for _thunk in (_trampoline, _finalize, _wfunc.trampoline, _wfunc.finalize):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_thunk))


def host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Any, access_caller: bool = False) -> wasmtime.Func:
    """A wasmtime.Func calling fn; the fast path when every value is numeric."""
    params = [str(t) for t in ftype.params]
    results = [str(t) for t in ftype.results]
    if not _numeric(params + results):
        return wasmtime.Func(store, ftype, fn, access_caller=access_caller)
    f = _HostFunc(fn, params, results, access_caller)
    _HOST_FUNCS[id(f)] = f
    func = wasmtime.Func.__new__(wasmtime.Func)
    func._func = wffi.wasmtime_func_t()
    _lib.wasmtime_func_new_unchecked(store_context(store),
                                     _ffi.cast("void *", _address(ftype.ptr())), _trampoline, f.handle,
                                     _finalize, _ffi.cast("void *", ctypes.addressof(func._func)))
    return func
