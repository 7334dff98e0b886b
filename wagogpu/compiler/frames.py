"""The open constructs of a body being lowered: one Frame per block, loop or if, frame 0 the body.

A frame records what its `end` and every branch to it need: the construct's parameter and result
types, the operand-stack height below its parameters, whether it is emitted as a WGSL loop (a
"wrapper", because some branch targets it), whether the code now being lowered in it is
unreachable, the vars that carry its results (and a wrapper loop's parameters), and the write
flags of control.py (which slots every path into its end has written).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..abi.table import SLOT_COUNT
from .records import Record

ALL_SLOTS = (1 << SLOT_COUNT) - 1


class FrameKind(enum.IntEnum):
    FUNC = 0
    BLOCK = 1
    LOOP = 2
    IF = 3


@dataclass(slots=True, eq=False)
class Frame:
    kind: FrameKind
    params: tuple[int, ...]  # Wasm type bytes the construct takes from the stack
    results: tuple[int, ...]  # ... and leaves on it
    height: int  # operand-stack height below the parameters at entry
    wrapper: bool  # emitted as a WGSL loop (some branch targets it)
    dead: bool  # the code now being lowered in this frame is unreachable
    entry_live: bool = True  # the construct's entry is reachable
    reached: bool = False  # a reachable branch targets it
    crossers: set[int] = field(default_factory=set)  # frame depths whose brk branches break out through it
    result_vars: tuple[int, ...] = ()  # value numbers of the vars its results travel in
    param_vars: tuple[int, ...] = ()  # a wrapper loop's parameters on re-entry
    param_records: tuple[Record, ...] = ()  # an if's parameters, for its else branch
    else_seen: bool = False
    then_live: bool = False  # an if's then-part could fall through to its end
    mw_entry: int = 0  # slots written on every path at entry
    mw_in: int = ALL_SLOTS  # ... on every branch to its end (block, if)
    mw_then: int = 0  # ... at the end of an if's then-part
    # The marks of locals whose var lacks their value (addressvars.py): at entry, at the end of an
    # if's then-part, merged over the branches to its end, changed by a loop's back edges.
    unknown_entry: dict[int, tuple[str, Record | None]] | None = None
    unknown_then: dict[int, tuple[str, Record | None]] | None = None
    unknown_in: dict[int, tuple[str, Record | None]] | None = None
    unknown_back: dict[int, tuple[str, Record | None]] | None = None
    opened: int = 0  # Extensions.events when it opened (var reads after it a back edge repeats)

    @property
    def label_types(self) -> tuple[int, ...]:
        """The types a branch to this frame carries: a loop's label takes its parameters."""
        return self.params if self.kind == FrameKind.LOOP else self.results

    @property
    def label_vars(self) -> tuple[int, ...]:
        return self.param_vars if self.kind == FrameKind.LOOP else self.result_vars
