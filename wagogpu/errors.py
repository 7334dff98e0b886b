"""The exceptions a caller of wagogpu catches. A leaf: it imports nothing of the package.

CompileError lives with the compiler (wagogpu.compiler); ``wagogpu.errors.CompileError`` reaches
it lazily so that importing this module never loads the compiler.
"""
from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "ModuleError", "GpuRequiredError", "CompileError"]


class ConfigError(ValueError):
    """A configuration value is invalid; the message starts with the field's name."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class ModuleError(ValueError):
    """A module the runtime cannot take (malformed Wasm or WAT, or a failed link)."""


class GpuRequiredError(RuntimeError):
    """require_gpu=True and no hardware adapter opened."""


def __getattr__(name: str) -> Any:
    if name == "CompileError":
        from .compiler.contract import CompileError

        return CompileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
