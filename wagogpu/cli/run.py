"""`wagogpu run`: instantiate a guest under a JSON Config, call one export, and say what happened:
the result, the device, the last operation and the last dispatch (status name, outcome, reason
code and reason), and after a trap the last import that answered an error status, which is
usually why the guest trapped (a guest that checks statuses traps on the one it did not expect)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence

from .common import Failure, UsageError, adapter_changes, load_config, load_module

if TYPE_CHECKING:  # pragma: no cover
    import wasmtime

    from ..config import Config
    from ..diagnostics import BufferOperation
    from ..host import Host


def trap_text(exc: BaseException) -> str:
    """The trap itself (e.g. "wasm trap: wasm `unreachable` instruction executed"), without backtrace frames."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if "trap" in line or "wago_gpu" in line:
            return line
    return lines[-1] if lines else type(exc).__name__


def convert_args(compiled: wasmtime.Module, export: str, raw: Sequence[str]) -> list[int | float]:
    """Command-line words as values for the export's parameters (a UsageError names what is wrong)."""
    import wasmtime

    from ..host._wasmtime import value_kinds

    functype = None
    names = []
    for e in compiled.exports:
        if isinstance(e.type, wasmtime.FuncType):
            names.append(e.name)
            if e.name == export:
                functype = e.type
    if functype is None:
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise UsageError(f"no exported function {export!r} (exported: {shown or 'none'})")
    params = value_kinds(functype.params)  # (str() of a v128 ValType aborts the process)
    if "v128" in value_kinds(functype.results):
        raise UsageError(f"{export} returns a v128 value, which cannot cross to Python; call an export with scalar results")
    if len(raw) != len(params):
        raise UsageError(f"{export} takes {len(params)} argument(s) ({' '.join(params) or 'none'}), got {len(raw)}")
    values: list[int | float] = []
    for i, (text, kind) in enumerate(zip(raw, params)):
        try:
            if kind in ("i32", "i64"):
                bits = 32 if kind == "i32" else 64
                value = int(text, 0)
                if not -(1 << (bits - 1)) <= value < (1 << bits):
                    raise ValueError(f"out of range for {kind}")
                values.append(value - (1 << bits) if value >= (1 << (bits - 1)) else value)
            elif kind in ("f32", "f64"):
                values.append(float(text))
            else:
                raise ValueError(f"a {kind} parameter cannot be given on the command line")
        except ValueError as exc:
            raise UsageError(f"argument {i + 1} of {export} ({kind}): {text!r}: {exc}") from exc
    return values


def format_result(result: object) -> str:
    if result is None:
        return "(no result)"
    if isinstance(result, (tuple, list)):
        return " ".join(format_result(r) for r in result)
    if isinstance(result, float):
        return repr(result)
    return str(result)


def status_text(status: int) -> str:
    from ..abi.table import Status

    try:
        return f"{Status(status).name} ({status})"
    except ValueError:
        return str(status)


def describe(op: BufferOperation, timing: bool = True, named: bool = True) -> str:
    """One import record: name (kernel and count for a dispatch), status by name, outcome, reason."""
    text = op.import_name if named else ""
    if op.import_name == "dispatch":
        text = f"{text} kernel {op.kernel_id} count {op.count}".lstrip()
    text += f", status {status_text(op.status)}, outcome {op.outcome}"
    if op.reason_code != "NONE" or op.reason:
        text += f" ({op.reason_code}: {op.reason})"
    return text + (f", {op.total * 1e3:.3f} ms" if timing else "")


def device_line(host: Host) -> str:
    snap = host.buffer_snapshot()
    if snap.device:
        return f"device: {snap.device} ({snap.state})"
    return f"device: none ({snap.state}: {snap.reason})"


def after_trap(host: Host, what: str, exc: BaseException) -> Failure:
    """The trap, with the last import that answered an error status (the cause, usually)."""
    snap = host.buffer_snapshot()
    failed, last = snap.last_failure, snap.last_dispatch
    text = f"trap in {what}: {trap_text(exc)}"
    if failed.import_name:
        text += f"; the last import that failed: {describe(failed, timing=False)}"
    if last.outcome == "CPU_FALLBACK_READY" and last.sequence > failed.sequence:
        text += (f"; the last dispatch (kernel {last.kernel_id} count {last.count}) fell back from the GPU to the "
                 f"guest's CPU runner, {last.reason_code}: {last.reason or 'no reason recorded'}")
    return Failure(text)


