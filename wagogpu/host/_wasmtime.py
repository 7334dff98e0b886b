"""The wasmtime edge: every crossing between Python and Wasm, and the only module that touches
wasmtime-py's internals.

wasmtime-py converts every value through Val objects on both sides of a call (about 30 us for a
Python -> Wasm call and 15 us for a Wasm -> Python import on the development box), and even its
raw ctypes entry points cost microseconds per crossing. For numeric signatures the fast path here
uses wasmtime's *unchecked* C entry points through cffi instead: values travel as 16-byte raw
slots, the signature is looked up once, and cffi's calls and callbacks are several times cheaper
than ctypes' (a Python -> Wasm -> Python import round: 8.9 us through ctypes, 2.9 us here).

The fast path was written against wasmtime-py 50 (its ctypes structs, _func's exception relay and
trampolines). At import this module checks the installed major version; on any other, or with
WAGOGPU_PUBLIC_WASMTIME=1 in the environment, it uses wasmtime-py's public API (public_path.py):
slower, same answers. FAST_PATH says which one runs and PATH_NOTE why.

Ownership: a call wrapper borrows its Store and Func (it keeps both alive); a fast host function's
Python state lives in _HOST_FUNCS until wasmtime's finalizer for it runs (when its Store is dropped).
"""
from __future__ import annotations

import ctypes
import os
import struct
from importlib import metadata
from typing import Any, Callable

import wasmtime

from .public_path import (INT_RANGES, GuestCaller, GuestMemory, PublicCall, argument_error, find_memory,
                          public_host_func, public_memory_span, refuse_unpassable, relay, take_relayed)

TESTED_MAJOR = 50
PUBLIC_ENV = "WAGOGPU_PUBLIC_WASMTIME"

__all__ = ["FAST_PATH", "PATH_NOTE", "GuestCaller", "GuestMemory", "SharedMemory", "export_call", "host_func", "memory_span",
           "own_memory", "value_kinds"]


def _v128_test() -> Callable[[Any], bool] | None:
    """Whether a ValType is v128, asked without wasm_valtype_kind (wasm.h has no v128 kind: the
    runtime aborts the process when asked, so even str() of such a ValType kills it)."""
    try:
        from wasmtime import _ffi as wffi
        v128 = wffi.wasmtime_wasm_valtype_v128()  # kept for the process's life
        equal = wffi.wasmtime_wasm_valtype_equal
    except (ImportError, AttributeError):  # pragma: no cover - another wasmtime-py
        return None
    return lambda valtype: bool(equal(valtype.ptr(), v128))


_IS_V128 = _v128_test()


def value_kinds(types: Any) -> list[str]:
    """Kind names ("i32", "externref", "v128", ...) of a FuncType's params or results, safely."""
    is_v128 = _IS_V128
    if is_v128 is None:  # pragma: no cover - another wasmtime-py: its str() may abort on v128
        return [str(t) for t in types]
    return ["v128" if is_v128(t) else str(t) for t in types]


def _choose_path() -> tuple[bool, str]:
    if os.environ.get(PUBLIC_ENV) == "1":
        return False, f"{PUBLIC_ENV}=1"
    try:
        version = metadata.version("wasmtime")
    except metadata.PackageNotFoundError:
        return False, "the installed wasmtime's version is unknown"
    if version.split(".")[0] != str(TESTED_MAJOR):
        return False, f"wasmtime {version} is not the tested {TESTED_MAJOR}.x"
    return True, ""


#: Bytes per wasmtime_val_raw_t (a union as wide as v128).
RAW_BYTES = 16
# Per numeric kind: struct code, the mask an argument is reduced by (Python ints of either sign
# are accepted for integers, as wasmtime-py accepts them), and the cffi view a slot is read with.
_CODES = {"i32": "i", "i64": "q", "f32": "f", "f64": "d"}
_WRITE = {"i32": ("uint32_t *", 0xFFFFFFFF), "i64": ("uint64_t *", 0xFFFFFFFFFFFFFFFF),
          "f32": ("float *", None), "f64": ("double *", None)}
