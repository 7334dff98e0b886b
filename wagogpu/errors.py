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
        self.detail = message


class ModuleError(ValueError):
    """A module the runtime cannot take (not Wasm, malformed Wasm or WAT, or a failed link).

    The message is one line. A WAT syntax error also says where: ``line`` and ``column`` (1-based,
    as wasmtime reports them) and ``excerpt``, wasmtime's source line with a caret under the
    column, for a caller that shows more than one line (the `wagogpu` command prints it).
    """

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None, excerpt: str = ""):
        super().__init__(message)
        self.line = line
        self.column = column
        self.excerpt = excerpt


class GpuRequiredError(RuntimeError):
    """require_gpu=True and no hardware adapter opened."""


def __getattr__(name: str) -> Any:
    if name == "CompileError":
        from .compiler.contract import CompileError

        return CompileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
