"""What the `wagogpu` commands share: the two kinds of failure, one-line errors, reading a module
or a JSON config the way Host.compile and config_from_json do, and the adapter flags."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

if TYPE_CHECKING:  # pragma: no cover
    from ..config import BindingConfig, Config

PROG = "wagogpu"


class UsageError(Exception):
    """The user asked for something impossible: exit status 2, one line on stderr (and, for a WAT
    syntax error, wasmtime's source line and caret below it)."""

    def __init__(self, message: str, excerpt: str = "") -> None:
        super().__init__(message)
        self.excerpt = excerpt


class Failure(Exception):
    """The work itself failed: exit status 1, one line on stderr."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors become one `wagogpu: error: ...` line (subcommand parsers inherit this)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def one_line(text: str) -> str:
    from ..host.engine import first_line

    return first_line(Exception(text)) if "\n" in text else text.strip()


def report(exc: UsageError | Failure) -> None:
    """The error line on stderr (and a WAT error's excerpt, indented)."""
    print(f"{PROG}: error: {one_line(str(exc))}", file=sys.stderr)
    excerpt = getattr(exc, "excerpt", "")
    if excerpt:
        print(excerpt, file=sys.stderr)


#: The largest JSON config read (a config is a few kilobytes; /dev/zero is not read to the end).
MAX_CONFIG_BYTES = 16 << 20


def read_file(path: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The file's bytes, refused past ``limit`` bytes (read no further)."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise UsageError(f"{path}: larger than the {limit >> 20} MiB limit on a config file")
    return data


def load_module(path: str) -> bytes:
    """Binary Wasm from a file as Host.compile reads it (a .wasm file holds Wasm, a .wat file WAT),
    validated with the host's engine settings."""
    import wasmtime

    from ..errors import ModuleError
    from ..host.engine import first_line, new_engine
    from ..host.source import file_to_wasm, read_source

    try:
        wasm = file_to_wasm(Path(path), read_source(Path(path)))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ModuleError as exc:
        raise UsageError(str(exc), exc.excerpt) from exc
    try:
        wasmtime.Module.validate(new_engine(), wasm)
    except wasmtime.WasmtimeError as exc:
        raise UsageError(f"{path}: invalid module: {first_line(exc)}") from exc
    return wasm


def parse_binding(spec: str) -> BindingConfig:
    """SLOT:TYPE:ACCESS, e.g. 0:F32:read or 1:f32:rw, as a BindingConfig (argparse type): the
    names BindingConfig and the JSON config take, numbers given as digits."""
    from ..config import BindingConfig

    parts = [p.strip() for p in spec.split(":")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{spec!r} is not SLOT:TYPE:ACCESS (e.g. 0:F32:read)")
    if not parts[0].isdigit():
        raise argparse.ArgumentTypeError(f"{spec!r}: the slot must be a number, got {parts[0]!r}")
    slot, etype, access = (int(p) if p.isdigit() else p for p in parts)
    try:
        return BindingConfig(slot, etype, access)  # type: ignore[arg-type]
    except ValueError as exc:  # ConfigError names the field
        raise argparse.ArgumentTypeError(f"{spec!r}: {exc}") from exc


def load_config(path: str) -> Config:
    from ..config import config_from_json

    text = read_file(path)
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: invalid JSON: {exc}") from exc
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON: nested too deeply (a config is a few levels deep)") from None
    try:
        return config_from_json(data)
    except (ValueError, TypeError) as exc:  # ConfigError is a ValueError naming the field
        raise UsageError(f"{path}: {exc}") from exc


# -- guest limits --------------------------------------------------------------------------------------
def seconds_arg(text: str) -> float:
    """--timeout: seconds, 0 or more and finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected 0 or more finite seconds, got {text!r}")
    return value


def count_arg(lowest: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``lowest`` (digits, or 0x... hex)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"expected {lowest} or more, got {value}")
        return value
    return parse


# -- adapter choice ----------------------------------------------------------------------------------
def adapter_arg(text: str) -> int | str:
    """--adapter: an index as `wagogpu info` lists them, or a piece of the adapter's name."""
    text = text.strip()
    if not text:
        raise argparse.ArgumentTypeError("give an adapter index or a piece of its name")
    return int(text) if text.isdigit() else text


def adapter_changes(args: argparse.Namespace) -> dict[str, object]:
    """The Config fields the adapter flags set."""
    changes: dict[str, object] = {}
    if getattr(args, "adapter", None) is not None:
        changes["adapter"] = args.adapter
    if getattr(args, "backend", None) is not None:
        changes["backend"] = args.backend
    return changes
