"""Guest-memory loads on the GPU: reads of a snapshot of linear memory that the host binds at
dispatch (KernelPlan.memory), exactly the bytes the CPU runner would read at that moment.

The snapshot is one read-only `array<u32>` bound after the error word: word 0 is its length in
bytes, word 1 the guest address of its first byte, the bytes follow from word 2 (little-endian,
as Wasm's). The host decides the range at dispatch (buffers/snapshots.py): from the lowest address
the module's data segments or the kernel's constant addresses name (KernelPlan.memory_low), up to
reader.MAX_SNAPSHOT_BYTES or the memory's end. Each load computes its effective address as Wasm
does (address + offset, without wrapping) and checks it lies inside the snapshot; one that does
not raises the error word (KernelError.INDEX_RANGE), so the dispatch publishes nothing and the
guest's CPU runner reads memory itself, trapping where Wasm traps. A load inside the snapshot is
inside the memory, so a load the GPU answers never hides a trap.
"""
from __future__ import annotations

from .contract import CompileError, KernelError
from .intrinsics import F32, F64
from .lowering import BITS, UNSUPPORTED, Lowering
from .records import BITS_FORM, CONSTANT, NUMBER, Record

OUT_OF_RANGE = "0xffffffffu"
HEADER_WORDS = 2

HELPERS: dict[str, str] = {
    # Byte index into the snapshot of the `w`-byte access at a + o, or OUT_OF_RANGE.
    "wasm_mem_at": """fn wasm_mem_at(a: u32, o: u32, w: u32) -> u32 {
  let n = mem[0];
  let lo = mem[1];
  if (a > 0xffffffffu - o) { return 0xffffffffu; }
  let ea = a + o;
  if (ea < lo || ea - lo > n || n - (ea - lo) < w) { return 0xffffffffu; }
  return ea - lo;
}
""",
    "wasm_mem_byte": """fn wasm_mem_byte(b: u32) -> u32 {
  return (mem[2u + (b >> 2u)] >> ((b & 3u) * 8u)) & 255u;
}
""",
    "wasm_mem_u16": """fn wasm_mem_u16(b: u32) -> u32 {
  return wasm_mem_byte(b) | (wasm_mem_byte(b + 1u) << 8u);
}
""",
    "wasm_mem_u32": """fn wasm_mem_u32(b: u32) -> u32 {
  let s = (b & 3u) * 8u;
  let w = mem[2u + (b >> 2u)];
  if (s == 0u) { return w; }
  return (w >> s) | (mem[3u + (b >> 2u)] << (32u - s));
}
""",
}
# The value of a load at byte index {} of the snapshot, by (width, signed), and the helpers it calls.
READ_EXPR: dict[tuple[int, bool], tuple[str, tuple[str, ...]]] = {
    (1, False): ("wasm_mem_byte({})", ("wasm_mem_byte",)),
    (1, True): ("bitcast<u32>(bitcast<i32>(wasm_mem_byte({}) << 24u) >> 24u)", ("wasm_mem_byte",)),
    (2, False): ("wasm_mem_u16({})", ("wasm_mem_byte", "wasm_mem_u16")),
    (2, True): ("bitcast<u32>(bitcast<i32>(wasm_mem_u16({}) << 16u) >> 16u)", ("wasm_mem_byte", "wasm_mem_u16")),
    (4, False): ("wasm_mem_u32({})", ("wasm_mem_u32",)),
    (8, False): ("vec2<u32>(wasm_mem_u32({0}), wasm_mem_u32({0} + 4u))", ("wasm_mem_u32",)),
}


def binding_line(binding: int) -> str:
    return f"@group(0) @binding({binding}) var<storage, read> mem: array<u32>;\n"


def helper_text(names: tuple[str, ...]) -> str:
    return "".join(HELPERS[n] for n in HELPERS if n in names)


def _data_low(st: Lowering, memory: int) -> int:
    """The lowest address an active data segment of `memory` starts at (-1: none known)."""
    starts = [seg.offset for seg in st.module.statics.data if seg.memory == memory and seg.offset is not None]
    return min(starts) if starts else -1


def _note_address(st: Lowering, memory: int, address: int) -> None:
    ext = st.ext
    if ext.memory < 0:
        ext.memory = memory
        ext.static_low = _data_low(st, memory)
    elif ext.memory != memory:
        raise CompileError(UNSUPPORTED, f"loads from memories {ext.memory} and {memory} in one kernel")
    if address >= 0 and (ext.static_low < 0 or address < ext.static_low):
        ext.static_low = address


def snapshot_load(st: Lowering, memory: int, address: Record, offset: int, width: int, wtype: int,
                  signed: bool) -> Record:
    if offset > 0xFFFFFFFF:
        raise CompileError(UNSUPPORTED, "load offset beyond 32 bits")
    # A constant address is where the load reads; a dynamic one's static offset is where compilers
    # put the table it indexes (both lower the snapshot's start when they are below it).
    _note_address(st, memory, address[2] + offset if address[0] == CONSTANT else offset if offset else -1)
    if wtype == F32 or wtype == F64:
        st.is_float = True
    expr, helpers = READ_EXPR[width, signed and width < 4]
    ext = st.ext
    ext.helpers.update(("wasm_mem_at",) + helpers)
    at = st.let(BITS, f"wasm_mem_at({st.bits(address)}, {offset}u, {width}u)")
    st.raise_error_if(f"{st.names[at]} == {OUT_OF_RANGE}", KernelError.INDEX_RANGE)
    return (NUMBER, wtype, st.let(BITS_FORM[wtype], expr.format(st.names[at])))
