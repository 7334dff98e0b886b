"""The shadow stack: a per-invocation private frame for what C and Zig keep in linear memory.

At -O0, in Debug builds and wherever a local's address is taken, compilers move the stack-pointer
global down (`global.get $sp; i32.const N; i32.sub; global.set $sp`), keep locals in the frame and
move it back before returning. Here the stack pointer is a compile-time symbol: `global.get` of
it gives a FRAME record holding its offset from the value at kernel entry, `i32.add`/`i32.sub` of a
constant move that offset, and a load or store at a FRAME address reaches a frame slot, not
memory. Every invocation so gets its own frame and no byte of guest memory is touched.

Slots. A slot is one offset the kernel stored to. Like a local (instructions.py), it keeps the
stored record while it is stored only in the outermost WGSL scope, so the invocation index and
buffer handles keep their identity through the frame (at -O0 they always go through it); stored
inside control flow it lives in a `var` (u32 bits), with a written-flag var while some path to
here may not have stored it: a load that finds the flag clear raises the error word
(KernelError.INDEX_RANGE), so the CPU runner, which would read whatever memory holds there,
answers instead. Whether a slot is stored inside control flow is known only once that store is
lowered, possibly after a load in the same loop already used its record; so such a store records
a conflict, and lower.py lowers the kernel again with those offsets in vars from the start
(reader.MAX_FRAME_PASSES passes at most; each pass adds at least one offset).

What stays on the CPU: the stack pointer moved inside control flow, or not restored where its
function returns; an access outside the frame the kernel allocated; one that partly overlaps a
slot; a load of an offset never stored; a frame address used as a number.
"""
from __future__ import annotations

from . import reader as lim
from .contract import CompileError, KernelError
from .extensions import FrameSlot
from .intrinsics import F32, F64, I32, I64
from .lowering import BITS, LIMIT, PAIR, UNSUPPORTED, Lowering
from .records import BITS_FORM, CONSTANT, FRAME, HANDLE, INDEX, NUMBER, Record

MASK = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF}
# A narrow load of a slot's bits ({} is the bits' text), by (width, signed).
NARROW_LOAD = {(1, False): "({} & 255u)", (1, True): "bitcast<u32>(bitcast<i32>({} << 24u) >> 24u)",
               (2, False): "({} & 65535u)", (2, True): "bitcast<u32>(bitcast<i32>({} << 16u) >> 16u)"}
SLOT_TYPE = {False: I32, True: I64}  # the Wasm type a slot's var holds its bits as, by "8 bytes wide"
MOVED_IN_CONTROL_FLOW = "the stack pointer is moved inside control flow"
NOT_RESTORED = "the stack pointer is not restored where the function returns"


def signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def address_arith(st: Lowering, opcode: int, args: list[Record]) -> Record:
    """i32.add / i32.sub with a stack address: the address moves by a constant."""
    if len(args) == 2:
        (lk, _, lv), (rk, _, rv) = args
        if opcode == 0x6A and lk == FRAME and rk == CONSTANT:
            return (FRAME, I32, lv + signed32(rv))
        if opcode == 0x6A and lk == CONSTANT and rk == FRAME:
            return (FRAME, I32, rv + signed32(lv))
        if opcode == 0x6B and lk == FRAME and rk == CONSTANT:
            return (FRAME, I32, lv - signed32(rv))
        if opcode == 0x6B and lk == FRAME and rk == FRAME:
            return (CONSTANT, I32, (lv - rv) & 0xFFFFFFFF)
    raise st.stack_pointer_misuse("its value is used as a number, which a stack address cannot be")


def at_function_top(st: Lowering) -> bool:
    return len(st.frames) - 1 == st.frame_base


def move_stack_pointer(st: Lowering, value: Record) -> None:
    """global.set of the stack pointer: only to a frame address, in the function's straight-line
    code (so its value at every instruction is known), and never above its entry value."""
    if value[0] != FRAME:
        raise CompileError(UNSUPPORTED, "the stack pointer is set to a computed value")
    if not at_function_top(st):
        release_to_return(st, value[2])
        return
    if value[2] > 0:
        raise st.stack_pointer_misuse("set above its value at kernel entry, which a stack pointer never is")
    if value[2] < -lim.MAX_FRAME_BYTES:
        raise CompileError(LIMIT, "stack frame limit")
    st.ext.sp_offset = value[2]


def release_to_return(st: Lowering, offset: int) -> None:
    """global.set of the stack pointer inside control flow: only its restore to the function's
    entry value on a path that then returns or traps (an early `return`, Zig's Debug epilogues,
    the stack protector's check). The function's frame is released on that path only: its
    accesses there are outside the frame, and the path may not reach a join (constructs.py
    refuses a branch or fall-through while released); when it ends (Lowering.set_dead) the
    stack pointer is the frame's again for the code after it."""
    ext = st.ext
    entry = ext.calls[-1].entry_sp if ext.calls else 0
    if offset != entry or ext.sp_resume is not None:
        raise CompileError(UNSUPPORTED, MOVED_IN_CONTROL_FLOW)
    if offset != ext.sp_offset:
        ext.sp_resume = ext.sp_offset
        ext.sp_offset = offset


def check_joinable(st: Lowering) -> None:
    """A live path reaching a join or branching inside the function: its frame must be held."""
    if st.ext.sp_resume is not None:
        raise CompileError(UNSUPPORTED, MOVED_IN_CONTROL_FLOW)


def check_restored(st: Lowering, entry: int) -> None:
    if st.ext.sp_offset != entry:
        raise CompileError(UNSUPPORTED, NOT_RESTORED)


