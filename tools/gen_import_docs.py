#!/usr/bin/env python3
"""Write docs/imports.md, the import reference, from the ABI table wagogpu/abi/abi_v1.json.

The table is the one source of truth for names, Wasm signatures, element types, statuses and the
packed result; this script adds only what a signature needs to be read: parameter names (checked
against the table's arity, so a new import cannot slip through unnamed) and, per import, a link to
its check order in the hand-written docs/check-order.md (a missing section fails the build).

    python3 tools/gen_import_docs.py           write docs/imports.md
    python3 tools/gen_import_docs.py --check   exit 1 if docs/imports.md is not what this writes
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "wagogpu" / "abi" / "abi_v1.json"
OUTPUT = ROOT / "docs" / "imports.md"
CHECK_ORDER = ROOT / "docs" / "check-order.md"

Import = dict[str, Any]
TRANSFER = ("handle", "bufferOffset", "memoryIndex", "guestByteOffset", "count")
GC_TRANSFER = ("handle", "bufferOffset", "array", "arrayOffset", "count")

# Parameter names by import name (exact) or family (prefix). First match wins.
PARAMETER_NAMES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("createBuffer", ("elementType", "count")),
    ("createBufferPacked", ("elementType", "count")),
    ("freeBuffer", ("handle",)),
    ("bindBuffer", ("slot", "handle")),
    ("getBuffer", ("slot",)),
    ("dispatch", ("kernelId", "count")),
    ("setBufferGC", GC_TRANSFER), ("copyBufferGC", GC_TRANSFER),
    ("setBuffer*", TRANSFER), ("copyBuffer*", TRANSFER),
    ("readBuffer*", ("handle", "index")),
    ("writeBuffer*", ("handle", "index", "value")),
    ("run", ("inputByteOffset", "outputByteOffset", "count")),
    ("run_batch", ("inputByteOffset", "outputByteOffset", "count", "passes")),
)
RESULT_NAMES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("createBuffer", ("handle", "status")),
    ("createBufferPacked", ("packed",)),
    ("getBuffer", ("handle",)),
    ("readBuffer*", ("value",)),
    ("*", ("status",)),
)
GLOSSARY = (
    ("elementType", "an element type ID (see [element types](#element-types))"),
    ("count", "a number of elements (for `dispatch`: the indices `0..count-1` it runs)"),
    ("handle", "a buffer handle this instance created; never 0"),
    ("slot", "a binding slot, 0 to 7"),
    ("kernelId", "the ID of a kernel the host configured (`KernelConfig.id`)"),
    ("bufferOffset", "the first element of the buffer the transfer touches"),
    ("memoryIndex", "which guest memory (imported memories first, then defined ones)"),
    ("guestByteOffset", "the byte address in that memory (any alignment)"),
    ("array", "a GC array reference (`anyref`)"),
    ("arrayOffset", "the first element of the GC array"),
    ("index", "an element index of the buffer"),
    ("value", "the element, as the Wasm scalar of the buffer's type"),
    ("inputByteOffset, outputByteOffset", "byte addresses of f32 arrays in memory 0"),
    ("passes", "how many times the kernel is applied, 1 to {max_passes}"),
)

# Wasm value type -> the type a guest language declares it with (None: the language cannot).
LANGUAGES: dict[str, dict[str, str | None]] = {
    "C (clang, `zig cc`)": {"i32": "int32_t", "i64": "int64_t", "f32": "float", "f64": "double", "anyref": None},
    "Zig": {"i32": "i32", "i64": "i64", "f32": "f32", "f64": "f64", "anyref": None},
    "AssemblyScript": {"i32": "i32", "i64": "i64", "f32": "f32", "f64": "f64", "anyref": None},
    "Go (TinyGo)": {"i32": "int32", "i64": "int64", "f32": "float32", "f64": "float64", "anyref": None},
}


def lookup(table: Iterable[tuple[str, tuple[str, ...]]], name: str) -> tuple[str, ...]:
    for pattern, names in table:
        if pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return names
    raise SystemExit(f"gen_import_docs: no names for import {name!r}: add them to {Path(__file__).name}")


def named(imp: Import, table: Iterable[tuple[str, tuple[str, ...]]], key: str) -> list[tuple[str, str]]:
    """(name, Wasm type) pairs of an import's params or results, names checked against the arity."""
    types = imp[key]
    if not types:
        return []
    names = lookup(table, imp["name"])
    if len(names) != len(types):
        raise SystemExit(f"gen_import_docs: {imp['name']} has {len(types)} {key}, names for {len(names)}")
    return list(zip(names, types))