_READ = {"i32": "int32_t *", "i64": "int64_t *", "f32": "float *", "f64": "double *"}
_CDEF = """
typedef void *(*wagogpu_unchecked_callback)(void *env, void *caller, void *args_and_results, size_t n);
void wasmtime_func_new_unchecked(void *context, const void *type, wagogpu_unchecked_callback callback,
                                 void *env, void (*finalizer)(void *), void *ret);
void *wasmtime_func_call_unchecked(void *context, const void *func, void *args_and_results,
                                   size_t args_and_results_len, void **trap);
void *wasmtime_caller_context(void *caller);
uintptr_t wasmtime_memory_data(const void *context, const void *memory);  /* uint8_t *, as an int */
size_t wasmtime_memory_data_size(const void *context, const void *memory);
"""

#: A cffi object, or one of wasmtime-py's private modules and ctypes structs: none of them carries types.
Raw = Any

# Resolved by _open_fast_path() (module globals: the hot paths read them without attribute lookups).
_ffi: Raw = None
_lib: Raw = None
_wfunc: Raw = None
_wffi: Raw = None
_NULL: Raw = None
_call_unchecked: Raw = None
_caller_context: Raw = None
_memory_data: Raw = None
_memory_size: Raw = None
_buffer: Raw = None
_from_handle: Raw = None
_trampoline_cb: Raw = None
_finalize_cb: Raw = None
# The C type a pointer becomes an int through, taken from a signature: a type named by a string
# costs cffi a parse the first time (~10 ms, paid by the first guest-memory lookup otherwise).
_UINTPTR: Raw = None
# Live host functions, by id of their _HostFunc: what keeps each cffi handle alive until wasmtime's
# finalizer for that function runs.
_HOST_FUNCS: dict[int, _HostFunc] = {}


def _numeric(names: list[str]) -> bool:
    return all(n in _CODES for n in names)


def _raw_struct(names: list[str]) -> struct.Struct:
    """Layout of consecutive raw slots holding these kinds (value first, then padding)."""
    return struct.Struct("<" + "".join(f"{_CODES[n]}{RAW_BYTES - struct.calcsize(_CODES[n])}x" for n in names))


def _address(ptr: Raw) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


def _as_ctypes(ptr: Raw, ctype: Raw) -> Raw:
    return ctypes.cast(int(_ffi.cast(_UINTPTR, ptr)), ctypes.POINTER(ctype))


