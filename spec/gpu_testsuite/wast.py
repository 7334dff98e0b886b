"""A small reader for the spec testsuite's `.wast` scripts: s-expressions, the commands the runner
uses (`module`, `assert_return`, `assert_trap` of an `invoke`) and their constant values.

The reader keeps each top-level `(module ...)` as its source text, because wasmtime's own WAT
parser turns it into the binary the runner splices (see splice.py); everything the runner does not
use (assert_invalid, assert_malformed, register, ...) is counted and skipped. A malformed script
raises WastError naming the file and line.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from .literals import Expected, Value, parse_expected, parse_value


class WastError(ValueError):
    """The script is not one this reader understands; the message names file and line."""


@dataclass(frozen=True, slots=True)
class Atom:
    text: str
    line: int


@dataclass(frozen=True, slots=True)
class Text:
    """A quoted string, its escapes decoded to bytes."""

    data: bytes
    line: int


@dataclass(slots=True)
class SList:
    items: list["Node"]
    start: int  # offset of "(" in the source
    end: int = 0  # offset just after ")"
    line: int = 0

    def head(self) -> str:
        first = self.items[0] if self.items else None
        return first.text if isinstance(first, Atom) else ""


Node = Atom | Text | SList

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "'": b"'", '"': b'"'}


def _read_string(src: str, i: int, line: int, where: str) -> tuple[bytes, int]:
    """Decode the string whose opening quote is at src[i]; return its bytes and the offset after it."""
    out = bytearray()
    i += 1
    while i < len(src) and src[i] != '"':
        ch = src[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
            continue
        nxt = src[i + 1:i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt]
            i += 2
        elif nxt == "u":
            close = src.index("}", i)
            out += chr(int(src[i + 3:close], 16)).encode()
            i = close + 1
        else:
            out.append(int(src[i + 1:i + 3], 16))
            i += 3
    if i >= len(src):
        raise WastError(f"{where}:{line}: unterminated string")
    return bytes(out), i + 1


def _skip_block_comment(src: str, i: int, line: int, where: str) -> int:
    """Offset after the (nestable) block comment starting at src[i] == '(;'."""
    depth = 0
    while i < len(src):
        if src.startswith("(;", i):
            depth, i = depth + 1, i + 2
        elif src.startswith(";)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise WastError(f"{where}:{line}: unterminated block comment")


def parse_sexprs(src: str, where: str = "<wast>") -> list[SList]:
    """The top-level lists of a script, with source offsets and lines."""
    stack: list[SList] = [SList([], 0)]
    i, line = 0, 1
    while i < len(src):
        ch = src[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch in " \t\r":
            i += 1
        elif src.startswith(";;", i):
            end = src.find("\n", i)
            i = len(src) if end < 0 else end
        elif src.startswith("(;", i):
            end = _skip_block_comment(src, i, line, where)
            line += src.count("\n", i, end)
            i = end
        elif ch == "(":
            stack.append(SList([], i, line=line))
            i += 1
        elif ch == ")":
            if len(stack) == 1:
                raise WastError(f"{where}:{line}: unbalanced ')'")
            node = stack.pop()
            node.end = i + 1
            stack[-1].items.append(node)
            i += 1
        elif ch == '"':
            data, i = _read_string(src, i, line, where)
            stack[-1].items.append(Text(data, line))
        else:
            j = i
            while j < len(src) and src[j] not in ' \t\r\n()";':
                j += 1
            stack[-1].items.append(Atom(src[i:j], line))
            i = j
    if len(stack) != 1:
        raise WastError(f"{where}: unbalanced '(' opened at line {stack[-1].line}")
    return [n for n in stack[0].items if isinstance(n, SList)]


class CaseKind(enum.StrEnum):
    RETURN = "assert_return"
    TRAP = "assert_trap"


@dataclass(frozen=True, slots=True)
class ScriptModule:
    index: int  # position among the script's modules
    text: str  # the `(module ...)` source
    line: int
    name: str  # `$id` of the module, or ""


@dataclass(frozen=True, slots=True)
class Case:
    kind: CaseKind
    module: int  # ScriptModule.index the invoke targets
    export: str
    args: tuple[Value, ...]
    expected: tuple[Expected, ...]  # assert_return's results (empty for a trap)
    message: str  # assert_trap's message ("" for a return)
    line: int


@dataclass(slots=True)
class Script:
    path: str
    modules: list[ScriptModule] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # command head -> how many were not used


def _invoke_case(script: Script, cmd: SList, named: dict[str, int], where: str) -> Case | None:
    """The Case of an assert_return/assert_trap whose action is an invoke; None for other actions."""
    kind = CaseKind(cmd.head())
    action = cmd.items[1] if len(cmd.items) > 1 else None
    if not isinstance(action, SList) or action.head() != "invoke":
        return None
    rest = action.items[1:]
    module = len(script.modules) - 1
    if rest and isinstance(rest[0], Atom) and rest[0].text.startswith("$"):
        if rest[0].text not in named:
            raise WastError(f"{where}:{cmd.line}: unknown module {rest[0].text}")
        module, rest = named[rest[0].text], rest[1:]
    if module < 0 or not rest or not isinstance(rest[0], Text):
        raise WastError(f"{where}:{cmd.line}: invoke without a module or an export name")
    try:
        args = tuple(parse_value(_const(a, where)) for a in rest[1:])
        expected = tuple(parse_expected(_const(r, where)) for r in cmd.items[2:]) if kind is CaseKind.RETURN else ()
    except WastError:
        raise
    except ValueError as exc:  # a literal that is not a number
        raise WastError(f"{where}:{cmd.line}: {exc}") from None
    tail = cmd.items[2:]
    if kind is CaseKind.TRAP:
        if len(tail) != 1 or not isinstance(tail[0], Text):
            raise WastError(f"{where}:{cmd.line}: assert_trap needs one message")
        return Case(kind, module, rest[0].data.decode(), args, (), tail[0].data.decode(), cmd.line)
    return Case(kind, module, rest[0].data.decode(), args, expected, "", cmd.line)


def _const(node: Node, where: str) -> tuple[str, str]:
    """(type.const, literal) of a constant such as (f32.const nan:canonical); ("ref.func", "") for a
    reference pattern without a literal."""
    items = node.items if isinstance(node, SList) else []
    if not 1 <= len(items) <= 2 or not all(isinstance(n, Atom) for n in items):
        raise WastError(f"{where}:{getattr(node, 'line', 0)}: expected a constant like (i32.const 1)")
    texts = [n.text for n in items if isinstance(n, Atom)]
    return texts[0], texts[1] if len(texts) == 2 else ""


def read_script(path: Path) -> Script:
    """Parse one `.wast` file into its modules and its invoke cases."""
    src = path.read_text(encoding="utf-8")
    where = path.name
    script = Script(path.name)
    named: dict[str, int] = {}
    for cmd in parse_sexprs(src, where):
        head = cmd.head()
        if head == "module":
            second = cmd.items[1] if len(cmd.items) > 1 else None
            name = second.text if isinstance(second, Atom) and second.text.startswith("$") else ""
            mod = ScriptModule(len(script.modules), src[cmd.start:cmd.end], cmd.line, name)
            script.modules.append(mod)
            if name:
                named[name] = mod.index
            continue
        case = _invoke_case(script, cmd, named, where) if head in ("assert_return", "assert_trap") else None
        if case is None:
            script.skipped[head] = script.skipped.get(head, 0) + 1
        else:
            script.cases.append(case)
    return script
