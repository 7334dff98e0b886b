"""`wagogpu run --timeout/--fuel/--max-memory`, its default time limit, and hostile inputs: a deeply
nested config, a guest's proc_exit, a file that never ends."""
from __future__ import annotations

import json
import os

import pytest

from wagogpu.cli import build_parser
from wagogpu.cli.run import DEFAULT_CALL_TIMEOUT, run_config
from wagogpu.host import source

from .test_cli import assert_error, run_cli

LOOP_CALL = '(module (memory 1) (func (export "run") (loop $l (br $l))))'
LOOP_START = '(module (func $s (loop $l (br $l))) (start $s) (func (export "run")))'
GROW = '(module (memory 1) (func (export "run") (result i32) (memory.grow (i32.const 2))))'
EXIT = """(module (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1) (func (export "run") (call $exit (i32.const 7))))"""


@pytest.fixture
def files(tmp_path):
    def write(name: str, text: str):
        path = tmp_path / name
        path.write_text(text)
        return path
    write("config.json", json.dumps({"disabled": True}))
    return lambda name, text=None: write(name, text) if text is not None else tmp_path / name


@pytest.mark.parametrize("wat, flags, says", [
    (LOOP_CALL, ["--timeout", "0.2"], "trap in run: call_timeout: run ran past its 0.2 s deadline"),
    (LOOP_START, ["--timeout", "0.2"], "trap in the start function: call_timeout: the start function ran past"),
    (LOOP_CALL, ["--fuel", "5000"], "trap in run: fuel: run used up its 5000 units of fuel"),
])
def test_a_limit_ends_the_run_with_a_trap(capsys, files, wat, flags, says):
    assert_error(capsys, ["run", files("guest.wat", wat), "--config", files("config.json"), "--call", "run", *flags],
                 says, code=1)


def test_max_memory_bounds_growth_and_refuses_a_module_above_it(capsys, files):
    code, out, _err = run_cli(capsys, "run", files("grow.wat", GROW), "--config", files("config.json"),
                              "--call", "run", "--max-memory", 2 * 65536)
    assert code == 0 and "result: -1" in out
    assert_error(capsys, ["run", files("grow.wat"), "--config", files("config.json"), "--max-memory", 1000],
                 "cannot instantiate: memory minimum size of 1 pages exceeds memory limits (max_memory_bytes=1000)")


def test_a_run_has_a_default_time_limit_that_the_flag_and_the_config_change(files):
    def timeout(*flags: str, config: str = "config.json"):
        args = build_parser().parse_args(["run", str(files("guest.wat", LOOP_CALL)), "--config", str(files(config)),
                                          *flags])
        return run_config(args).call_timeout
    files("own.json", json.dumps({"disabled": True, "call_timeout": 3}))
    assert timeout() == DEFAULT_CALL_TIMEOUT
    assert timeout("--timeout", "0") is None and timeout("--timeout", "1.5") == 1.5
    assert timeout(config="own.json") == 3.0 and timeout("--timeout", "2", config="own.json") == 2.0


@pytest.mark.parametrize("flag, value, says", [("--timeout", "-1", "0 or more finite seconds"),
                                               ("--timeout", "nan", "0 or more finite seconds"),
                                               ("--fuel", "0", "expected 1 or more"),
                                               ("--max-memory", "lots", "expected a whole number")])
def test_bad_limit_flags_are_usage_errors(capsys, files, flag, value, says):
    assert_error(capsys, ["run", files("guest.wat", LOOP_CALL), "--config", files("config.json"), flag, value],
                 flag, says)


def test_a_deeply_nested_config_is_one_line(capsys, files):
    deep = files("deep.json", "[" * 100_000 + "]" * 100_000)
    assert_error(capsys, ["run", files("guest.wat", LOOP_CALL), "--config", deep], "deep.json: invalid JSON: nested too deeply")


def test_proc_exit_in_the_call_exits_with_its_code(capsys, files):
    code, _out, err = run_cli(capsys, "run", files("exit.wat", EXIT), "--config", files("config.json"), "--call", "run")
    assert code == 7 and err == ["run exited with code 7 (WASI proc_exit)"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_file_is_refused_at_its_limit(capsys, files, monkeypatch):
    monkeypatch.setattr(source, "MAX_SOURCE_BYTES", 1 << 20)
    assert_error(capsys, ["run", "/dev/zero", "--config", files("config.json")], "larger than the 1 MiB limit on a module")
    assert_error(capsys, ["run", files("guest.wat", LOOP_CALL), "--config", "/dev/zero"],
                 "/dev/zero: larger than the 16 MiB limit on a config file")
