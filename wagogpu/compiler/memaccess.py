"""Loads and stores: the memarg immediate, and where each access goes.

An access whose address is a shadow-stack address (records.FRAME, from the stack-pointer global)
reaches the kernel's private frame (shadow.py); any other load reads the snapshot of guest memory
the host binds at dispatch (memload.py). Stores to guest memory stay on the CPU: a kernel's
invocations run in parallel, so their stores could not be published in Wasm's order.

memory64 (64-bit addresses) and shared memories (another thread may change them while the kernel
runs) stay on the CPU; of several memories, loads may read one per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import memload, shadow
from .contract import CompileError
from .intrinsics import F32, I32
from .lowering import INVALID, UNSUPPORTED, Lowering
from .records import CONSTANT, FRAME

MEMORY_INDEX_FLAG = 0x40


@dataclass(frozen=True, slots=True)
class Access:
    """One load or store instruction: the value's type, how many bytes it moves, and for narrow
    loads whether they sign-extend."""

    name: str  # the Wasm mnemonic, for messages
    type: int  # Wasm value-type byte of the value loaded or stored
    width: int  # bytes
    signed: bool = False


LOADS: dict[int, Access] = {
    0x28: Access("i32.load", I32, 4),
    0x2A: Access("f32.load", F32, 4),
    0x2C: Access("i32.load8_s", I32, 1, True),
    0x2D: Access("i32.load8_u", I32, 1),
    0x2E: Access("i32.load16_s", I32, 2, True),
    0x2F: Access("i32.load16_u", I32, 2),
}
STORES: dict[int, Access] = {
    0x36: Access("i32.store", I32, 4),
    0x38: Access("f32.store", F32, 4),
    0x3A: Access("i32.store8", I32, 1),
    0x3B: Access("i32.store16", I32, 2),
}


def memarg(st: Lowering, access: Access) -> tuple[int, int]:
    """(memory index, static offset) of the access; refuses memories the GPU cannot read."""
    r = st.r
    flags = r.u32()
    memory = r.u32() if flags & MEMORY_INDEX_FLAG else 0
    offset = r.leb(64, False)
    memories = st.module.memories
    if memory >= len(memories):
        raise CompileError(INVALID, f"{access.name}: memory index {memory} out of range")
    if memories[memory].is64:
        raise CompileError(UNSUPPORTED, f"{access.name} on a memory64 memory (64-bit addresses stay on the CPU)")
    return memory, offset


def load(st: Lowering, access: Access) -> None:
    memory, offset = memarg(st, access)
    address = st.pop(I32)
    if st.pending is not None:
        return
    if st.top.dead:
        st.stack.append((CONSTANT, access.type, 0))
        return
    if address[0] == FRAME:
        _frame_memory(memory, access)
        st.stack.append(shadow.frame_load(st, address[2] + offset, access.width, access.type, access.signed))
        return
    if st.module.memories[memory].shared:
        raise CompileError(UNSUPPORTED, f"{access.name} from a shared memory (another thread may change it)")
    st.stack.append(memload.snapshot_load(st, memory, address, offset, access.width, access.type, access.signed))


def store(st: Lowering, access: Access) -> None:
    memory, offset = memarg(st, access)
    value = st.pop(access.type)
    address = st.pop(I32)
    if st.pending is not None or st.top.dead:
        return
    if address[0] != FRAME:
        raise CompileError(UNSUPPORTED, f"{access.name} to guest memory (stores outside the stack frame stay on "
                                        "the CPU)")
    _frame_memory(memory, access)
    shadow.frame_store(st, address[2] + offset, access.width, value)


def _frame_memory(memory: int, access: Access) -> None:
    if memory != 0:
        raise CompileError(UNSUPPORTED, f"{access.name}: a stack address used with memory {memory}")
