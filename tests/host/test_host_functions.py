"""Host.define_func (the host's own imports) and Host.instantiate(wasi=...): wasmtime-py's meaning,
the plugin's modules refused, host functions outside the host lock and safe to call back."""
from __future__ import annotations

import threading

import pytest
import wasmtime

from wagogpu import ModuleError, Status
from wagogpu.abi import unpack_result

I32 = wasmtime.ValType.i32()
LOG_TYPE = wasmtime.FuncType([I32, I32], [])

LOGGING_GUEST = """(module
  (import "env" "log" (func $log (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "hello from the guest")
  (func (export "run") (result i32)
    (call $log (i32.const 16) (i32.const 20))
    (i32.const 7)))"""


def test_a_guest_with_its_own_env_log_import_runs_once_it_is_defined(make_host):
    host = make_host()
    module = host.compile(LOGGING_GUEST)
    with pytest.raises(ModuleError) as e:
        host.instantiate(module)
    assert str(e.value) == ("cannot instantiate: unknown import: `env::log` has not been defined "
                            "(define it with Host.define_func before instantiating)")
    seen: list[str] = []

    def log(caller: wasmtime.Caller, address: int, length: int) -> None:
        memory = caller["memory"]
        assert isinstance(memory, wasmtime.Memory)
        seen.append(memory.read(caller, address, address + length).decode())

    host.define_func("env", "log", LOG_TYPE, log, access_caller=True)
    inst = host.instantiate(module)
    assert inst.call("run") == 7
    assert seen == ["hello from the guest"]


def test_without_a_caller_the_function_gets_the_arguments_and_its_result_goes_back(make_host):
    host = make_host()
    host.define_func("math", "twice", wasmtime.FuncType([wasmtime.ValType.i64()], [wasmtime.ValType.i64()]),
                     lambda x: 2 * x)
    inst = host.instantiate(host.compile(
        '(module (import "math" "twice" (func $t (param i64) (result i64)))'
        ' (func (export "f") (param i64) (result i64) (call $t (local.get 0))))'))
    assert inst.call("f", -(2 ** 40)) == -(2 ** 41)


def test_an_exception_in_a_host_function_comes_back_as_itself(make_host):
    host = make_host()
    calls: list[int] = []

    def fail_once(_a: int, _b: int) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise LookupError("no such log")

    host.define_func("env", "log", LOG_TYPE, fail_once)
    inst = host.instantiate(host.compile(LOGGING_GUEST))
    with pytest.raises(LookupError, match="no such log"):
        inst.call("run")
    assert inst.call("run") == 7 and len(calls) == 2  # the instance stays usable


@pytest.mark.parametrize("module, message", [
    ("wago_gpu_v1", "define_func: module 'wago_gpu_v1' is the wago_gpu_v1 buffer ABI, served by the plugin; "
                    "define host functions under another module"),
    ("wago_gpu", "define_func: module 'wago_gpu' is the legacy wago_gpu ABI, served by the plugin; "
                 "define host functions under another module"),
    ("wagogpu", "define_func: module 'wagogpu' is internal to the plugin; define host functions under another module"),
    ("wagogpu:guest", "define_func: module 'wagogpu:guest' is internal to the plugin; "
                      "define host functions under another module"),
])
def test_the_plugins_modules_are_refused(make_host, module, message):
    host = make_host()
    with pytest.raises(ValueError) as e:
        host.define_func(module, "dispatch", wasmtime.FuncType([I32, I32], [I32]), lambda a, b: 0)
    assert str(e.value) == message
    assert len(host.context.definitions) == 0