def is_scalar(name: str) -> bool:
    """Scalar intrinsics trap on every error; all other wago_gpu_v1 imports return a status."""
    return name == "getBuffer" or name.startswith(("readBuffer", "writeBuffer"))


def family(name: str) -> str:
    for prefix in ("readBuffer", "writeBuffer"):
        if name.startswith(prefix):
            return f"{prefix}<T>"
    return name


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def check_order_anchors(text: str) -> dict[str, str]:
    """Import name or family -> anchor of the first check-order.md heading naming it in backticks."""
    anchors: dict[str, str] = {}
    for heading in re.findall(r"^#{2,4} (.+)$", text, flags=re.M):
        for name in re.findall(r"`([A-Za-z0-9_<>]+)`", heading):
            anchors.setdefault(name, slug(heading))
    return anchors


def wat(module: str, imp: Import) -> str:
    params = " ".join(f"(param ${n} {t})" for n, t in named(imp, PARAMETER_NAMES, "params"))
    results = f" (result {' '.join(imp['results'])})" if imp["results"] else ""
    return f'(import "{module}" "{imp["name"]}" (func ${imp["name"]} {params}{results}))'


def import_section(module: str, imp: Import, anchors: dict[str, str], legacy: bool = False) -> list[str]:
    name = imp["name"]
    anchor = anchors.get(family(name))
    if anchor is None:
        raise SystemExit(f"gen_import_docs: docs/check-order.md has no heading naming `{family(name)}`")
    results = named(imp, RESULT_NAMES, "results")
    facts = ["Results " + (", ".join(f"`{n}: {t}`" for n, t in results) or "none")]
    if legacy:
        facts.append("errors: a legacy status (table below)")
    else:
        facts.append("errors: " + ("a trap" if is_scalar(name) else "a returned status"))
        facts.append("in a kernel body: " + ("yes" if imp["gpu_intrinsic"] else "no"))
        facts.append(f"phase `{imp['phase']}`")
    facts.append(f"[check order](check-order.md#{anchor})")
    return [f"### `{name}`", "", "```wat", wat(module, imp), "```", "", " · ".join(facts), ""]


