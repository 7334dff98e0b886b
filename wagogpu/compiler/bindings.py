"""The binding scan of docs/design/compiler.md §1.3.5 step 2: what a kernel's declared slots allow."""
from __future__ import annotations

from dataclasses import dataclass

from ..abi.kernel import GPU_WORDS, BindingConfig
from ..abi.table import SLOT_COUNT, TYPE_INFO, Access, ElementType
from .contract import CompileErrorKind

FLOAT_SCALARS = frozenset(("f32", "f64"))
F16 = ElementType["F16"]


@dataclass(frozen=True, slots=True)
class BindingFacts:
    """What the scan derives from a kernel's declarations."""

    slot_type: dict[int, ElementType]  # read-only once built
    can_read: int  # slot bit masks
    can_write: int
    is_float: bool  # an F16, F32 or F64 binding
    f16: bool  # an F16 binding: the shader carries the helper
    problem: tuple[CompileErrorKind, str] | None  # the scan's first rejection
    # Slots of 64-bit types (two words per element on the GPU). The reference refuses any kernel
    # that declares one ("64-bit GPU buffers are unsupported"); here it runs, and a contract error
    # in its body falls back as the reference's refusal would (Lowering.contract_error).
    wide: int = 0


_FACTS: dict[int, tuple[object, BindingFacts]] = {}  # id(bindings tuple) -> (that tuple, facts)


def binding_facts(bindings: tuple[BindingConfig, ...]) -> BindingFacts:
    """The scan of a (validated, immutable) bindings tuple; memoised by identity, bounded."""
    hit = _FACTS.get(id(bindings))
    if hit is not None and hit[0] is bindings:
        return hit[1]
    facts = _scan(bindings)
    if isinstance(bindings, tuple):
        if len(_FACTS) >= 256:
            _FACTS.clear()
        _FACTS[id(bindings)] = (bindings, facts)
    return facts


def _scan(bindings: tuple[BindingConfig, ...]) -> BindingFacts:
    slot_type: dict[int, ElementType] = {}
    can_read = can_write = wide = 0
    is_float = f16 = False
    problem = None
    for b in bindings:
        slot, etype, access = b.slot, b.type, b.access
        if not 0 <= slot < SLOT_COUNT:
            problem = (CompileErrorKind.INVALID_CONTRACT, "invalid slot")
            break
        info = TYPE_INFO[ElementType(etype)]
        if info.scalar in FLOAT_SCALARS:
            is_float = True
        if GPU_WORDS[info.type] == 2:
            wide |= 1 << slot
        slot_type[slot] = ElementType(etype)
        f16 = f16 or etype == F16
        if access & Access.READ:
            can_read |= 1 << slot
        if access & Access.WRITE:
            can_write |= 1 << slot
    return BindingFacts(slot_type, can_read, can_write, is_float, f16, problem, wide)
