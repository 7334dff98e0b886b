"""global.get and global.set in kernels.

An immutable global whose init expression is a constant is that constant (linkers put table
addresses, sizes and flags there; AssemblyScript compiles `const` to them). The first mutable i32
global a kernel reads is its stack pointer (shadow.py). Any other global stays on the CPU: its
value at dispatch is known only to the guest, and a kernel's writes to it could not be published
in the order the CPU runner makes them.
"""
from __future__ import annotations

from .contract import CompileError
from .intrinsics import F32, F64, I32, I64
from .lowering import INVALID, UNSUPPORTED, Lowering
from .records import CONSTANT, FRAME
from .shadow import move_stack_pointer
from .statics import GlobalDecl

# Types whose constants travel as CONSTANT records.
CONSTANT_TYPES = frozenset((I32, F32, I64, F64))
TYPE_NAMES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128"}


def _global(st: Lowering, op: str) -> tuple[int, GlobalDecl]:
    index = st.r.u32()
    statics = st.module.statics
    if index >= len(statics.globals):
        if not statics.globals_known:
            raise CompileError(UNSUPPORTED, f"{op} {index}: the module's global section was not understood")
        raise CompileError(INVALID, f"{op}: global index {index} out of range")
    return index, statics.globals[index]


def _type_name(wtype: int) -> str:
    return TYPE_NAMES.get(wtype, f"0x{wtype:02x}")


def global_get(st: Lowering) -> None:
    index, decl = _global(st, "global.get")
    if st.top.dead:
        st.stack.append((CONSTANT, decl.type if decl.type in CONSTANT_TYPES else I32, 0))
        return
    if not decl.mutable:
        if decl.imported or decl.value is None:
            raise CompileError(UNSUPPORTED, f"global.get {index}: an immutable global whose value is not a constant "
                                            "of the module")
        if decl.type not in CONSTANT_TYPES:
            raise CompileError(UNSUPPORTED, f"global.get {index}: {_type_name(decl.type)} global")
        if decl.type == F32 or decl.type == F64:
            st.is_float = True
        st.stack.append((CONSTANT, decl.type, decl.value))
        return
    ext = st.ext
    if decl.type == I32 and ext.sp_global in (-1, index):
        ext.sp_global = index
        st.stack.append((FRAME, I32, ext.sp_offset))
        return
    raise CompileError(UNSUPPORTED, f"global.get {index}: a mutable {_type_name(decl.type)} global other than the "
                                    "stack pointer (its value is known only to the CPU)")


def global_set(st: Lowering) -> None:
    index, decl = _global(st, "global.set")
    value = st.pop(decl.type)
    if st.pending is not None or st.top.dead:
        return
    if index != st.ext.sp_global or not decl.mutable:
        raise CompileError(UNSUPPORTED, f"global.set {index}: a global other than the stack pointer (the kernel's "
                                        "writes could not be published)")
    move_stack_pointer(st, value)
