"""The wasmtime engine settings every Host uses, value types, and wasmtime's errors as one line."""
from __future__ import annotations

import re
from typing import Sequence

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


def new_engine() -> wasmtime.Engine:
    cfg = wasmtime.Config()
    for feature in WASM_FEATURES:
        setattr(cfg, feature, True)
    # Guests may declare shared memories; the ABI refuses transfers on them (status 11).
    cfg.wasm_threads = True
    cfg.shared_memory = True
    return wasmtime.Engine(cfg)


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