def _slot_for(st: Lowering, offset: int, width: int) -> FrameSlot | None:
    """The slot at `offset`; refuses accesses outside the allocated frame or across slots."""
    ext = st.ext
    if offset < ext.sp_offset or offset + width > 0:
        raise CompileError(UNSUPPORTED, f"stack access at offset {offset} is outside the kernel's frame")
    slots = ext.slots
    slot = slots.get(offset)
    for other, s in slots.items():
        if other != offset and other < offset + width and offset < other + s.width:
            raise CompileError(UNSUPPORTED, f"stack accesses at offsets {other} and {offset} overlap")
    return slot


def frame_load(st: Lowering, offset: int, width: int, wtype: int, signed: bool) -> Record:
    slot = _slot_for(st, offset, width)
    if slot is None:
        raise CompileError(UNSUPPORTED, f"load of stack memory the kernel did not store (offset {offset})")
    if width > slot.width:
        raise CompileError(UNSUPPORTED, f"stack slot at offset {offset} loaded wider than it was stored")
    if slot.var >= 0:
        if not slot.surely and slot.flag >= 0:
            st.raise_error_if(f"{st.names[slot.flag]} == 0u", KernelError.INDEX_RANGE)
        stype = SLOT_TYPE[slot.width == 8]
        rec: Record = (NUMBER, stype, st.let(BITS_FORM[stype], st.names[slot.var]))
    else:
        assert slot.record is not None
        rec = slot.record
    if width == slot.width:
        return retype(st, rec, wtype)
    if slot.width == 8:
        rec = low_word(st, rec)
    if width == 4:
        return retype(st, rec, wtype)
    return (NUMBER, I32, st.let(BITS, NARROW_LOAD[width, signed].format(st.bits(rec))))


def low_word(st: Lowering, rec: Record) -> Record:
    """The first four bytes of an 8-byte slot: its low word, as an i32."""
    if rec[0] == CONSTANT:
        return (CONSTANT, I32, rec[2] & 0xFFFFFFFF)
    return (NUMBER, I32, st.let(BITS, f"{st.bits(rec)}.x"))


def retype(st: Lowering, rec: Record, wtype: int) -> Record:
    """A slot read as `wtype` of its width: the same bits (an i32 stored and loaded as f32, or an
    i64 as f64, is reinterpreted)."""
    if wtype == F32 or wtype == F64:
        st.is_float = True
    kind = rec[0]
    if rec[1] == wtype:
        return rec
    if kind == HANDLE or kind == FRAME:
        raise CompileError(UNSUPPORTED, "an address in a stack slot loaded as f32")
    if kind == INDEX:
        return (NUMBER, wtype, st.let(BITS, "index"))
    return (kind, wtype, rec[2])


def frame_store(st: Lowering, offset: int, width: int, value: Record) -> None:
    ext = st.ext
    slot = _slot_for(st, offset, width)
    if slot is None:
        if len(ext.slots) >= lim.MAX_FRAME_SLOTS:
            raise CompileError(LIMIT, "stack frame slot limit")
        slot = ext.slots[offset] = FrameSlot(width)
    outer = ext.scope_depth(len(st.frames)) == 0
    if width > slot.width:
        if not outer or slot.var >= 0:
            raise CompileError(UNSUPPORTED, f"stack slot at offset {offset} widened inside control flow")
        slot.width = width
    if slot.var < 0 and slot.record is not None and not outer:
        ext.conflicts.add(offset)  # stored inside control flow after a load may have used its record
        _to_var(st, slot)
    if outer and slot.var < 0 and offset not in ext.forced:
        slot.record = _merged(st, slot, width, value)
        slot.surely = True
        return
    if slot.var < 0:
        slot.var = st.new_var(SLOT_TYPE[slot.width == 8])
        if not outer:
            slot.flag = st.new_var()
    merged = _merged(st, slot, width, value)
    st.emit(f"  {st.names[slot.var]} = {st.bits(merged)};\n")
    if slot.flag >= 0 and not slot.surely:
        st.emit(f"  {st.names[slot.flag]} = 1u;\n")
    if outer:
        slot.surely = True


def _to_var(st: Lowering, slot: FrameSlot) -> None:
    assert slot.record is not None
    slot.var = st.new_var(SLOT_TYPE[slot.width == 8])
    st.emit(f"  {st.names[slot.var]} = {st.bits(slot.record)};\n")
    slot.record = None


def _merged(st: Lowering, slot: FrameSlot, width: int, value: Record) -> Record:
    """The slot's contents after storing `width` bytes of `value` at its start (little-endian: a
    narrow store replaces the low bytes and keeps the others)."""
    if width == slot.width:
        return value
    if not slot.surely:
        raise CompileError(UNSUPPORTED, "a narrow store into a stack slot some path has not stored")
    if slot.var >= 0:
        old = st.names[slot.var]
    else:
        assert slot.record is not None
        old = st.bits(slot.record)
    if slot.width == 8:  # the low word changes, the high word stays
        low = st.bits(value) if width == 4 else f"(({old}.x & 0x{~MASK[width] & 0xFFFFFFFF:08x}u) | " \
                                                f"({st.bits(value)} & 0x{MASK[width]:08x}u))"
        return (NUMBER, I64, st.let(PAIR, f"vec2<u32>({low}, {old}.y)"))
    mask = MASK[width]
    keep = MASK[slot.width] & ~mask
    return (NUMBER, I32, st.let(BITS, f"(({old} & 0x{keep:08x}u) | ({st.bits(value)} & 0x{mask:08x}u))"))