def table_rows(header: list[str], rows: Iterable[Iterable[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]


def declaration(language: str, module: str, imp: Import) -> str | None:
    """One import declared in a guest language, or None where the language cannot declare it."""
    types = LANGUAGES[language]
    params = named(imp, PARAMETER_NAMES, "params")
    if len(imp["results"]) > 1 or any(types[t] is None for _, t in params):
        return None
    result = types[imp["results"][0]] if imp["results"] else None
    name = imp["name"]
    render = DECLARATIONS[language]
    return render(module, name, [(n, str(types[t])) for n, t in params], result)


def _c(module: str, name: str, params: list[tuple[str, str]], result: str | None) -> str:
    args = ", ".join(f"{t} {n}" for n, t in params) or "void"
    return (f'__attribute__((import_module("{module}"), import_name("{name}"))) '
            f"{result or 'void'} {name}({args});")


def _zig(module: str, name: str, params: list[tuple[str, str]], result: str | None) -> str:
    return f'extern "{module}" fn {name}({", ".join(f"{n}: {t}" for n, t in params)}) {result or "void"};'


def _as(module: str, name: str, params: list[tuple[str, str]], result: str | None) -> str:
    args = ", ".join(f"{n}: {t}" for n, t in params)
    return f'@external("{module}", "{name}") declare function {name}({args}): {result or "void"};'


def _go(module: str, name: str, params: list[tuple[str, str]], result: str | None) -> str:
    args = ", ".join(f"{n} {t}" for n, t in params)
    return f"//go:wasmimport {module} {name}\nfunc {name}({args}){' ' + result if result else ''}"


DECLARATIONS: dict[str, Callable[[str, str, list[tuple[str, str]], str | None], str]] = {
    "C (clang, `zig cc`)": _c, "Zig": _zig, "AssemblyScript": _as, "Go (TinyGo)": _go}
FENCES = {"C (clang, `zig cc`)": "c", "Zig": "zig", "AssemblyScript": "ts", "Go (TinyGo)": "go"}


def language_blocks(module: str, imports: list[Import]) -> list[str]:
    lines: list[str] = []
    for language in LANGUAGES:
        declared = [(imp["name"], declaration(language, module, imp)) for imp in imports]
        missing = [name for name, text in declared if text is None]
        lines += [f"### {language}", "", f"```{FENCES[language]}"]
        lines += [text for _, text in declared if text is not None] + ["```", ""]
        lines += [f"Not declarable in {language.split(' (')[0]}: " + ", ".join(f"`{m}`" for m in missing)
                  + " (two results or an `anyref` parameter; use `createBufferPacked` and the memory transfers).", ""]
    return lines


def render(table: dict[str, Any], check_order: str) -> str:
    module, legacy = table["abi"], table["legacy"]
    anchors = check_order_anchors(check_order)
    packed = table["packed_result"]
    lines = ["# Import reference", "",
             f"<!-- Generated by tools/gen_import_docs.py from wagogpu/abi/abi_v1.json: do not edit by hand. -->", "",
             f"Module `{module}`, ABI version {table['version']}: {len(table['imports'])} imports. Legacy module "
             f"`{legacy['module']}`: {len(legacy['imports'])} imports. A guest imports any subset; names and "
             "signatures must match exactly (a mismatch is a link error, not a status). What each import "
             "checks, in order, is in [check-order.md](check-order.md); the rules all of them share are in "
             "[its first section](check-order.md#rules-every-import-shares). \"Phase\" is the stage of the "
             "reference's ABI that introduced an import; wagogpu implements every phase.", "",
             "## Element types", ""]
    lines += table_rows(["ID", "name", "stored bytes", "Wasm scalar", "on the GPU"],
                        ([e["id"], f"`{e['name']}`", e["stored_bytes"], f"`{e['scalar']}`",
                          "yes (one 32-bit word)" if e["gpu"] else
                          "yes, two 32-bit words (an extension: the reference keeps it on the CPU)"]
                         for e in table["element_types"]))
    lines += ["## Statuses", ""]
    lines += table_rows(["value", "name"], ([s["value"], f"`{s['name']}`"] for s in table["statuses"]))
    lines += [f"Scalar intrinsics trap instead, with the message "
              f"`{table['scalar_trap_format'].format(status='N')}` (N: the status). "
              f"Slots per instance: {table['slots_per_instance']}.", "",
              f"`{packed['import']}` packs its result into one i64: the handle in bits "
              f"{packed['handle_bits'][0]}..{packed['handle_bits'][1]} (never sign-extended), the status in bits "
              f"{packed['status_bits'][0]}..{packed['status_bits'][1]}; on failure the handle is "
              f"{packed['failure_handle']}.", "", "## Parameter names", ""]
    lines += table_rows(["name", "meaning (every i32 is read as unsigned)"],
                        ([f"`{n}`", m.format(max_passes=legacy["max_passes"])] for n, m in GLOSSARY))
    lines += [f"## `{module}` imports", ""]
    for imp in table["imports"]:
        lines += import_section(module, imp, anchors)
    lines += [f"## Legacy `{legacy['module']}` imports", ""]
    for imp in legacy["imports"]:
        lines += import_section(legacy["module"], imp, anchors, legacy=True)
    lines += table_rows(["value", "legacy status"], ([s["value"], f"`{s['name']}`"] for s in legacy["statuses"]))
    lines += [f"`run_batch` takes 1 to {legacy['max_passes']} passes.", "",
              "## Declarations by language", "",
              "The same imports as a guest language declares them (generated from the same table).", ""]
    lines += language_blocks(module, table["imports"])
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/imports.md is out of date")
    args = parser.parse_args(argv)
    text = render(json.loads(TABLE.read_text()), CHECK_ORDER.read_text())
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print("docs/imports.md is not what tools/gen_import_docs.py writes: run it and commit the result",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
