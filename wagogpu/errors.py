"""The exceptions a caller of wagogpu catches. A leaf: it imports nothing of the package.

CompileError is defined here too (the compiler raises it and re-exports it from
wagogpu.compiler.contract), so the ABI layer, which raises ConfigError, never reaches up into the
compiler through this module.
"""
from __future__ import annotations

import enum

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


class CompileErrorKind(enum.IntEnum):
    INVALID_CONTRACT = 1
    UNSUPPORTED = 2
    LIMIT = 3


class CompileError(Exception):
    """A kernel or module the compiler cannot accept; .kind says whether that is the guest's fault."""

    def __init__(self, kind: CompileErrorKind, message: str):
        super().__init__(message)
        self.kind = CompileErrorKind(kind)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"CompileError({self.kind.name}, {self.message!r})"
