"""Config.call_timeout, .fuel, .max_memory_bytes and .max_table_elements (host/guest_limits.py):
each stops or refuses the guest with an error naming the limit, and leaves the instance, the other
instances and the plugin's state as they were."""
from __future__ import annotations

import numpy as np
import pytest
import wasmtime

from wagogpu import Config, ConfigError, ElementType, Host, LimitTrap, ModuleError, Status
from wagogpu.abi import unpack_result
from wagogpu.config import config_from_json
from wagogpu.host.engine import functype

from ..guests import abi_module

SPIN = """
  (func (export "spin") (loop $l (br $l)))
  (func (export "seven") (result i32) (i32.const 7))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
  (func (export "pages") (result i32) (memory.size))"""
REENTER = """(module
  (import "env" "back" (func $back))
  (func (export "outer") (call $back) (loop $l (br $l)))
  (func (export "spin") (loop $l (br $l)))
  (func (export "seven") (result i32) (i32.const 7)))"""
GC_SET = """
  (type $af32c (array f32))
  (func (export "gc_set") (param $h i32) (param $n i32) (result i32)
    (call $setBufferGC (local.get $h) (i32.const 0) (array.new $af32c (f32.const 7) (local.get $n))
                       (i32.const 0) (local.get $n)))"""
F32 = ElementType.F32


def spin_host(**limits) -> Host:
    return Host(Config(disabled=True, **limits))


def test_call_timeout_interrupts_a_call_and_everything_keeps_working():
    with spin_host(call_timeout=0.1) as host, spin_host(call_timeout=5) as other:
        module = host.compile(abi_module(extra=SPIN))
        inst, neighbour = host.instantiate(module), host.instantiate(module)
        for _ in range(2):  # the same instance, again: a fresh deadline per call
            with pytest.raises(LimitTrap, match=r"call_timeout: spin ran past its 0\.1 s deadline") as caught:
                inst.call("spin")
            assert caught.value.limit == "call_timeout" and isinstance(caught.value, wasmtime.Trap)
            assert inst.call("seven") == 7
        assert neighbour.call("seven") == 7
        assert other.instantiate(other.compile(abi_module(extra=SPIN))).call("seven") == 7
        status, handle = unpack_result(inst.call("createBufferPacked", F32, 4))
        assert status == Status.OK and handle


def test_call_timeout_interrupts_a_start_function_and_the_host_goes_on():
    with spin_host(call_timeout=0.1) as host:
        looping = host.compile("(module (func $s (loop $l (br $l))) (start $s))")
        with pytest.raises(LimitTrap, match="the start function ran past its 0.1 s deadline"):
            host.instantiate(looping)
        assert host.buffer_snapshot().instances == []  # the failed instance was closed
        assert host.instantiate(host.compile(abi_module(extra=SPIN))).call("seven") == 7


def reentering(host: Host, swallow: bool):
    """An instance whose import calls back into its own spinning export (swallowing the trap or not)."""
    holder = []

    def back() -> None:
        try:
            holder[0].call("spin")
        except LimitTrap:
            if not swallow:
                raise

    host.define_func("env", "back", functype([], []), back)
    holder.append(host.instantiate(host.compile(REENTER)))
    return holder[0]


@pytest.mark.parametrize("swallow", [False, True])
def test_a_re_entry_shares_the_outer_calls_deadline(swallow):
    """The re-entry's trap comes out of the outer call; a host function that swallows it returns
    into a guest whose deadline has passed, which then traps at once."""
    with spin_host(call_timeout=0.1) as host:
        inst = reentering(host, swallow)
        with pytest.raises(LimitTrap, match="ran past its 0.1 s deadline"):
            inst.call("outer")
        assert inst.call("seven") == 7


def test_fuel_stops_a_call_and_the_next_call_starts_full():
    with spin_host(fuel=100_000) as host:
        inst = host.instantiate(host.compile(abi_module(extra=SPIN)))
        with pytest.raises(LimitTrap, match="fuel: spin used up its 100000 units of fuel") as caught:
            inst.call("spin")
        assert caught.value.limit == "fuel"
        assert inst.call("seven") == 7