#: call_timeout of `wagogpu run` when neither --timeout nor the config sets one: a guest that
#: loops ends with a trap instead of never.
DEFAULT_CALL_TIMEOUT = 10.0


def limit_changes(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    """The Config fields --timeout, --fuel and --max-memory set (--timeout 0: no time limit)."""
    changes: dict[str, Any] = {}
    timeout = getattr(args, "timeout", None)
    if timeout is not None:
        changes["call_timeout"] = timeout or None
    elif config.call_timeout is None:
        changes["call_timeout"] = DEFAULT_CALL_TIMEOUT
    for flag, field in (("fuel", "fuel"), ("max_memory", "max_memory_bytes")):
        if getattr(args, flag, None) is not None:
            changes[field] = getattr(args, flag)
    return changes


def run_config(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    changes: dict[str, Any] = {**adapter_changes(args), **limit_changes(args, config)}
    for flag, field, value in (("cpu", "disabled", True), ("allow_software_adapter", "allow_software_adapter", True),
                               ("require_gpu", "require_gpu", True)):
        if getattr(args, flag):
            changes[field] = value
    try:
        return config.with_changes(**changes) if changes else config
    except ValueError as exc:  # ConfigError naming --adapter's or --backend's field
        raise UsageError(str(exc)) from exc


def open_host(config: Config) -> Host:
    from ..errors import ConfigError, GpuRequiredError
    from ..host import Host

    try:
        return Host(config)
    except GpuRequiredError as exc:
        raise Failure(str(exc)) from exc
    except ConfigError as exc:  # an adapter or backend that matches nothing
        raise UsageError(str(exc)) from exc


def guest_exit(what: str, exc: wasmtime.ExitTrap) -> int:
    """A guest's WASI proc_exit: say so, and exit with its code as wasmtime's own CLI does."""
    print(f"{what} exited with code {exc.code} (WASI proc_exit)", file=sys.stderr)
    return exc.code


def cmd_run(args: argparse.Namespace) -> int:
    import wasmtime

    from ..errors import ModuleError
    from ..host.engine import first_line, new_engine

    config = run_config(args)
    wasm = load_module(args.module)
    export, raw_args = (args.call[0], args.call[1:]) if args.call else (None, [])
    # Check the export and its arguments before a device is opened (that can take a second).
    values = convert_args(wasmtime.Module(new_engine(), wasm), export, raw_args) if export else []
    with open_host(config) as host:
        try:
            module = host.compile(wasm)
            t0 = time.perf_counter()
            inst = host.instantiate(module)
        except wasmtime.Trap as exc:
            raise after_trap(host, "the start function", exc) from exc
        except ModuleError as exc:
            raise UsageError(f"{args.module}: {exc}") from exc
        except wasmtime.ExitTrap as exc:
            return guest_exit("the start function", exc)
        except wasmtime.WasmtimeError as exc:
            raise Failure(f"the start function failed: {first_line(exc)}") from exc
        result = None
        if export:
            try:
                result = inst.call(export, *values)
            except wasmtime.Trap as exc:
                raise after_trap(host, export, exc) from exc
            except wasmtime.ExitTrap as exc:
                return guest_exit(export, exc)
        seconds = time.perf_counter() - t0
        print(f"result: {format_result(result)}" if export else "instantiated (start function ran); no --call given")
        print(device_line(host))
        snap = host.buffer_snapshot()
        print(f"last operation: {describe(snap.last)}" if snap.last.import_name else "last operation: none")
        print(f"last dispatch: {describe(snap.last_dispatch, named=False)}" if snap.last_dispatch.import_name
              else "last dispatch: none")
        print(f"wall clock: {seconds * 1e3:.3f} ms (instantiate{' and call' if export else ''})")
    return 0
