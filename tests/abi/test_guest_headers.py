"""The guest ABI headers: every generated file is what tools/gen_guest_headers.py writes from the
ABI table, and each declares exactly the imports its language can express, under their ABI names."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))  # the generator imports gen_import_docs beside it
_spec = importlib.util.spec_from_file_location("gen_guest_headers", ROOT / "tools" / "gen_guest_headers.py")
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

TABLE = json.loads(gen.TABLE.read_text())
# What each language cannot declare: anyref parameters and two results.
EXPRESSIBLE = {i["name"] for i in TABLE["imports"] if "anyref" not in i["params"] and len(i["results"]) <= 1}
DECLARED = {".h": r'WAGO_IMPORT\("(\w+)"\)', ".zig": r'extern "wago_gpu_v1" fn (\w+)\(',
            ".ts": r'@external\("wago_gpu_v1", "(\w+)"\)', ".go": r"//go:wasmimport wago_gpu_v1 (\w+)"}


def test_checked_in_headers_are_what_the_generator_writes() -> None:
    for path, text in gen.outputs().items():
        assert path.read_text() == text, f"{path} is stale: run python3 tools/gen_guest_headers.py"
    assert gen.main(["--check"]) == 0


def test_each_header_declares_every_expressible_import_once() -> None:
    outputs = gen.outputs()
    assert {p.suffix for p in outputs} == set(DECLARED)
    for path, text in outputs.items():
        names = re.findall(DECLARED[path.suffix], text)
        assert sorted(names) == sorted(EXPRESSIBLE), path
        for e in TABLE["element_types"]:
            assert re.search(rf"\b\w*{e['name']}\w*\W+(?:i32 |int32 )?=?\s*{e['id']}\b", text), (path, e["name"])