class FastCall:
    """Calls one exported function of a numeric signature through the unchecked entry point; not
    re-entrant (its raw slots are reused per call). export_call gives other signatures the public
    call."""

    __slots__ = ("_func", "_store", "_n", "_m", "_width", "_slots", "_ctx", "_fptr", "_trap", "_pack", "_raw",
                 "_writes", "_reads", "_name", "_kinds")

    def __init__(self, func: wasmtime.Func, store: wasmtime.Store, name: str = ""):
        self._func = func
        self._store = store
        self._name = name
        ftype = func.type(store)
        names = self._kinds = [str(t) for t in ftype.params]
        result_names = [str(t) for t in ftype.results]
        self._n, self._m = len(names), len(result_names)
        self._width = max(1, self._n, self._m)
        self._slots = _ffi.new("uint8_t[]", self._width * RAW_BYTES)
        # Every argument in one C call when each is given in its signed spelling (struct refuses
        # the rest: _write_each then takes them one by one, with the unsigned spellings and the
        # errors).
        self._pack = _raw_struct(names).pack_into
        self._raw = _ffi.buffer(self._slots)
        stride = {kind: RAW_BYTES // _ffi.sizeof(ctype[:-2]) for kind, ctype in _READ.items()}
        # (typed view, index, mask, lowest, highest) per parameter; (typed view, index) per result.
        self._writes = [(_ffi.cast(_WRITE[n][0], self._slots), i * stride[n], _WRITE[n][1], *INT_RANGES.get(n, (0, 0)))
                        for i, n in enumerate(names) if n in _WRITE]
        self._reads = [(_ffi.cast(_READ[n], self._slots), i * stride[n])
                       for i, n in enumerate(result_names) if n in _READ]
        self._ctx = _store_context(store)
        self._fptr = _ffi.cast("void *", ctypes.addressof(func._func))
        self._trap = _ffi.new("void **")

    def __call__(self, *args: Any) -> Any:
        try:
            self._pack(self._raw, 0, *args)
        except (struct.error, OverflowError):  # (an unsigned spelling, a float too large for f32, a bad value)
            self._write_each(args)
        error = _call_unchecked(self._ctx, self._fptr, self._slots, self._width, self._trap)
        if error or self._trap[0]:
            self._raise(error)
        if self._m == 1:
            view, i = self._reads[0]
            return view[i]
        if self._m == 0:
            return None
        return [view[i] for view, i in self._reads]

    def _write_each(self, args: tuple[Any, ...]) -> None:
        """The arguments written one by one: integers of either spelling reduced to their bits,
        floats as C converts them; a one-line TypeError or ValueError for any that does not fit."""
        if len(args) != self._n:
            raise TypeError(f"expected {self._n} arguments, got {len(args)}")
        try:
            for (view, i, mask, low, high), value in zip(self._writes, args):
                if mask is None:
                    view[i] = value
                elif low <= value <= high:
                    view[i] = value & mask
                else:
                    raise OverflowError
        except (TypeError, OverflowError):
            raise argument_error(self._name, self._kinds, args) from None

    def _raise(self, error: Raw) -> None:
        """A trap or error, raised the way wasmtime-py's Func.__call__ raises it (a Python exception
        raised inside an import comes back as itself: this thread's, relayed per thread)."""
        trap = self._trap[0]
        own = take_relayed()
        if own is not None and _wfunc.LAST_EXCEPTION is own:
            _wfunc.LAST_EXCEPTION = None  # a public-path host function also left it in wasmtime-py's global
        if trap:
            self._trap[0] = _NULL  # reset for the next call
            trap_obj = wasmtime.Trap._from_ptr(_as_ctypes(trap, _wffi.wasm_trap_t))
            if own is not None:
                raise own
            raise trap_obj
        if own is not None:
            wasmtime.WasmtimeError._from_ptr(_as_ctypes(error, _wffi.wasmtime_error_t))  # freed with it
            raise own
        raise wasmtime.WasmtimeError._from_ptr(_as_ctypes(error, _wffi.wasmtime_error_t))


class FastCaller:
    """The instance calling an import, valid only during that call. Guest memory is reached through
    plain C calls; wasmtime-py's Caller (about 2 us to make) is made only for an export lookup."""

    __slots__ = ("_ptr", "_caller")

    def __init__(self, ptr: Raw) -> None:
        self._ptr = ptr
        self._caller: wasmtime.Caller | None = None

    def get(self, name: str) -> Any:
        return self._wasmtime().get(name)

    def memory(self, name: str) -> GuestMemory | None:
        return find_memory(self._wasmtime(), name, _memory_handle)

    def memory_span(self, handle: Raw) -> tuple[int, int]:
        """(address, byte length) of the guest memory behind a GuestMemory's handle, valid until it grows."""
        if self._ptr is None:
            raise ValueError("the caller is gone (used after its import returned)")
        context = _caller_context(self._ptr)
        return _memory_data(context, handle), _memory_size(context, handle)

    def _wasmtime(self) -> wasmtime.Caller:
        if self._ptr is None:
            raise ValueError("the caller is gone (used after its import returned)")
        if self._caller is None:
            self._caller = wasmtime.Caller(_as_ctypes(self._ptr, _wffi.wasmtime_caller_t))
        return self._caller

    def _invalidate(self) -> None:
        self._ptr = None
        if self._caller is not None:
            self._caller._invalidate()


def _memory_handle(memory: wasmtime.Memory) -> Raw:
    """Where a Memory's wasmtime_memory_t lies (stable for the Memory object's life)."""
    return _ffi.cast("void *", ctypes.addressof(memory._memory))


def _store_context(store: wasmtime.Store) -> Raw:
    """A Store's context as a pointer the C calls here take."""
    return _ffi.cast("void *", _address(store._context()))


class _HostFunc:
    """What the trampoline needs for one host function, resolved once at definition: the raw slots'
    width, an unpack of its parameters and a pack of its results (struct's, empty for none)."""

    __slots__ = ("fn", "unpack", "pack", "width", "single", "access_caller", "handle", "result_kinds")

    def __init__(self, fn: Callable[..., Any], params: list[str], results: list[str], access_caller: bool) -> None:
        self.fn = fn
        self.result_kinds = results
        self.unpack = _raw_struct(params).unpack_from
        self.pack = _raw_struct(results).pack_into
        self.width = RAW_BYTES * max(len(params), len(results))
        self.single = len(results) == 1
        self.access_caller = access_caller
        self.handle = _ffi.new_handle(self)

    def signed(self, values: Any) -> list[Any]:
        """Results with integers of either spelling as the signed value they mean; ValueError (one
        line) for an integer outside both spellings. Anything else is left for struct to refuse."""
        if len(values) != len(self.result_kinds):
            return list(values)  # struct says how many it expected
        out = []
        for i, (kind, value) in enumerate(zip(self.result_kinds, values)):
            bounds = INT_RANGES.get(kind)
            if bounds is not None and isinstance(value, int):
                if not bounds[0] <= value <= bounds[1]:
                    raise ValueError(f"host function result {i + 1} ({kind}) is {value}, outside {bounds[0]}..{bounds[1]}")
                bits = 32 if kind == "i32" else 64
                value = value - (1 << bits) if value >= 1 << (bits - 1) else value
            out.append(value)
        return out


def _trampoline(env: Raw, caller_ptr: Raw, slots: Raw, n: int) -> Raw:
    caller = None
    try:
        f: _HostFunc = _from_handle(env)
        raw = _buffer(slots, f.width)
        if f.access_caller:
            caller = FastCaller(caller_ptr)
            out = f.fn(caller, *f.unpack(raw))
        else:
            out = f.fn(*f.unpack(raw))
        try:
            if f.single:  # (the common case, without a tuple of one)
                f.pack(raw, 0, out)
            elif f.result_kinds:
                f.pack(raw, 0, *out)
        except struct.error:  # an unsigned spelling (0xFFFFFFFF for -1), as calls accept, or a bad value
            f.pack(raw, 0, *f.signed((out,) if f.single else out))
        return _NULL
    except BaseException as exc:  # noqa: BLE001 - relayed to the call that ran it (this thread's)
        relay(exc)
        return _ffi.cast("void *", _address(wasmtime.Trap("python exception")._consume()))
    finally:
        if caller is not None:
            caller._invalidate()


def _finalize(env: Raw) -> None:
    try:
        _HOST_FUNCS.pop(id(_from_handle(env)), None)
    except Exception:  # noqa: BLE001 - a Store dropped at interpreter shutdown, module globals gone
        pass


def _fast_host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Callable[..., Any],
                    access_caller: bool) -> wasmtime.Func:
    params = [str(t) for t in ftype.params]
    results = [str(t) for t in ftype.results]
    if not _numeric(params + results):
        return public_host_func(store, ftype, fn, access_caller)
    f = _HostFunc(fn, params, results, access_caller)
    _HOST_FUNCS[id(f)] = f
    func = wasmtime.Func.__new__(wasmtime.Func)
    func._func = _wffi.wasmtime_func_t()
    _lib.wasmtime_func_new_unchecked(_store_context(store), _ffi.cast("void *", _address(ftype.ptr())),
                                     _trampoline_cb, f.handle, _finalize_cb,
                                     _ffi.cast("void *", ctypes.addressof(func._func)))
    return func


