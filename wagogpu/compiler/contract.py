"""What the compiler records about a module for the host (docs/design/abi.md §6.2-6.3, docs/design/compiler.md §1.3.7).

The host never looks at Wasm bytes itself: it asks inspect_module() for a ModuleContract and acts
on it. These records are plain data so the compiler stays free of wasmtime and wgpu.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property

from ..abi.kernel import KernelError
from ..errors import CompileError, CompileErrorKind  # defined in the leaf errors.py; the compiler's own names

__all__ = ["CompileErrorKind", "CompileError", "KernelError", "KernelClass", "MemoryDecl", "KernelPlan",
           "ModuleContract"]


class KernelClass(enum.Enum):
    INVALID = "invalid"  # dispatch always returns INVALID_KERNEL (10)
    REJECTED = "rejected"  # valid contract but outside the GPU subset: CPU fallback
    ELIGIBLE = "eligible"  # WGSL produced; GPU if device, consent and threshold allow


@dataclass(frozen=True)
class MemoryDecl:
    """One memory of the module, in index order: imported memories first, then defined ones."""

    is64: bool
    shared: bool
    imported: bool


@dataclass(frozen=True)
class KernelPlan:
    kernel_id: int
    cls: KernelClass
    reason: str = ""  # CompileError message when not ELIGIBLE
    error_kind: CompileErrorKind | None = None
    wgsl: str | None = None
    read_slots: frozenset[int] = frozenset()  # slots the body actually reads
    write_slots: frozenset[int] = frozenset()  # slots the body actually writes
    read_before_write: frozenset[int] = frozenset()  # written slots whose old value is read first
    is_float: bool = False  # docs/design/abi.md §5.5: needs relaxed_float consent for the GPU
    translate_seconds: float = 0.0
    # Kernels that can trap, exhaust a loop budget or read out of range on the GPU declare one more
    # storage binding after the slots: a zeroed array<atomic<u32>, 4> whose word 0 the shader sets to
    # an ERROR_* code. A non-zero word means nothing is committed and dispatch returns 1.
    error_word: bool = False
    loop_budget: int = 0  # loop iterations one invocation may run (reader.LOOP_BUDGET); 0: no loop
    # Kernels that load guest memory (memload.py) declare one more binding after the error word: a
    # read-only snapshot of memory `memory` from about `memory_low` (the host picks the range at
    # dispatch and writes it into the snapshot's header). -1: no loads.
    memory: int = -1
    memory_low: int = 0
    needs_f64: bool = False  # the WGSL uses f64: only a device with the shader-f64 feature runs it

    @cached_property
    def overwritten_slots(self) -> frozenset[int]:
        """Written slots whose old value no path reads (the compiler counts a conditional write as
        read before written): a dispatch over a buffer's whole length replaces such a slot whole,
        so neither device needs its stale copy first. The one statement of that rule, for the GPU's
        uploads (buffers/setup.py), the CPU kernel's readbacks (host/cpukernels.replaced_slots) and
        measured placement's pricing of both (host/placement.py)."""
        return self.write_slots - self.read_before_write

    def replaces_whole(self, slot: int, count: int, length: int) -> bool:
        """Whether a dispatch of `count` elements replaces the `length`-element buffer at `slot` whole."""
        return count == length and slot in self.overwritten_slots

    @property
    def used_slots(self) -> tuple[int, ...]:
        """Slots with a WGSL storage binding, in binding order (binding i+1 = used_slots[i])."""
        return tuple(sorted(self.read_slots | self.write_slots))

    @property
    def memory_binding(self) -> int:
        """The snapshot's binding number (after the slots and the error word); 0 when none."""
        return len(self.used_slots) + 2 if self.memory >= 0 else 0


@dataclass(frozen=True)
class ModuleContract:
    verified: bool
    reason: str = ""  # why not verified
    memories: tuple[MemoryDecl, ...] = ()
    kernels: dict[int, KernelPlan] = field(default_factory=dict)
    legacy_wgsl: str | None = None  # legacy (f32)->f32 kernel, when kernel_export compiled
    legacy_reason: str = ""
    # The module's defined or imported mutable i32 globals, by index: those a CPU kernel may import
    # from its guest (a shadow-stack pointer is one), which the host exports under internal names.
    mutable_i32_globals: tuple[int, ...] = ()
