"""The WASI context of an instance: the caller's wasmtime.WasiConfig, or the default for a module
that imports WASI (stdout and stderr inherited, nothing else), set on the store before anything
else is made in it."""
from __future__ import annotations

from typing import TYPE_CHECKING

import wasmtime

if TYPE_CHECKING:  # pragma: no cover  (type-only: closes no runtime circle)
    from .module import Module


def imports_wasi(module: Module) -> bool:
    return any(imp.module.startswith("wasi") for imp in module.compiled.imports)


def set_wasi(store: wasmtime.Store, wasi: wasmtime.WasiConfig | None, module: Module) -> bool:
    """Give the store the caller's WASI context, or the default (stdout and stderr inherited) when
    the module imports WASI; True when the linker must define WASI."""
    if wasi is None:
        if not imports_wasi(module):
            return False
        wasi = wasmtime.WasiConfig()
        wasi.inherit_stdout()
        wasi.inherit_stderr()
    try:
        store.set_wasi(wasi)
    except ValueError:  # wasmtime-py consumes a WasiConfig when a store takes it
        raise ValueError("wasi: this WasiConfig was given to an earlier instance (wasmtime consumes it); "
                         "make one per instance") from None
    return True
