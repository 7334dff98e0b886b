"""Citations of the design pages (`docs/design/abi.md §4.6`) and the sections those pages have.

A citation is a design page's path followed by one or more section numbers: `§4.6`, `§2.13-2.14`,
`§6.2-6.3`, `§4.4/§4.6`, `§2.6, §2.7`, across a line break too. A heading such as `### 2.7–2.12
Bulk transfers` provides every section of its range."""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design"
PAGES = ("abi", "compiler", "benchmarks")
NUMBER = r"\d+(?:\.\d+)*"
CITATION = re.compile(rf"(?P<page>(?:docs/design/)?(?:{'|'.join(PAGES)})\.md)(?P<refs>(?:[\s,/]*(?:and\s+)?§\s?{NUMBER}"
                      rf"(?:\s?[-–]\s?{NUMBER})?)+)")
REF = re.compile(rf"§\s?({NUMBER})(?:\s?[-–]\s?({NUMBER}))?")
HEADING = re.compile(rf"^#+\s+({NUMBER})\.?(?:\s?[-–]\s?({NUMBER}))?\s")
BARE = re.compile(r"§\s?\d")
TEXT_SUFFIXES = {".py", ".md", ".wat", ".c", ".h", ".zig", ".ts", ".go", ".sh", ".json", ".toml", ".txt"}


@dataclass(frozen=True)
class Citation:
    path: str   # the citing file, relative to ROOT
    line: int
    page: str   # abi, compiler or benchmarks
    section: str
    in_repo: bool  # written as docs/design/<page>.md (or from inside docs/design)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.page}.md §{self.section}"


def _expand(first: str, last: str | None) -> list[str]:
    """`2.7`-`2.12` -> 2.7 .. 2.12; a range's ends must share everything but their last number."""
    if last is None:
        return [first]
    head, _, low = first.rpartition(".")
    last_head, _, high = last.rpartition(".")
    if head != last_head and last.count(".") == 0:  # `§2.13-14` written short
        last_head, high = head, last
    if head != last_head or int(high) < int(low):
        return [first, last]
    prefix = f"{head}." if head else ""
    return [f"{prefix}{n}" for n in range(int(low), int(high) + 1)]


def sections(page: str) -> set[str]:
    """Every section number a design page has a heading for (with the parents of each, so that
    `§4` resolves when `4.1` is a heading of its own)."""
    found: set[str] = set()
    for line in (DESIGN / f"{page}.md").read_text().splitlines():
        match = HEADING.match(line)
        if match:
            for number in _expand(match.group(1), match.group(2)):
                parts = number.split(".")
                found.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return found


def citations_in(path: str, text: str) -> list[Citation]:
    inside = path.startswith("docs/design/")
    found = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        page_text = match.group("page")
        page = Path(page_text).stem
        for ref in REF.finditer(match.group("refs")):
            for section in _expand(ref.group(1), ref.group(2)):
                found.append(Citation(path, line, page, section, inside or page_text.startswith("docs/design/")))
    return found


def bare_sections(text: str) -> list[int]:
    """Lines with a `§N` outside every citation (a section of which page?)."""
    spans = [(m.start(), m.end()) for m in CITATION.finditer(text)]
    return [text.count("\n", 0, m.start()) + 1 for m in BARE.finditer(text)
            if not any(a <= m.start() < b for a, b in spans)]


def tracked_files() -> list[str]:
    """The repository's text files: tracked and not ignored (a new file counts before it is added)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if Path(p).suffix in TEXT_SUFFIXES and (ROOT / p).is_file()]


def all_citations() -> list[Citation]:
    found = []
    for path in tracked_files():
        text = (ROOT / path).read_text(errors="replace")
        if ".md" in text and "§" in text:
            found.extend(citations_in(path, text))
    return found
