"""Calls from several threads at once, each with traps and host-function exceptions: every call
gets its own outcome (its own status trap, its own exception, its own value), whether each thread
has its own Host or all share one. The exception a host function raises used to travel through a
process-wide slot, so under threads it came out of whichever call looked first."""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import wasmtime

from wagogpu import Config, ElementType, Host

from ..guests import abi_module

THREADS = 4
ROUNDS = 400
IMPORTS = """
  (import "env" "fast_raise" (func $fast_raise (param i32)))
  (import "env" "caller_raise" (func $caller_raise (param i32)))"""
GUEST = abi_module(extra="""
  (func (export "fastRaise") (param i32) (call $fast_raise (local.get 0)))
  (func (export "callerRaise") (param i32) (call $caller_raise (local.get 0)))
  (func (export "unreachable") unreachable)""").replace("(module", "(module" + IMPORTS, 1)  # imports first


class Raised(Exception):
    """What the host functions raise: which thread, which round, which function."""


def fast_raise(tag: int) -> None:
    raise Raised("fast", tag)


def caller_raise(_caller: object, tag: int) -> None:
    raise Raised("caller", tag)


def make_host() -> Host:
    host = Host(Config(disabled=True))
    host.define_func("env", "fast_raise", wasmtime.FuncType([wasmtime.ValType.i32()], []), fast_raise)
    host.define_func("env", "caller_raise", wasmtime.FuncType([wasmtime.ValType.i32()], []), caller_raise,
                     access_caller=True)
    return host


def outcome(fn: Callable[[], object]) -> object:
    try:
        return ("value", fn())
    except Raised as exc:
        return ("raised", exc.args)
    except wasmtime.Trap as exc:
        text = str(exc)
        return ("trap", "unreachable" if "unreachable" in text else text.split("scalar access: ", 1)[-1][:8])
    except Exception as exc:  # noqa: BLE001 - anything else is a wrong outcome, reported as such
        return ("other", f"{type(exc).__name__}: {exc}"[:80])


def worker(host: Host, index: int, wrong: list[tuple], counts: list[int]) -> None:
    try:
        calls(host, index, wrong, counts)
    except BaseException as exc:  # noqa: BLE001 - the main thread reports it
        wrong.append((index, "worker raised", repr(exc)))


def calls(host: Host, index: int, wrong: list[tuple], counts: list[int]) -> None:
    inst = host.instantiate(host.compile(GUEST))
    handle, status = inst.call("createBuffer", ElementType.I32, 4)
    assert status == 0
    value = 1000 + index
    inst.call("writebitsI32", handle, 0, value)
    n = 0
    for r in range(ROUNDS):
        tag = index * 1_000_000 + r
        cases = [
            (lambda: inst.call("readbitsI32", 999_999, 0), ("trap", "status 2")),
            (lambda: inst.call("readbitsI32", handle, 1000), ("trap", "status 3")),
            (lambda: inst.call("readbitsI32", handle, 0), ("value", value)),
            (lambda: inst.call("fastRaise", tag), ("raised", ("fast", tag))),
            (lambda: inst.call("callerRaise", tag), ("raised", ("caller", tag))),
            (lambda: inst.call("unreachable"), ("trap", "unreachable")),
        ]
        for call, expected in cases:
            got = outcome(call)
            n += 1
            if got != expected:
                wrong.append((index, expected, got))
    counts[index] = n
    inst.close()


@contextmanager
def busy_switching() -> Iterator[None]:
    """Switch threads far more often than the default 5 ms, so calls interleave densely."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize("shared", [False, True], ids=["host-per-thread", "one-shared-host"])
def test_every_call_gets_its_own_trap_exception_or_value(shared: bool) -> None:
    hosts = [make_host()] * THREADS if shared else [make_host() for _ in range(THREADS)]
    wrong: list[tuple] = []
    counts = [0] * THREADS
    threads = [threading.Thread(target=worker, args=(hosts[i], i, wrong, counts)) for i in range(THREADS)]
    with busy_switching():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for host in set(hosts):
        host.close()
    assert counts == [ROUNDS * 6] * THREADS  # every thread ran every call
    assert wrong == []
