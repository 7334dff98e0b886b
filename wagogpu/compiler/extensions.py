"""The lowering workspace's state for what compiled languages add to a kernel: inlined calls, the
shadow stack and guest-memory loads (inline.py, shadow.py, memload.py hold the logic).

These are records only, so lowering.py can hold one of each without importing the handlers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .records import Record


@dataclass(slots=True)
class FrameSlot:
    """What the kernel stored at one offset of its shadow stack (offsets are bytes relative to the
    stack pointer at kernel entry, so always negative). A slot is either a record (stored in
    straight-line code of the outermost WGSL scope, so it is in scope everywhere after) or a
    WGSL `var` (stored inside control flow). `flag` is the var that says the slot was written on
    this path, needed while `surely` (written on every path to here) is False."""

    width: int  # bytes of the widest store at this offset
    record: Record | None = None  # record state
    var: int = -1  # value number of its u32 var (var state)
    flag: int = -1  # value number of its written-flag var, -1: none
    surely: bool = False


@dataclass(slots=True)
class Call:
    """One inlined call in progress: what to restore when the callee's final end is reached."""

    function: int  # absolute function index
    saved: tuple[object, int, int, object]  # (reader, frame_base, local_base, targeted) of the caller
    entry_sp: int  # the stack-pointer offset at the call
    braceless: bool  # its frame emits no WGSL scope (no branch targets it)
    locals_start: int  # index of the callee's first local among the workspace's


@dataclass(slots=True)
class Extensions:
    """Per-lowering state of inline.py, shadow.py and memload.py."""

    calls: list[Call] = field(default_factory=list)
    inlined_bytes: int = 0  # body bytes of every inlined call so far
    inlined_instructions: int = 0
    braceless: int = 0  # open callee frames that emit no WGSL scope
    run_body: Callable[..., int] | None = None  # the checked driver (lower.run_checked)
    noreturn: dict[int, bool] = field(default_factory=dict)  # defined function -> inline.never_returns
    # locals holding a stack address or a buffer handle that control flow assigns (instructions.py)
    # local -> (why, the record it holds on this path or None); never mutated, replaced
    unknown_locals: dict[int, tuple[str, Record | None]] = field(default_factory=dict)
    var_reads: dict[int, int] = field(default_factory=dict)  # local -> `events` at its last var read
    events: int = 0  # a counter of var reads and loop openings, ordering them
    # shadow stack
    sp_global: int = -1  # the mutable i32 global used as the stack pointer
    sp_offset: int = 0  # its value now, relative to its value at kernel entry
    sp_resume: int | None = None  # set while a path inside control flow has released its frame to return
    slots: dict[int, FrameSlot] = field(default_factory=dict)  # frame offset -> slot
    forced: frozenset[int] = frozenset()  # offsets a previous pass found stored inside control flow
    conflicts: set[int] = field(default_factory=set)  # ... found by this pass (lower.py restarts)
    # guest-memory loads
    memory: int = -1  # the memory index loads read (-1: none)
    static_low: int = -1  # lowest address the module's data or a constant access names
    helpers: set[str] = field(default_factory=set)  # memload.HELPERS the code calls

    def scope_depth(self, open_frames: int) -> int:
        """WGSL scopes open around the code now lowered (callee frames without braces excluded)."""
        return open_frames - 1 - self.braceless
