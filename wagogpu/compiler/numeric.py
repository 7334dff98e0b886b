"""The record of one pure instruction (NumericOp), the row builder every numeric table uses, and
how a shader gets the WGSL helper functions its rows call.

A row says which form it wants each operand in and which form its result has (records.Form):
"u" a u32 (an i32, or an f32's bits), "f" an f32 value, "p" a vec2<u32> (an i64, or an f64's
bits, low word first), "d" an f64 value. Three flags say what a row costs the kernel's consent:

* is_float: the row touches a float type, so the kernel is a float kernel (docs/design/abi.md §5.5);
* rounding: the GPU's float units compute it, so an adapter may round, flush or fold differently
  from Wasm (a strict_float kernel replaces every such row that has an exact form, `strict`);
* f64: the WGSL uses the f64 type, which only an adapter with shader-f64 compiles.

Helpers are named WGSL functions held in one dict per module; a helper may call others, found by
name in its text, so a row lists only the functions its expression calls and `dependencies`
adds the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .records import Form


@dataclass(frozen=True, slots=True)
class NumericOp:
    """A pure instruction: pops `params` (deepest first), pushes one `result`."""

    params: tuple[int, ...]  # Wasm type byte per operand
    result: int  # Wasm type byte of the result
    forms: tuple[Form, ...]  # the form each operand is wanted in
    carrier: Form  # the result's form
    expr: str  # WGSL expression; {0}, {1} are the operand texts in their forms
    trap: str = ""  # WGSL condition under which Wasm traps (empty: never)
    helpers: tuple[str, ...] = ()  # helper functions the expression calls
    is_float: bool = False  # marks the kernel float (needs relaxed_float)
    infix: str = ""  # a deferred node's operator with its spaces (lowering.py); empty: emitted at once
    rounding: bool = False  # the GPU's float units compute it (may differ from Wasm's answer)
    f64: bool = False  # the WGSL uses f64 (needs the adapter's shader-f64 feature)
    strict: NumericOp | None = None  # the exact form a strict_float kernel uses instead

    @property
    def deferred(self) -> bool:
        return bool(self.infix)


def row(params: tuple[int, ...], result: int, forms: str, carrier: str, expr: str, trap: str = "",
        helpers: tuple[str, ...] = (), is_float: bool = False, rounding: bool = False,
        strict: NumericOp | None = None) -> NumericOp:
    """A row with its forms written as letters ("u", "f", "p", "d"; see the module docstring)."""
    f64 = Form.DOUBLE in forms or carrier == Form.DOUBLE
    return NumericOp(params, result, tuple(Form(c) for c in forms), Form(carrier), expr, trap, helpers,
                     is_float or rounding, "", rounding, f64, strict)


def call_row(name: str, params: tuple[int, ...], result: int, forms: str, carrier: str, trap: str = "",
             is_float: bool = False) -> NumericOp:
    """A row that is one call of the WGSL helper `name` on its operands: the name written once."""
    args = ", ".join(f"{{{i}}}" for i in range(len(params)))
    return row(params, result, forms, carrier, f"{name}({args})", trap, (name,), is_float)


_CALL = re.compile(r"\b([a-z][a-z0-9_]*)\(")


def dependencies(helpers: dict[str, str]) -> dict[str, frozenset[str]]:
    """Per helper: itself and every helper its text calls, directly or through others (computed
    once, at import, for the whole table)."""
    calls = {name: {c for c in _CALL.findall(text) if c in helpers and c != name} for name, text in helpers.items()}
    closed: dict[str, frozenset[str]] = {}

    def visit(name: str, path: tuple[str, ...]) -> frozenset[str]:
        if name in closed:
            return closed[name]
        if name in path:
            raise ValueError(f"WGSL helpers call each other in a cycle: {' -> '.join(path + (name,))}")
        found = {name}
        for callee in calls[name]:
            found |= visit(callee, path + (name,))
        closed[name] = frozenset(found)
        return closed[name]

    for name in helpers:
        visit(name, ())
    return closed
