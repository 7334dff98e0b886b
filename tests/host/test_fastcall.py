"""The Python <-> Wasm crossing (wagogpu.host._wasmtime, on whichever path it chose): values of every numeric kind both ways, traps,
exceptions raised in host functions, and the caller handle's lifetime."""
from __future__ import annotations

import ctypes
import math

import pytest
import wasmtime

from wagogpu.host._wasmtime import export_call, host_func

WAT = """(module
  (import "h" "mix" (func $mix (param i32 i64 f32 f64) (result i64 f64)))
  (import "h" "raise" (func $raise (param i32) (result i32)))
  (import "h" "span" (func $span (result i64)))
  (memory (export "memory") 2)
  (func (export "mix") (param i32 i64 f32 f64) (result i64 f64)
    (call $mix (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "echo32") (param i32) (result i32) (local.get 0))
  (func (export "raise") (param i32) (result i32) (call $raise (local.get 0)))
  (func (export "span") (result i64) (call $span))
  (func (export "none"))
  (func (export "trap") (unreachable)))"""


def types(*names: str) -> list[wasmtime.ValType]:
    return [getattr(wasmtime.ValType, n)() for n in names]


@pytest.fixture
def guest():
    store = wasmtime.Store(wasmtime.Engine())
    seen: dict[str, object] = {}

    def mix(a, b, c, d):
        seen["mix"] = (a, b, c, d)
        return b * 2, d + c

    def fail(x):
        raise KeyError(f"host failure {x}")

    def span(caller):
        memory = caller.memory("memory")
        seen["caller"] = caller
        seen["base"], size = caller.memory_span(memory.handle)
        return size

    funcs = [host_func(store, wasmtime.FuncType(types("i32", "i64", "f32", "f64"), types("i64", "f64")), mix),
             host_func(store, wasmtime.FuncType(types("i32"), types("i32")), fail),
             host_func(store, wasmtime.FuncType([], types("i64")), span, access_caller=True)]
    instance = wasmtime.Instance(store, wasmtime.Module(store.engine, WAT), funcs)
    exports = instance.exports(store)
    seen["store"], seen["memory"] = store, exports["memory"]
    yield (lambda name: export_call(exports[name], store)), seen


def test_every_numeric_kind_crosses_both_ways(guest) -> None:
    call, seen = guest
    assert call("mix")(-7, -(2 ** 40), 1.5, 2.25) == [-(2 ** 41), 3.75]
    assert seen["mix"] == (-7, -(2 ** 40), 1.5, 2.25)
    # Unsigned spellings of an i32 are accepted and come back signed, as wasmtime-py does.
    assert call("echo32")(0xFFFFFFFF) == -1 and call("echo32")(2 ** 31) == -(2 ** 31)
    assert call("echo32")(12345) == 12345
    result = call("mix")(0, 0, math.inf, -0.0)
    assert result[1] == math.inf
    assert call("none")() is None


def test_arguments_struct_refuses_take_the_checked_way(guest) -> None:
    """Arguments the one-call pack refuses (unsigned spellings, an f32 too large, bad values) are
    written one by one, with the same answers and errors as before the pack."""
    call, seen = guest
    assert call("mix")(0xFFFFFFFF, 2 ** 64 - 1, 1e300, 0.5) == [-2, math.inf]
    assert seen["mix"] == (-1, -1, math.inf, 0.5)
    with pytest.raises(ValueError, match="argument 1 .i32. is 4294967296, outside"):
        call("echo32")(2 ** 32)
    with pytest.raises(TypeError, match="argument 1 .i32. must be an integer, got float"):
        call("echo32")(1.0)
    with pytest.raises(TypeError):  # (each crossing words it its own way)
        call("mix")(1, 2, "x", 4.0)
    assert call("echo32")(-5) == -5  # and the next call's pack is not left half written


def test_argument_count_is_checked(guest) -> None:
    call, _ = guest
    with pytest.raises(TypeError, match="expected 1 arguments, got 2"):
        call("echo32")(1, 2)


def test_a_host_exception_comes_back_as_itself_and_the_next_call_works(guest) -> None:
    call, _ = guest
    with pytest.raises(KeyError, match="host failure 3"):
        call("raise")(3)
    assert call("echo32")(5) == 5


def test_a_wasm_trap_is_raised_and_cleared(guest) -> None:
    call, _ = guest
    trap = call("trap")
    for _ in range(2):
        with pytest.raises(wasmtime.Trap, match="unreachable"):
            trap()
    assert call("echo32")(9) == 9


def test_the_caller_reaches_guest_memory_only_during_its_call(guest) -> None:
    call, seen = guest
    assert call("span")() == 2 * 65536
    data = seen["memory"].data_ptr(seen["store"])
    assert seen["base"] == ctypes.addressof(data.contents)
    caller = seen["caller"]
    with pytest.raises(ValueError, match="caller is gone"):
        caller.memory_span(0)
    with pytest.raises(ValueError, match="caller is gone"):
        caller.get("memory")
