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
from .intrinsics import F32, F64, I32, I64
from .lowering import BITS, INVALID, PAIR, UNSUPPORTED, Lowering
from .records import CONSTANT, FRAME, NUMBER, Record


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
    0x29: Access("i64.load", I64, 8),
    0x2A: Access("f32.load", F32, 4),
    0x2B: Access("f64.load", F64, 8),
    0x2C: Access("i32.load8_s", I32, 1, True),
    0x2D: Access("i32.load8_u", I32, 1),
    0x2E: Access("i32.load16_s", I32, 2, True),
    0x2F: Access("i32.load16_u", I32, 2),
    0x30: Access("i64.load8_s", I64, 1, True),
    0x31: Access("i64.load8_u", I64, 1),
    0x32: Access("i64.load16_s", I64, 2, True),
    0x33: Access("i64.load16_u", I64, 2),
    0x34: Access("i64.load32_s", I64, 4, True),
    0x35: Access("i64.load32_u", I64, 4),
}
STORES: dict[int, Access] = {
    0x36: Access("i32.store", I32, 4),
    0x37: Access("i64.store", I64, 8),
    0x38: Access("f32.store", F32, 4),
    0x39: Access("f64.store", F64, 8),
    0x3A: Access("i32.store8", I32, 1),
    0x3B: Access("i32.store16", I32, 2),
    0x3C: Access("i64.store8", I64, 1),
    0x3D: Access("i64.store16", I64, 2),
    0x3E: Access("i64.store32", I64, 4),
}
# A narrow i64 load is the i32 load of its bytes, then extended (int64.py's rows).
EXTEND = {True: "i64_from_i32({})", False: "vec2<u32>({}, 0u)"}


def memarg(st: Lowering, access: Access) -> tuple[int, int]:
    """(memory index, static offset) of the access; refuses memories the GPU cannot read."""
    memory, _align, offset = st.r.memarg()
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
    narrow = access.type == I64 and access.width < 8
    wtype = I32 if narrow else access.type
    if address[0] == FRAME:
        _frame_memory(memory, access)
        value = shadow.frame_load(st, address[2] + offset, access.width, wtype, access.signed)
    else:
        if st.module.memories[memory].shared:
            raise CompileError(UNSUPPORTED, f"{access.name} from a shared memory (another thread may change it)")
        value = memload.snapshot_load(st, memory, address, offset, access.width, wtype, access.signed)
    st.stack.append(_extended(st, value, access.signed) if narrow else value)


def _extended(st: Lowering, value: Record, signed: bool) -> Record:
    """The i64 of a narrow i64 load, from the i32 its bytes give (already sign- or zero-extended
    to 32 bits)."""
    if value[0] == CONSTANT:
        v = value[2]
        return (CONSTANT, I64, (v | (0xFFFFFFFF00000000 if signed and v & 0x80000000 else 0)))
    if signed:
        st.helpers.add("i64_from_i32")
    return (NUMBER, I64, st.let(PAIR, EXTEND[signed].format(st.bits(value))))


def _wrapped(st: Lowering, value: Record) -> Record:
    """The low word of an i64 that a narrow i64 store writes."""
    if value[0] == CONSTANT:
        return (CONSTANT, I32, value[2] & 0xFFFFFFFF)
    return (NUMBER, I32, st.let(BITS, f"{st.bits(value)}.x"))


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
    if access.type == I64 and access.width < 8:
        value = _wrapped(st, value)
    shadow.frame_store(st, address[2] + offset, access.width, value)


def _frame_memory(memory: int, access: Access) -> None:
    if memory != 0:
        raise CompileError(UNSUPPORTED, f"{access.name}: a stack address used with memory {memory}")