def test_fuel_cut_inside_a_gc_transfer_is_recorded_and_commits_what_moved():
    """The accessor's move loop is the one piece of plugin code a limit can stop halfway: the call is
    recorded CANCELLED, the elements moved so far count as written, the array's reservation goes back."""
    with spin_host(fuel=200_000) as host:
        inst = host.instantiate(host.compile(abi_module(extra=GC_SET)))
        _status, handle = unpack_result(inst.call("createBufferPacked", F32, 100_000))
        reserved = host.buffer_snapshot().instances[0].reserved_bytes
        with pytest.raises(LimitTrap, match="fuel"):
            inst.call("gc_set", handle, 100_000)
        last = host.buffer_snapshot().last
        assert (last.import_name, last.status) == ("setBufferGC", Status.CANCELLED)
        assert host.buffer_snapshot().instances[0].reserved_bytes == reserved
        values = inst.read_buffer(handle)
        moved = int(np.count_nonzero(values == 7))
        assert 0 < moved < 100_000 and (values[:moved] == 7).all() and (values[moved:] == 0).all()
        assert inst.call("gc_set", handle, 10) == Status.OK


def test_memory_grow_past_the_limit_answers_minus_one_and_buffers_still_grow():
    with spin_host(max_memory_bytes=3 * 65536) as host:
        inst = host.instantiate(host.compile(abi_module(extra=SPIN)))
        assert inst.call("grow", 2) == 1 and inst.call("grow", 1) == -1 and inst.call("pages") == 3
        # The accessor memory (the buffers' bytes) is the host's: 4 MiB of buffers pass a 192 KiB guest limit.
        status, handle = unpack_result(inst.call("createBufferPacked", F32, 1 << 20))
        assert status == Status.OK and inst.read_buffer(handle).size == 1 << 20
        assert inst.call("grow", 1) == -1


@pytest.mark.parametrize("field, wat, says", [
    ("max_memory_bytes", '(module (memory 2))', "memory minimum size of 2 pages exceeds memory limits"),
    ("max_table_elements", '(module (table 20 funcref))', "table minimum size of 20 elements exceeds table limits"),
])
def test_a_module_that_starts_above_a_limit_is_refused(field, wat, says):
    with spin_host(**{field: 65536 if field == "max_memory_bytes" else 10}) as host:
        with pytest.raises(ModuleError, match=f"cannot instantiate: {says} \\({field}="):
            host.instantiate(host.compile(wat))
        host.instantiate(host.compile('(module (memory 1) (table 10 funcref))'))


def test_table_grow_past_the_limit_fails():
    wat = '(module (table 1 funcref) (func (export "grow") (param i32) (result i32) (table.grow (ref.null func) (local.get 0))))'
    with spin_host(max_table_elements=4) as host:
        inst = host.instantiate(host.compile(wat))
        assert inst.call("grow", 3) == 1 and inst.call("grow", 1) == -1


@pytest.mark.parametrize("field, value", [
    ("call_timeout", 0), ("call_timeout", float("nan")), ("call_timeout", float("inf")), ("call_timeout", "1"),
    ("fuel", 0), ("fuel", 1.5), ("fuel", True), ("max_memory_bytes", -1), ("max_table_elements", 2 ** 64),
])
def test_bad_limits_name_their_field(field, value):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        Config(disabled=True, **{field: value})
    with pytest.raises(ConfigError, match=f"^{field}: "):
        config_from_json({"disabled": True, field: value})


def test_limits_come_from_the_json_config():
    config = config_from_json({"disabled": True, "call_timeout": 2, "fuel": 10, "max_memory_bytes": 65536,
                               "max_table_elements": 0})
    assert (config.call_timeout, config.fuel, config.max_memory_bytes, config.max_table_elements) == (2.0, 10, 65536, 0)
    assert Config(disabled=True).call_timeout is None
