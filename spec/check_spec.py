"""Checks the package against the ABI table: python spec/check_spec.py [reference_abi_v1.json].

It compares spec/abi_v1.json with the reference's table (when given or found beside the checkout),
then checks that what the package registers matches the table: enum values, stored sizes, the
packed encoding, and the signature of every function the accessor module exports for the guest.
Exit status 0 when everything matches; one line per mismatch otherwise.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def compare_reference(ours: dict, ref: dict) -> list[str]:
    problems = []
    if ref.get("module") != ours["abi"]:
        problems.append(f"module name {ref.get('module')!r} != {ours['abi']!r}")
    theirs = [(i["name"], i["params"], i["results"], i["gpu_intrinsic"]) for i in ref["imports"]]
    mine = [(i["name"], i["params"], i["results"], i["gpu_intrinsic"]) for i in ours["imports"]]
    if theirs != mine:
        problems.append("import table differs: " + str(set(map(str, theirs)) ^ set(map(str, mine))))
    if [(e["id"], e["suffix"], e["stored_bytes"], e["wasm_scalar"]) for e in ref["element_types"]] != [
            (e["id"], e["name"], e["stored_bytes"], e["scalar"]) for e in ours["element_types"]]:
        problems.append("element types differ")
    if [(s["value"], s["name"]) for s in ref["statuses"]] != [(s["value"], s["name"]) for s in ours["statuses"]]:
        problems.append("statuses differ")
    packed = ref["packed_result"]
    if (packed["handle_bits"], packed["status_bits"]) != (ours["packed_result"]["handle_bits"],
                                                          ours["packed_result"]["status_bits"]):
        problems.append("packed encoding differs")
    return problems


def check_package(ours: dict) -> list[str]:
    import wasmtime

    from wagogpu.abi import IMPORTS, TYPE_INFO, ElementType, Status, pack_result
    from wagogpu.abi.accessor import accessor_wat
    from wagogpu.abi.table import GC_IMPORTS, SCALAR_IMPORTS
    from wagogpu.host.engine import new_engine

    problems = []
    if [(s.value, s.name) for s in Status] != [(s["value"], s["name"]) for s in ours["statuses"]]:
        problems.append("Status enum differs from the table")
    if [(t.value, t.name, TYPE_INFO[t].stored_bytes) for t in ElementType] != [
            (e["id"], e["name"], e["stored_bytes"]) for e in ours["element_types"]]:
        problems.append("ElementType / stored sizes differ from the table")
    if pack_result(6, 0x80000001) != (6 << 32) | 0x80000001:
        problems.append("pack_result does not follow the packed encoding")
    module = wasmtime.Module(new_engine(), accessor_wat())
    exports = {e.name: e for e in module.exports}
    for spec in IMPORTS:
        if spec.name not in SCALAR_IMPORTS and spec.name not in GC_IMPORTS:
            continue
        if spec.name not in exports:
            problems.append(f"accessor does not export {spec.name}")
            continue
        if spec.name in GC_IMPORTS:
            continue  # wasmtime-py cannot describe anyref types; the GC tests exercise these
        ftype = exports[spec.name].type
        params = [str(p) for p in ftype.params]
        results = [str(r) for r in ftype.results]
        if (params, results) != (list(spec.params), list(spec.results)):
            problems.append(f"{spec.name}: accessor signature {params} -> {results} != table")
    return problems


def main(argv: list[str]) -> int:
    ours = json.loads((ROOT / "spec" / "abi_v1.json").read_text())
    problems = check_package(ours)
    candidates = [Path(a) for a in argv[1:]] or [ROOT.parent / "shared" / "reference" / "abi_v1.json"]
    for path in candidates:
        if path.exists():
            problems += compare_reference(ours, json.loads(path.read_text()))
            print(f"compared with {path}")
    for p in problems:
        print(p)
    print("spec check:", "ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
