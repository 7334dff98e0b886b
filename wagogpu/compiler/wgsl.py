"""WGSL text of buffer kernels (docs/design/compiler.md §2.1) and the dispatch grid the host must use with it.

Every identifier here is fixed or compiler-numbered (Params, params, slot0..slot7, main, id,
index, v<N>, half_to_f32, f32_to_half); nothing the guest chose ever reaches the text.

Deviation from the reference, on purpose: the element index is computed from a 2-D grid so that
more than 65,535 workgroups can be dispatched (see workgroup_grid). This makes every buffer shader
INDEX_LINE_GROWTH (15) bytes longer than the reference's sizes; lower_kernel(..., grid_2d=False) gives
the reference's exact text.
"""
from __future__ import annotations

from ..abi.kernel import (MAX_GRID_COUNT, MAX_GROUPS_PER_DIMENSION, ROW_INVOCATIONS, WORKGROUP_SIZE,
                          parameter_block, workgroup_grid)
from ..abi.table import SLOT_COUNT, TYPE_INFO, ElementType

__all__ = ["MAX_GRID_COUNT", "MAX_GROUPS_PER_DIMENSION", "ROW_INVOCATIONS", "WORKGROUP_SIZE", "parameter_block",
           "workgroup_grid", "assemble"]


PARAMS_DECL = (
    "struct Params { count: u32, pad0: u32, pad1: u32, pad2: u32 }\n"
    "@group(0) @binding(0) var<uniform> params: Params;\n"
)
ENTRY = "@compute @workgroup_size(256)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
INDEX_LINE_1D = "  let index = id.x;\n"
# No spaces around + and *: " + ", " - " and " * " then occur only in arithmetic statements, so
# counting them counts arithmetic nodes, as the reference's tests do.
INDEX_LINE_2D = f"  let index = id.x+id.y*{ROW_INVOCATIONS}u;\n"
INDEX_LINE_GROWTH = len(INDEX_LINE_2D) - len(INDEX_LINE_1D)
GUARD = "  if (index >= params.count) { return; }\n"
END = "}\n"

# Integer-only binary16 <-> f32 bit conversions (docs/design/abi.md §5.3); no float literal, so NaN/Inf never
# appear as WGSL constants. Inserted when any declared binding is F16.
F16_HELPER = """
fn half_to_f32(h: u32) -> u32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 31u;
  let m = h & 0x3ffu;
  if (e == 31u) {
    if (m != 0u) { return 0x7fc00000u; }
    return s | 0x7f800000u;
  }
  if (e == 0u) {
    if (m == 0u) { return s; }
    let k = 10u - firstLeadingBit(m);
    return s | ((113u - k) << 23u) | (((m << k) & 0x3ffu) << 13u);
  }
  return s | ((e + 112u) << 23u) | (m << 13u);
}
fn f32_to_half(x: u32) -> u32 {
  let s = (x >> 16u) & 0x8000u;
  let e = (x >> 23u) & 255u;
  let m = x & 0x7fffffu;
  if (e == 255u) {
    if (m != 0u) { return 0x7e00u; }
    return s | 0x7c00u;
  }
  if (e > 142u) { return s | 0x7c00u; }
  if (e < 102u) { return s; }
  if (e < 113u) {
    let f = m | 0x800000u;
    let k = 126u - e;
    let r = f & ((1u << k) - 1u);
    let mid = 1u << (k - 1u);
    var v = f >> k;
    if (r > mid || (r == mid && (v & 1u) == 1u)) { v = v + 1u; }
    return s | v;
  }
  var v = ((e - 112u) << 10u) | (m >> 13u);
  let r = m & 0x1fffu;
  if (r > 0x1000u || (r == 0x1000u && (v & 1u) == 1u)) { v = v + 1u; }
  return s | v;
}
"""

# Load of one element as its bit pattern ({} is the slot number: a u32 for the 8- to 32-bit types,
# the vec2<u32> word pair for the 64-bit ones), and the wrapping of a bit pattern stored as one
# element ({} is the value), per declared type: the ABI table's wgsl_load / wgsl_store columns.
LOAD_EXPR: dict[ElementType, str] = {t: info.wgsl_load for t, info in TYPE_INFO.items()}
STORE_WRAP: dict[ElementType, str] = {t: info.wgsl_store for t, info in TYPE_INFO.items()}


def binding_line(binding: int, slot: int, written: bool, wide: bool = False) -> str:
    """A slot's storage binding: one u32 per element, or (wide: a 64-bit type) one vec2<u32>."""
    access = "read_write" if written else "read"
    element = "vec2<u32>" if wide else "u32"
    return f"@group(0) @binding({binding}) var<storage, {access}> slot{slot}: array<{element}>;\n"


def error_word_line(binding: int) -> str:
    """The error word (KernelPlan.error_word): bound right after the slots, zeroed per dispatch."""
    return f"@group(0) @binding({binding}) var<storage, read_write> err: array<atomic<u32>, 4>;\n"


def assemble(reads: int, writes: int, f16_helper: bool, body: str, grid_2d: bool = True,
             error_word: bool = False, helpers: str = "", wide: int = 0, memory_binding: str = "") -> str:
    """The whole shader: params, one binding per used slot (ascending; `wide` the mask of 64-bit
    slots), the error word when the body uses it, the guest-memory snapshot when it loads memory,
    helpers, guarded main."""
    parts = [PARAMS_DECL]
    used = reads | writes
    binding = 1
    for slot in range(SLOT_COUNT):
        if used >> slot & 1:
            parts.append(binding_line(binding, slot, bool(writes >> slot & 1), bool(wide >> slot & 1)))
            binding += 1
    if error_word:
        parts.append(error_word_line(binding))
    parts.append(memory_binding)
    if f16_helper:
        parts.append(F16_HELPER)
    if helpers:
        parts.append(helpers)
    parts.append(ENTRY)
    parts.append(INDEX_LINE_2D if grid_2d else INDEX_LINE_1D)
    parts.append(GUARD)
    parts.append(body)
    parts.append(END)
    return "".join(parts)
