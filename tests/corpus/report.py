"""The corpus's GPU-eligibility report: for every cell (language x level) and kernel, whether
wagogpu's compiler accepts the kernel for the GPU and, if not, its first blocker.

    python3 -m tests.corpus.report           write tests/corpus/report.md and report.jsonl
    python3 -m tests.corpus.report --check   exit 1 if the checked-in report differs from what
                                             this wagogpu makes of the checked-in .wasm

The answer is compile_buffer_wgsl's (the public API): eligible when it returns WGSL, otherwise the
CompileError's message is the first blocker, sorted into a Kind. Each entry also lists every kind
its code uses (wasmscan.py), which ranks what would unlock the most kernels. The report changes
whenever the compiler or the corpus does: regenerate it and commit it with that change.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass

from wagogpu import CompileError, ElementType, compile_buffer_wgsl

from .cells import CELLS, HERE, Cell
from .kernels import Kernel
from .wasmscan import FC_KINDS, OPCODE_KINDS, Kind, Module, local_kinds, parse_module, uses

REPORT_MD = HERE / "report.md"
REPORT_JSONL = HERE / "report.jsonl"
HEX_OPCODE = re.compile(r"opcode 0x([0-9a-f]{2})(?: 0x([0-9a-f]{2}))?")
# Messages that name their blocker in words (docs/design/compiler.md §1.3.8), then words that later messages
# (opcode names, issue 17 item 6) would contain; the first match decides.
MESSAGE_KINDS: tuple[tuple[str, Kind], ...] = (
    ("only buffer intrinsic calls", Kind.DEFINED_CALL), ("call_indirect", Kind.DEFINED_CALL),
    ("global.", Kind.GLOBALS), ("stack pointer", Kind.GLOBALS), (".load", Kind.MEMORY_LOAD),
    (".store", Kind.MEMORY_STORE), ("memory.", Kind.MEMORY_STORE), ("i64", Kind.I64), ("f64", Kind.F64),
    ("call to", Kind.DEFINED_CALL), ("recursi", Kind.DEFINED_CALL),
)
WIDE_MESSAGES = ("64-bit GPU buffers are unsupported", "intrinsic type unsupported on GPU")


@dataclass(frozen=True)
class Entry:
    """One kernel in one cell."""

    cell: Cell
    kernel_id: int
    kernel: Kernel
    blocker: CompileError | None  # None: the compiler accepts it for the GPU
    blocker_kind: Kind | None
    uses: frozenset[Kind]

    @property
    def eligible(self) -> bool:
        return self.blocker is None

    def record(self) -> dict[str, object]:
        return {"language": self.cell.language.value, "level": self.cell.level, "kernel": self.kernel.name,
                "kernel_id": self.kernel_id, "eligible": self.eligible,
                "error_kind": self.blocker.kind.name if self.blocker else None,
                "blocker": self.blocker.message if self.blocker else None,
                "blocker_kind": self.blocker_kind.name if self.blocker_kind else None,
                "uses": sorted(k.name for k in self.uses)}


def classify(error: CompileError, kernel: Kernel, module: Module) -> Kind:
    """The kind of a first blocker, from its message (and, where the message does not say which
    64-bit type it means, from the kernel's locals or bindings)."""
    message = error.message
    found = HEX_OPCODE.search(message)
    if found:
        op, sub = int(found.group(1), 16), found.group(2)
        kind = FC_KINDS.get(int(sub, 16)) if op == 0xFC and sub else OPCODE_KINDS.get(op)
        return kind or Kind.OTHER
    if message == "local type is unsupported":
        kinds = local_kinds(module, f"wago_gpu.kernel.{kernel.name}")
        return Kind.I64 if Kind.I64 in kinds else Kind.F64 if Kind.F64 in kinds else Kind.OTHER
    if message in WIDE_MESSAGES:
        return Kind.F64 if any(s.type == ElementType.F64 for s in kernel.slots) else Kind.I64
    return next((kind for words, kind in MESSAGE_KINDS if words in message), Kind.OTHER)


def check_exports(cell: Cell, module: Module) -> None:
    """A cell must export exactly its language's kernels and their CPU runners."""
    names = {k.name for _, k in cell.kernels()}
    want = {f"wago_gpu.{part}.{n}" for n in names for part in ("kernel", "cpu")}
    have = {e for e in module.exports if e.startswith("wago_gpu.")}
    if have != want:
        raise ValueError(f"{cell.file_name}: exports differ from table.py: missing {sorted(want - have)}, "
                         f"extra {sorted(have - want)}")


def measure(cells: tuple[Cell, ...] = CELLS) -> list[Entry]:
    entries = []
    for cell in cells:
        data = cell.path().read_bytes()
        module = parse_module(data)
        check_exports(cell, module)
        for kernel_id, kernel in cell.kernels():
            blocker: CompileError | None = None
            try:
                compile_buffer_wgsl(data, kernel.config(kernel_id))
            except CompileError as e:
                blocker = e
            kind = classify(blocker, kernel, module) if blocker else None
            entries.append(Entry(cell, kernel_id, kernel, blocker, kind,
                                 frozenset(uses(module, f"wago_gpu.kernel.{kernel.name}"))))
    return entries


def jsonl(entries: list[Entry]) -> str:
    return "".join(json.dumps(e.record(), sort_keys=True) + "\n" for e in entries)


def generate() -> tuple[str, str]:
    """(report.md, report.jsonl) as this checkout makes them from the checked-in .wasm."""
    from .markdown import render

    entries = measure()
    return render(entries), jsonl(entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the checked-in report")
    args = parser.parse_args(argv)
    md, lines = generate()
    if args.check:
        stale = [p.name for p, text in ((REPORT_MD, md), (REPORT_JSONL, lines))
                 if not p.exists() or p.read_text() != text]
        print(f"corpus report: {'stale: ' + ', '.join(stale) if stale else 'current'}")
        return 1 if stale else 0
    REPORT_MD.write_text(md)
    REPORT_JSONL.write_text(lines)
    print(f"wrote {REPORT_MD.name} and {REPORT_JSONL.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