def _fast_memory_span(memory: wasmtime.Memory, store: wasmtime.Store) -> tuple[int, int]:
    handle = _memory_handle(memory)
    context = _store_context(store)
    return _memory_data(context, handle), _memory_size(context, handle)


def _open_fast_path() -> None:
    """Resolve wasmtime-py's internals and the unchecked entry points (raises if they are not there)."""
    global _ffi, _lib, _wfunc, _wffi, _NULL, _call_unchecked, _caller_context, _memory_data, _memory_size
    global _buffer, _from_handle, _trampoline_cb, _finalize_cb, _UINTPTR
    import _cffi_backend  # type: ignore[import-untyped]
    import cffi
    import wasmtime._func as wfunc
    from wasmtime import _ffi as wffi

    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    lib = ffi.dlopen(wffi.dll._name)  # the library wasmtime-py loaded: same process-wide handle
    if ctypes.sizeof(wffi.wasmtime_val_raw_t) != RAW_BYTES:
        raise ImportError(f"wasmtime_val_raw_t is {ctypes.sizeof(wffi.wasmtime_val_raw_t)} bytes, not {RAW_BYTES}")
    _ffi, _lib, _wfunc, _wffi, _NULL = ffi, lib, wfunc, wffi, ffi.NULL
    _call_unchecked, _caller_context = lib.wasmtime_func_call_unchecked, lib.wasmtime_caller_context
    _memory_data, _memory_size = lib.wasmtime_memory_data, lib.wasmtime_memory_data_size
    # cffi's backend function itself: FFI.from_handle is a Python method around it, one more frame
    # on every import's crossing.
    _buffer, _from_handle = ffi.buffer, getattr(_cffi_backend, "from_handle", ffi.from_handle)
    _UINTPTR = ffi.typeof(lib.wasmtime_memory_data).result
    _trampoline_cb = ffi.callback("void *(void *, void *, void *, size_t)")(_trampoline)
    _finalize_cb = ffi.callback("void(void *)")(_finalize)
    # A Store deleted during interpreter shutdown still calls these; module globals may be gone by
    # then, and a freed callback would crash the process. Keep both alive for the process's life
    # (wasmtime-py's own trampoline and finalizer have the same exposure and are kept alive too).
    for thunk in (_trampoline_cb, _finalize_cb, wfunc.trampoline, wfunc.finalize):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(thunk))


