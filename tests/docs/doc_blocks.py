"""The ```python blocks of README.md and docs/: where they are, and the marker that opts one out.

The convention (docs/README.md, "Examples that run"): every block runs as written, the blocks of one
file in order and in one namespace, from the repository root. A block that cannot run here says why
on the line right before its fence: `<!-- docs-test: skip REASON -->`, or `<!-- docs-test: needs
MODULE -->` for an optional extra (skipped when MODULE does not import)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = "```python"
MARKER = re.compile(r"^<!--\s*docs-test:\s*(skip|needs)\s+(.+?)\s*-->$")


class Mark(Enum):
    RUN = "run"
    SKIP = "skip"
    NEEDS = "needs"


@dataclass(frozen=True)
class Block:
    path: Path    # relative to ROOT
    line: int     # 1-based line of the opening fence
    source: str
    mark: Mark = Mark.RUN
    argument: str = ""   # the skip reason, or the module a NEEDS block imports

    @property
    def name(self) -> str:
        return f"{self.path.as_posix()}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/, sorted, relative to root."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [path.relative_to(root) for path in found if path.is_file()]


def blocks_of(path: Path, text: str) -> list[Block]:
    """The python blocks of one file; an unclosed fence is an error, not a silently dropped block."""
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() != FENCE:
            index += 1
            continue
        start = index
        end = next((k for k in range(start + 1, len(lines)) if lines[k].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path}:{start + 1}: a ```python block that is never closed")
        mark, argument = _marker(lines, start)
        found.append(Block(path, start + 1, "\n".join(lines[start + 1:end]) + "\n", mark, argument))
        index = end + 1
    return found


def _marker(lines: list[str], fence: int) -> tuple[Mark, str]:
    previous = next((lines[k].strip() for k in range(fence - 1, -1, -1) if lines[k].strip()), "")
    match = MARKER.match(previous)
    if match is None:
        return Mark.RUN, ""
    return Mark(match.group(1)), match.group(2)


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [block for path in doc_files(root) for block in blocks_of(path, (root / path).read_text())]