def test_bad_definitions_are_one_line_errors(make_host):
    host = make_host()
    with pytest.raises(TypeError, match="^define_func: ty must be a wasmtime.FuncType, got tuple$"):
        host.define_func("env", "log", (I32,), print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^define_func: func must be callable, got int$"):
        host.define_func("env", "log", LOG_TYPE, 3)  # type: ignore[arg-type]
    host.define_func("env", "log", LOG_TYPE, lambda a, b: None)
    with pytest.raises(ValueError, match="^define_func: env::log is already defined$"):
        host.define_func("env", "log", LOG_TYPE, lambda a, b: None)


def test_a_definition_applies_to_instances_made_afterwards(make_host):
    host = make_host()
    earlier = host.compile('(module (import "env" "f" (func)))')
    host.define_func("env", "g", wasmtime.FuncType([], []), lambda: None)
    with pytest.raises(ModuleError, match="env::f"):
        host.instantiate(earlier)
    host.define_func("env", "f", wasmtime.FuncType([], []), lambda: None)
    host.instantiate(earlier).close()


def test_a_wrong_import_type_is_a_module_error(make_host):
    host = make_host()
    host.define_func("env", "log", wasmtime.FuncType([I32], []), lambda a: None)
    with pytest.raises(ModuleError, match="^cannot instantiate: .*env::log"):
        host.instantiate(host.compile(LOGGING_GUEST))


CALLBACK_GUEST = """(module
  (import "env" "callback" (func $callback (param i32) (result i32)))
  (import "wago_gpu_v1" "createBufferPacked" (func $create (param i32 i32) (result i64)))
  (export "createBufferPacked" (func $create))
  (func (export "viaHost") (param i32) (result i64) (i64.extend_i32_u (call $callback (local.get 0)))))"""


def test_a_host_function_may_call_back_into_its_instances_imports(make_host):
    """Host functions run outside the host lock: one that calls the same instance's imports (and one
    that waits for another thread taking the lock) finishes instead of deadlocking."""
    host = make_host()
    box: dict[str, object] = {}

    def callback(count: int) -> int:
        inst = box["inst"]
        status, handle = unpack_result(inst.call("createBufferPacked", 8, count))  # a wago_gpu_v1 import
        assert status == Status.OK
        other = threading.Thread(target=lambda: box.setdefault("snapshot", host.buffer_snapshot()))
        other.start()
        other.join(timeout=10)
        assert not other.is_alive(), "another thread could not take the host lock during a host function"
        return handle

    host.define_func("env", "callback", wasmtime.FuncType([I32], [I32]), callback)
    inst = box["inst"] = host.instantiate(host.compile(CALLBACK_GUEST))
    handle = inst.call("viaHost", 5)
    assert inst.read_buffer(handle).tolist() == [0.0] * 5
    assert box["snapshot"].last.import_name == "createBufferPacked"
    assert [b.length for b in inst.buffers.buffers.values()] == [5]


def test_closing_the_instance_from_a_host_function_is_deferred_until_the_call_returns(make_host):
    host = make_host()
    box: dict[str, object] = {}

    def close_it(_a: int, _b: int) -> None:
        box["inst"].close()

    host.define_func("env", "log", LOG_TYPE, close_it)
    inst = box["inst"] = host.instantiate(host.compile(LOGGING_GUEST))
    assert inst.call("run") == 7  # the guest finished on a live store
    assert inst.closed
    with pytest.raises(ValueError, match="^instance .* is closed$"):
        inst.call("run")


# -- WASI ---------------------------------------------------------------------------------------------
WASI_GUEST = """(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $env_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $arg_sizes (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "written through fd_write\\n")
  (func (export "hello") (result i32)
    (i32.store (i32.const 0) (i32.const 64))
    (i32.store (i32.const 4) (i32.const 25))
    (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
  (func (export "counts") (result i32 i32)
    (drop (call $env_sizes (i32.const 100) (i32.const 104)))
    (drop (call $arg_sizes (i32.const 108) (i32.const 112)))
    (i32.load (i32.const 100)) (i32.load (i32.const 108))))"""


def test_wasi_set_by_the_caller_captures_stdout_and_sets_argv_and_env(make_host, tmp_path):
    host = make_host()
    module = host.compile(WASI_GUEST)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["guest", "--fast", "x"]
    wasi.env = [("A", "1"), ("B", "2")]
    out = tmp_path / "stdout.txt"
    wasi.stdout_file = str(out)
    inst = host.instantiate(module, wasi=wasi)
    assert inst.call("hello") == 0
    assert inst.call("counts") == [2, 3]
    inst.close()
    assert out.read_text() == "written through fd_write\n"
    with pytest.raises(ValueError, match="^wasi: this WasiConfig was given to an earlier instance"):
        host.instantiate(module, wasi=wasi)
    with pytest.raises(TypeError, match="^instantiate: wasi must be a wasmtime.WasiConfig, got dict$"):
        host.instantiate(module, wasi={"argv": []})  # type: ignore[arg-type]


def test_without_a_wasi_config_stdout_is_inherited(make_host, capfd):
    host = make_host()
    inst = host.instantiate(host.compile(WASI_GUEST))
    assert inst.call("hello") == 0
    assert "written through fd_write" in capfd.readouterr().out


def test_a_host_function_may_replace_a_wasi_function(make_host):
    host = make_host()
    host.define_func("wasi_snapshot_preview1", "environ_sizes_get", wasmtime.FuncType([I32, I32], [I32]),
                     lambda a, b: 52)
    inst = host.instantiate(host.compile(
        '(module (import "wasi_snapshot_preview1" "environ_sizes_get" (func $e (param i32 i32) (result i32)))'
        ' (func (export "f") (result i32) (call $e (i32.const 0) (i32.const 4))))'))
    assert inst.call("f") == 52


def test_a_host_function_may_call_the_export_that_called_it(make_host):
    """Instance.call is re-entrant: an export calling a host function calling the same export."""
    host = make_host()
    box: dict[str, object] = {}
    host.define_func("env", "down", wasmtime.FuncType([I32], [I32]),
                     lambda n: box["inst"].call("count", n - 1) + 10)
    inst = box["inst"] = host.instantiate(host.compile(
        '(module (import "env" "down" (func $down (param i32) (result i32)))'
        ' (func (export "count") (param i32) (result i32)'
        '   (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 1))'
        '     (else (i32.add (local.get 0) (call $down (local.get 0)))))))'))
    assert inst.call("count", 3) == 3 + 10 + 2 + 10 + 1 + 10 + 1