FAST_PATH, PATH_NOTE = _choose_path()
if FAST_PATH:
    try:
        _open_fast_path()
    except Exception as _exc:  # noqa: BLE001 - an internal moved: the public path still works
        FAST_PATH, PATH_NOTE = False, f"wasmtime-py internals unavailable ({type(_exc).__name__}: {_exc})"


def export_call(func: wasmtime.Func, store: wasmtime.Store, name: str = "") -> Callable[..., Any]:
    """A callable for an exported function (``name`` for its argument errors): None, one value,
    or a list of results. Integer arguments outside their parameter's range raise ValueError; a
    signature with a value Python cannot hold (v128) raises TypeError here."""
    ftype = func.type(store)
    params, results = value_kinds(ftype.params), value_kinds(ftype.results)
    refuse_unpassable(f"export {name!r}" if name else "export", params, results)
    if FAST_PATH and _numeric(params + results):
        return FastCall(func, store, name)
    return PublicCall(func, store, name)


def host_func(store: wasmtime.Store, ftype: wasmtime.FuncType, fn: Callable[..., Any],
              access_caller: bool = False) -> wasmtime.Func:
    """A wasmtime.Func calling fn (with a GuestCaller first when access_caller)."""
    refuse_unpassable("host function", value_kinds(ftype.params), value_kinds(ftype.results))
    if FAST_PATH:
        return _fast_host_func(store, ftype, fn, access_caller)
    return public_host_func(store, ftype, fn, access_caller)


def memory_span(memory: wasmtime.Memory | wasmtime.SharedMemory, store: wasmtime.Store) -> tuple[int, int]:
    """(address, byte length) of a memory of store, valid until it grows."""
    if FAST_PATH and isinstance(memory, wasmtime.Memory):
        return _fast_memory_span(memory, store)
    return public_memory_span(memory, store)


def own_memory(found: object, store: wasmtime.Store) -> GuestMemory | None:
    """A GuestMemory for a memory export the host looked up itself, when an import the guest
    re-exported is called from the host (the call then has no calling instance to ask)."""
    if not isinstance(found, wasmtime.Memory):
        return None
    handle = _memory_handle(found) if FAST_PATH else found
    return GuestMemory(handle, found.type(store).is_64, found)


class SharedMemory(wasmtime.SharedMemory):
    """A shared memory that can be imported: wasmtime-py 50's own SharedMemory wraps its pointer
    once too often when handed to an instance as an import (a ctypes TypeError); this passes the
    pointer as wasmtime's C API expects."""

    def _as_extern(self) -> Raw:
        from wasmtime import _ffi as wffi  # the same private bindings wasmtime-py builds externs with

        union = wffi.wasmtime_extern_union(sharedmemory=self.ptr())
        return wffi.wasmtime_extern_t(wffi.WASMTIME_EXTERN_SHAREDMEMORY, union)
