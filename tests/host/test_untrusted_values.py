"""Values an embedder or a guest gives the host that it cannot take: each is refused with a clear
error naming what is wrong, never a process abort or a failure later on (the hostile campaign's
v128 exports, non-finite run_timeouts, unsigned host-function results, bytes for a buffer)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import wasmtime

from wagogpu import Config, ConfigError, ElementType, Host, Status
from wagogpu.config import config_from_json
from wagogpu.host.access import BufferAccessError

from ..guests import abi_module

V128 = """(module
  (func (export "result") (result v128) (v128.const i32x4 1 2 3 4))
  (func (export "param") (param i32 v128))
  (func (export "fine") (result i32) (i32.const 7)))"""


def test_a_v128_parameter_or_result_is_refused_not_a_process_abort() -> None:
    # In a child: a regression aborts the process (SIGABRT) rather than raising.
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(f'''
        from wagogpu import Config, Host
        host = Host(Config(disabled=True))
        inst = host.instantiate(host.compile({V128!r}))
        for name, args in (("result", ()), ("param", (1, 0)), ("result", ())):
            try:
                inst.call(name, *args)
                print("returned")
            except TypeError as exc:
                print(exc)
        print(inst.call("fine"))
        ''')], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-1500:]
    assert child.stdout.splitlines() == [
        "export 'result': v128 result 1 cannot cross to Python (wasmtime-py has no v128 values); call it from "
        "Wasm, or export a wrapper with scalar values",
        "export 'param': v128 parameter 2 cannot cross to Python (wasmtime-py has no v128 values); call it from "
        "Wasm, or export a wrapper with scalar values",
        "export 'result': v128 result 1 cannot cross to Python (wasmtime-py has no v128 values); call it from "
        "Wasm, or export a wrapper with scalar values",
        "7"]


def test_wagogpu_run_refuses_a_v128_export_with_a_usage_error(tmp_path) -> None:
    module = tmp_path / "v128.wasm"
    module.write_bytes(wasmtime.wat2wasm(V128))
    config = tmp_path / "cpu.json"
    config.write_text('{"disabled": true}')
    for call, text in ((["result"], "result returns a v128 value, which cannot cross to Python"),
                       (["param", "1", "0"], "argument 2 of param (v128): '0': a v128 parameter cannot be given")):
        done = subprocess.run([sys.executable, "-m", "wagogpu", "run", str(module), "--config", str(config),
                               "--call", *call], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and text in done.stderr, (done.returncode, done.stderr[-800:])
        assert "Traceback" not in done.stderr


def test_define_func_refuses_a_v128_signature() -> None:
    # In a child too: copying a v128 FuncType asks wasm.h for its kind, which aborts the process.
    child = subprocess.run([sys.executable, "-c", textwrap.dedent('''
        import wasmtime
        from wagogpu import Config, Host
        importing = wasmtime.Module(wasmtime.Engine(), '(module (import "env" "g" (func (param v128))))')
        host = Host(Config(disabled=True))
        try:
            host.define_func("env", "g", importing.imports[0].type, lambda value: None)
        except TypeError as exc:
            print(exc)
        ''')], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-1500:]
    assert child.stdout.startswith("define_func: env::g: v128 parameter 1 cannot cross to Python")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 1e308, 1e6 + 1, -1.0])
def test_a_run_timeout_that_is_not_a_usable_number_of_seconds_is_a_config_error(value: float) -> None:
    with pytest.raises(ConfigError, match=r"^run_timeout: expected seconds from 0 \(the default\) to 1e\+06"):
        Config(disabled=True, run_timeout=value)
    text = json.dumps({"disabled": True, "run_timeout": value})  # NaN / Infinity / -Infinity as JSON writes them
    with pytest.raises(ConfigError, match=r"^run_timeout: "):
        config_from_json(json.loads(text))


def test_the_longest_run_timeout_is_usable() -> None:
    assert Config(disabled=True, run_timeout=1e6).run_timeout == 1e6
    assert Config(disabled=True, run_timeout=0).run_timeout == 5.0  # 0 takes the default
    host = Host(Config(disabled=True, run_timeout=1e6))
    inst = host.instantiate(host.compile(abi_module()))
    handle, status = inst.call("createBuffer", ElementType.I32, 4)
    assert status == 0
    inst.write_buffer(handle, [1, 2, 3, 4])  # an import under the deadline: no overflow computing it
    assert inst.read_buffer(handle).tolist() == [1, 2, 3, 4]
    host.close()


def _host_returning(kind: str, value: object) -> tuple[Host, object]:
    host = Host(Config(disabled=True))
    valtype = {"i32": wasmtime.ValType.i32(), "i64": wasmtime.ValType.i64()}[kind]
    host.define_func("env", "h", wasmtime.FuncType([], [valtype]), lambda: value)
    wat = f'(module (import "env" "h" (func $h (result {kind}))) (func (export "f") (result {kind}) (call $h)))'
    return host, host.instantiate(host.compile(wat))


@pytest.mark.parametrize("kind,value,seen", [
    ("i32", 0xFFFFFFFF, -1), ("i32", 0x80000000, -(1 << 31)), ("i32", -5, -5),
    ("i64", (1 << 64) - 1, -1), ("i64", 1 << 63, -(1 << 63)), ("i64", 12, 12)])
def test_a_host_function_result_is_taken_in_either_spelling_as_calls_take_arguments(kind, value, seen) -> None:
    host, inst = _host_returning(kind, value)
    assert inst.call("f") == seen
    host.close()


@pytest.mark.parametrize("kind,value", [("i32", 1 << 32), ("i32", -(1 << 31) - 1), ("i64", 1 << 64)])
def test_a_host_function_result_outside_both_spellings_names_itself(kind, value) -> None:
    host, inst = _host_returning(kind, value)
    with pytest.raises(ValueError, match=rf"^host function result 1 \({kind}\) is {value}, outside "):
        inst.call("f")
    host.close()


@pytest.mark.parametrize("values", [b"abcd", "abcd", np.array([b"ab", b"cd"])])
def test_bytes_or_text_for_a_buffer_answer_type_mismatch(values) -> None:
    host = Host(Config(disabled=True))
    inst = host.instantiate(host.compile(abi_module()))
    handle, _ = inst.call("createBuffer", ElementType.F32, 4)
    with pytest.raises(BufferAccessError) as caught:
        inst.write_buffer(handle, values)
    assert caught.value.status is Status.TYPE_MISMATCH and "cannot be written to a F32 buffer" in str(caught.value)
    host.close()
