"""wagogpu: run WebAssembly guests on wasmtime and offload their element kernels to a GPU (wago_gpu_v1).

Importing this package loads nothing heavy: every public name is resolved on first use (PEP 562),
so `import wagogpu` costs no wasmtime, numpy or GPU stack, and the GPU stack loads only when a
Host opens a device.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .abi.table import Access, ElementType, Status
    from .compiler.contract import CompileError, CompileErrorKind
    from .config import BindingConfig, Config, KernelConfig, config_from_json
    from .errors import ConfigError, GpuRequiredError, ModuleError
    from .host import Host, Instance, Module
    from .host.guest_limits import LimitTrap

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_PUBLIC = {
    "Host": ".host", "Module": ".host", "Instance": ".host",
    "Config": ".config", "KernelConfig": ".config", "BindingConfig": ".config",
    "config_from_json": ".config",
    "ElementType": ".abi.table", "Access": ".abi.table", "Status": ".abi.table",
    "CompileError": ".compiler.contract", "CompileErrorKind": ".compiler.contract",
    "ConfigError": ".errors", "ModuleError": ".errors", "GpuRequiredError": ".errors",
    "LimitTrap": ".host.guest_limits",
}

__all__ = [*_PUBLIC, "compile_buffer_wgsl", "compile_wgsl"]


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def compile_buffer_wgsl(source: bytes, kernel: KernelConfig) -> str:
    """WGSL for one buffer kernel of a module; raises CompileError."""
    from .compiler import compile_buffer_wgsl as _compile

    return _compile(source, kernel)


def compile_wgsl(source: bytes, export: str, storage_binding: int = 0) -> str:
    """WGSL for a legacy (f32) -> f32 kernel, its array at `storage_binding`; raises CompileError."""
    from .compiler import compile_wgsl as _compile

    return _compile(source, export, storage_binding=storage_binding)
