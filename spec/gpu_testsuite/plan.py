"""From a `.wast` script to the jobs the runner executes: one per pure i32/f32 function with cases.

Each script module is compiled by wasmtime's WAT parser, decoded, and every function an
assert_return/assert_trap invokes is spliced (splice.py) into a guest (guest.py). A case that
cannot be run this way keeps the reason, so the report accounts for every case of the file.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import wasmtime

from .binary import BinaryError, DecodedModule, FuncType, decode_module
from .guest import GuestModule, build_guest, runnable_type
from .literals import ValueType
from .splice import DIV_SQRT_OPCODES, Impurity, NotPure, splice_body, uses_floats
from .wast import Case, CaseKind, Script, read_script


class Skip(enum.StrEnum):
    """Why a case is not run (the report counts each)."""

    MODULE = "module not decodable"
    EXPORT = "export is not a defined function"
    TYPES = "parameters or results not i32/f32 (or more than 8)"
    ARGUMENTS = "arguments or results not i32/f32 constants"


@dataclass(slots=True)
class FunctionJob:
    """One spliced function and the cases that invoke it (under any of its export names)."""

    file: str
    name: str  # the first export name a case used
    line: int  # line of the module in the script
    ftype: FuncType
    guest: GuestModule
    floats: bool  # an f32/f64 value can occur: differences are classified, not failures
    div_sqrt: bool  # uses f32.div or f32.sqrt
    returns: list[Case] = field(default_factory=list)
    traps: list[Case] = field(default_factory=list)


@dataclass(slots=True)
class FilePlan:
    file: str
    functions: int = 0  # defined functions in the script's modules
    cases: int = 0  # assert_return / assert_trap cases with an invoke
    jobs: list[FunctionJob] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> cases not run
    impure: Counter[str] = field(default_factory=Counter)  # Impurity -> functions with cases


def _decode(text: str) -> DecodedModule | None:
    try:
        return decode_module(bytes(wasmtime.wat2wasm(text)))
    except (BinaryError, wasmtime.WasmtimeError):
        return None


def _case_types_fit(case: Case) -> bool:
    types = [v.type for v in case.args] + [e.type for e in case.expected]
    return all(t in (ValueType.I32, ValueType.F32) for t in types)


def _job(file: str, module: DecodedModule, func: int, cases: list[Case], line: int) -> FunctionJob | str:
    """The job of `func` and its cases, or the reason it cannot run."""
    defined = func - module.imported_funcs
    if not 0 <= defined < len(module.bodies):
        return Skip.EXPORT
    ftype = module.types[module.func_types[defined]]
    if not runnable_type(ftype):
        return Skip.TYPES
    try:
        spliced = splice_body(module.bodies[defined].code)
    except NotPure as exc:
        return exc.reason.value
    returns = [c for c in cases if c.kind is CaseKind.RETURN and _case_types_fit(c)]
    traps = [c for c in cases if c.kind is CaseKind.TRAP and _case_types_fit(c)]
    if len(returns) + len(traps) < len(cases):  # a valid script never gets here: the types match
        return Skip.ARGUMENTS
    local_types = tuple(t for _, t in module.bodies[defined].locals) + ftype.params + ftype.results
    # memory for the return batch plus the one trap case placed after it
    guest = build_guest(module, func, spliced, elements=len(returns) + 1)
    return FunctionJob(file, cases[0].export, line, ftype, guest, uses_floats(spliced, local_types),
                       bool(spliced.opcodes & DIV_SQRT_OPCODES), returns, traps)


def plan_script(script: Script) -> FilePlan:
    """Group the script's cases by the function they invoke and splice each function once."""
    plan = FilePlan(script.path, cases=len(script.cases))
    decoded = [_decode(m.text) for m in script.modules]
    plan.functions = sum(len(d.bodies) for d in decoded if d is not None)
    grouped: dict[tuple[int, int], list[Case]] = {}
    for case in script.cases:
        module = decoded[case.module]
        func = module.exports.get(case.export) if module is not None else None
        if module is None:
            plan.skipped[Skip.MODULE] += 1
        elif func is None:
            plan.skipped[Skip.EXPORT] += 1
        else:
            grouped.setdefault((case.module, func), []).append(case)
    for (index, func), cases in grouped.items():
        module = decoded[index]
        assert module is not None
        job = _job(script.path, module, func, cases, script.modules[index].line)
        if isinstance(job, FunctionJob):
            plan.jobs.append(job)
            continue
        plan.skipped[job] += len(cases)
        if job in Impurity.__members__.values():
            plan.impure[job] += 1
    return plan


def plan_file(path: Path) -> FilePlan:
    return plan_script(read_script(path))
