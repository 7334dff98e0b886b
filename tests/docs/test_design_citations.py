"""Every section the code and the docs cite in docs/design/ exists, and every citation points there.

The design pages (abi.md, compiler.md, benchmarks.md) are the project's spec; a comment that says
`docs/design/abi.md §4.6` must find a heading `4.6` on that page. Inside wagogpu/ a bare `§4.6`
is refused as well: the reader could not tell which page it means."""
from __future__ import annotations

from pathlib import Path

from .citations import ROOT, all_citations, bare_sections, citations_in, sections, tracked_files

CITATIONS = all_citations()


def test_the_code_cites_the_design_pages():
    """The scan finds the package's citations (an empty scan would pass the tests below vacuously)."""
    in_package = [c for c in CITATIONS if c.path.startswith("wagogpu/")]
    assert len(in_package) > 50 and {c.page for c in in_package} >= {"abi", "compiler"}


def test_every_cited_section_exists():
    have = {page: sections(page) for page in ("abi", "compiler", "benchmarks")}
    missing = [str(c) for c in CITATIONS if c.section not in have[c.page]]
    assert missing == [], "cited sections the design pages do not have:\n" + "\n".join(missing)


def test_every_citation_points_into_the_repository():
    outside = [str(c) for c in CITATIONS if not c.in_repo]
    assert outside == [], "write docs/design/<page>.md §N:\n" + "\n".join(outside)


def test_the_package_has_no_bare_section_signs():
    found = [f"{path}:{line}" for path in tracked_files() if path.startswith("wagogpu/")
             for line in bare_sections((ROOT / path).read_text())]
    assert found == [], "a § without its page:\n" + "\n".join(found)


def test_the_citation_reader():
    text = ("see docs/design/abi.md §2.13-2.14 and docs/design/compiler.md\n§1.3.5, §1.3.7;"
            " docs/design/abi.md §4.4/§4.6, " + "abi.md" + " §9.2 case 23 and (§4.5)")  # split: not a citation here
    found = [(c.line, c.page, c.section, c.in_repo) for c in citations_in("x.py", text)]
    assert found == [(1, "abi", "2.13", True), (1, "abi", "2.14", True), (1, "compiler", "1.3.5", True),
                     (1, "compiler", "1.3.7", True), (2, "abi", "4.4", True), (2, "abi", "4.6", True),
                     (2, "abi", "9.2", False)]
    assert bare_sections(text) == [2]
    assert {"2.7", "2.9", "2.12", "4", "4.6", "1"} <= sections("abi") and "2.17" not in sections("abi")
    assert Path(ROOT / "docs" / "design" / "abi.md").is_file()
