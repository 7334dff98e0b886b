"""The wago_gpu_v1 import table as the fuzzers see it: read from spec/abi_v1.json (the canonical
table, a data file), not from wagogpu's internals, so the fuzzers keep working whatever wagogpu's
layout becomes. Also the WAT text every generated guest shares.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).resolve().parent.parent / "spec" / "abi_v1.json"
_TABLE = json.loads(TABLE_PATH.read_text(encoding="utf-8"))

ABI_MODULE: str = _TABLE["abi"]
SLOTS: int = _TABLE["slots_per_instance"]
TRAP_FORMAT: str = _TABLE["scalar_trap_format"]


@dataclass(frozen=True)
class Import:
    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]

    @property
    def gc(self) -> bool:
        return "anyref" in self.params

    def wat(self) -> str:
        """The (import ...) line, the function labelled $<name>."""
        results = f" (result {' '.join(self.results)})" if self.results else ""
        return f'(import "{ABI_MODULE}" "{self.name}" (func ${self.name} (param {" ".join(self.params)}){results}))'


@dataclass(frozen=True)
class ElementInfo:
    id: int
    name: str
    stored_bytes: int
    scalar: str  # the Wasm type readBuffer<T> returns
    gpu: bool


IMPORTS: tuple[Import, ...] = tuple(Import(i["name"], tuple(i["params"]), tuple(i["results"]))
                                    for i in _TABLE["imports"])
IMPORTS_BY_NAME: dict[str, Import] = {i.name: i for i in IMPORTS}
ELEMENTS: tuple[ElementInfo, ...] = tuple(ElementInfo(e["id"], e["name"], e["stored_bytes"], e["scalar"], e["gpu"])
                                          for e in _TABLE["element_types"])
ELEMENTS_BY_ID: dict[int, ElementInfo] = {e.id: e for e in ELEMENTS}


def scalar_trap(status: int) -> str:
    """The message a scalar import traps with (docs/design/abi.md §2.0)."""
    return TRAP_FORMAT.format(status=status)


def import_decls(include_gc: bool = False) -> str:
    return "\n".join("  " + i.wat() for i in IMPORTS if include_gc or not i.gc)


def kernel_funcs(body: str, locals_: str = "", name: str = "k") -> str:
    """The kernel `wago_gpu.kernel.<name>` (index $i) and its CPU runner, which calls it for every index."""
    return f"""
  (func $kernel_{name} (export "wago_gpu.kernel.{name}") (param $i i32) {locals_}
    {body})
  (func (export "wago_gpu.cpu.{name}") (param $n i32) (local $j i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $j) (local.get $n)))
      (call $kernel_{name} (local.get $j))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $next))))"""


def trap_text(exc: BaseException) -> str:
    """What a trap says, without its backtrace: the trap code for a Wasm trap, else the first line
    of the message (an import's trap, e.g. `wago_gpu_v1 scalar access: status 3`)."""
    code = getattr(exc, "trap_code", None)
    if code is not None:
        return f"wasm trap: {getattr(code, 'name', code)}"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
