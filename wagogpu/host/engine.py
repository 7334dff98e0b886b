"""The wasmtime engine settings every Host uses, value types, and wasmtime's errors as one line."""
from __future__ import annotations

import re
import threading
from typing import Callable, Sequence

import wasmtime

WASM_FEATURES = ("wasm_gc", "wasm_function_references", "wasm_memory64", "wasm_multi_memory",
                 "wasm_reference_types", "wasm_bulk_memory", "wasm_multi_value", "wasm_simd")

#: What an instance exports and a linker defines (wasmtime-py's extern kinds).
Extern = wasmtime.Func | wasmtime.Table | wasmtime.Memory | wasmtime.SharedMemory | wasmtime.Global | wasmtime.Tag

VALTYPES = {
    "i32": wasmtime.ValType.i32, "i64": wasmtime.ValType.i64,
    "f32": wasmtime.ValType.f32, "f64": wasmtime.ValType.f64,
}


def functype(params: Sequence[str], results: Sequence[str]) -> wasmtime.FuncType:
    """A FuncType from the ABI table's value type names."""
    return wasmtime.FuncType([VALTYPES[p]() for p in params], [VALTYPES[r]() for r in results])


def new_engine(epoch: bool = False, fuel: bool = False) -> wasmtime.Engine:
    """The engine of one Host; ``epoch`` and ``fuel`` compile the checks Config.call_timeout and
    Config.fuel need into every function (only when asked: they cost time, bench/guest_limits.py)."""
    cfg = wasmtime.Config()
    cfg.epoch_interruption = epoch
    cfg.consume_fuel = fuel
    for feature in WASM_FEATURES:
        setattr(cfg, feature, True)
    # Guests may declare shared memories; the ABI refuses transfers on them (status 11).
    cfg.wasm_threads = True
    cfg.shared_memory = True
    return wasmtime.Engine(cfg)


def compile_in_background(engine: wasmtime.Engine, wat: str) -> Callable[[], wasmtime.Module]:
    """Start compiling ``wat`` on a thread of its own and return the call that waits for the
    Module (raising what the compile raised). A Host compiles its accessor module this way while
    its device opens: both are native calls that release the GIL (~75 ms and ~200 ms cold)."""
    done: list[wasmtime.Module | BaseException] = []

    def run() -> None:
        try:
            done.append(wasmtime.Module(engine, wat))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            done.append(exc)

    thread = threading.Thread(target=run, name="wagogpu-accessor-compile", daemon=True)
    thread.start()

    def result() -> wasmtime.Module:
        thread.join()
        value = done[0]
        if isinstance(value, BaseException):
            raise value
        return value

    return result


def first_line(exc: BaseException) -> str:
    """One line from an error: wasmtime's cause chain folded in, backtraces dropped."""
    parts: list[str] = []
    for raw in str(exc).splitlines():
        line = raw.strip()
        if (not line or line == "Caused by:" or line.startswith(("-->", "|")) or "wasm backtrace" in line
                or re.match(r"^\d+ \|", line)):
            continue
        head, _, rest = line.partition(": ")
        if head.isdigit():
            line = rest
        if line and line not in parts:
            parts.append(line)
    return ": ".join(parts) if parts else type(exc).__name__
