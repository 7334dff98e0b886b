"""The guest guide: docs/imports.md is what tools/gen_import_docs.py makes of the ABI table, the
generator refuses what it cannot document, and every relative link in the guide resolves."""
from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("gen_import_docs", ROOT / "tools" / "gen_import_docs.py")
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

TABLE = json.loads(gen.TABLE.read_text())
CHECK_ORDER = gen.CHECK_ORDER.read_text()


def test_checked_in_reference_is_what_the_generator_writes():
    assert gen.OUTPUT.read_text() == gen.render(TABLE, CHECK_ORDER), "run python3 tools/gen_import_docs.py"
    assert gen.main(["--check"]) == 0


def test_every_import_of_the_table_is_documented_with_its_signature():
    text = gen.OUTPUT.read_text()
    for module, imports in ((TABLE["abi"], TABLE["imports"]), (TABLE["legacy"]["module"], TABLE["legacy"]["imports"])):
        for imp in imports:
            assert f"### `{imp['name']}`" in text
            declared = re.search(rf'\(import "{module}" "{imp["name"]}" \(func .*\)\)', text)
            assert declared, imp["name"]
            assert declared.group(0).count("(param ") == len(imp["params"])
    for status in TABLE["statuses"]:
        assert f"| {status['value']} | `{status['name']}` |" in text


def test_an_import_without_parameter_names_is_refused():
    table = copy.deepcopy(TABLE)
    table["imports"].append({"name": "newImport", "params": ["i32"], "results": ["i32"],
                             "phase": "cpu_f32", "gpu_intrinsic": False})
    with pytest.raises(SystemExit, match="no names for import 'newImport'"):
        gen.render(table, CHECK_ORDER + "\n## `newImport`\n")


def test_an_arity_change_is_refused():
    table = copy.deepcopy(TABLE)
    table["imports"][2]["params"].append("i32")  # freeBuffer with a second parameter
    with pytest.raises(SystemExit, match="freeBuffer has 2 params, names for 1"):
        gen.render(table, CHECK_ORDER)


def test_an_import_without_a_check_order_section_is_refused():
    without = CHECK_ORDER.replace("## `freeBuffer`", "## Freeing")
    with pytest.raises(SystemExit, match="no heading naming `freeBuffer`"):
        gen.render(TABLE, without)


def headings(path: Path) -> set[str]:
    return {gen.slug(h) for h in re.findall(r"^#{1,6} (.+)$", path.read_text(), flags=re.M)}


LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md", ROOT / "examples" / "guests" / "README.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        file_part, _, anchor = target.partition("#")
        path = (page.parent / file_part).resolve() if file_part else page
        assert path.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert path.suffix == ".md" and anchor in headings(path), f"{page.name}: no heading for {target}"


def test_the_guide_lists_every_page():
    index = (DOCS / "README.md").read_text()
    for page in DOCS.glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"
