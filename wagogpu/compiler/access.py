"""call: the buffer intrinsics inside a kernel (docs/design/compiler.md §1.3.3, §1.3.5; docs/design/abi.md §6.4); a call to a
function the module defines is inlined (inline.py).

A call is classified by its import record (decoder.FuncImport), then handled by the intrinsic's
kind. Reads at the original index are the reference's; a read at any other element is a gather:
it checks `e < arrayLength(&slot)` first and raises KernelError.INDEX_RANGE in the error word
otherwise (the bound buffer is exactly the guest buffer, so out of range there is out of range for
the CPU runner too, which then traps). Reading a slot the kernel also writes at another element
would race with the invocation that writes it, so a gather from a written slot is refused at the
end (Lowering.finish). Writes always need the original index.
"""
from __future__ import annotations

from typing import Callable

from ..abi.kernel import KernelError
from ..abi.table import SLOT_COUNT, ElementType
from .contract import CompileError
from .globalvars import TYPE_NAMES
from .inline import call_defined
from .intrinsics import I32, Intrinsic, IntrinsicKind
from .lowering import UNSUPPORTED, Lowering
from .records import BITS_FORM, CONSTANT, HANDLE, INDEX, NUMBER
from .wgsl import LOAD_EXPR, STORE_WRAP

NOT_ON_GPU = "intrinsic type unsupported on GPU"


def call(st: Lowering) -> None:
    f = st.r.u32()
    imports = st.module.func_imports
    if f >= len(imports):
        call_defined(st, f)  # inlined
        return
    imp = imports[f]
    if not imp.in_namespace:
        raise CompileError(UNSUPPORTED, "call is not a buffer intrinsic")
    intrinsic = imp.intrinsic
    if intrinsic is None:
        raise CompileError(UNSUPPORTED, "unknown intrinsic")
    if imp.bad_signature:
        raise st.contract_error(f"intrinsic signature mismatch: {intrinsic.spec.name} is declared "
                                f"{_declared(st, imp.type_index)}, the ABI's is "
                                f"({', '.join(intrinsic.spec.params)}) -> ({', '.join(intrinsic.spec.results)})")
    INTRINSIC_HANDLERS[intrinsic.kind](st, intrinsic)


def _declared(st: Lowering, type_index: int) -> str:
    """An import's declared type in words, `(i32) -> (f32)`, for a signature mismatch."""
    types = st.module.types
    signature = types[type_index] if type_index < len(types) else None
    if signature is None:
        return f"with type {type_index}, not a function type of the module"
    params, results = (", ".join(TYPE_NAMES.get(b, f"0x{b:02x}") for b in part) for part in signature)
    return f"({params}) -> ({results})"


def get_buffer(st: Lowering, _: Intrinsic) -> None:
    slot = st.pop(I32)
    if st.top.dead:
        st.stack.append((CONSTANT, I32, 0))
        return
    if slot[0] != CONSTANT:
        raise CompileError(UNSUPPORTED, "slot must be constant")
    if slot[2] >= SLOT_COUNT or slot[2] not in st.slot_type:
        declared = ", ".join(str(s) for s in sorted(st.slot_type))
        raise st.contract_error(f"undeclared slot: getBuffer({slot[2]}), the kernel declares slots {declared}")
    st.stack.append((HANDLE, I32, slot[2]))


def management(st: Lowering, _: Intrinsic) -> None:
    raise CompileError(UNSUPPORTED, "management call in kernel")


def _typed(st: Lowering, intrinsic: Intrinsic) -> ElementType:
    """A read or write intrinsic's element type; a 64-bit one is beyond the reference, which
    refuses it (docs/design/compiler.md §1.3.5), so contract errors from here on fall back as its refusal."""
    if intrinsic.elem is None:
        raise CompileError(UNSUPPORTED, NOT_ON_GPU)
    if not intrinsic.gpu:
        st.beyond_reference = True
    return intrinsic.elem


def read(st: Lowering, intrinsic: Intrinsic) -> None:
    elem = _typed(st, intrinsic)
    element = st.pop(I32)
    handle = st.pop(I32)
    if st.top.dead:
        st.stack.append((CONSTANT, intrinsic.scalar, 0))
        return
    if handle[0] != HANDLE:
        raise CompileError(UNSUPPORTED, "handle is not a selected buffer slot")
    if st.pending is not None:
        raise st.pending
    slot = handle[2]
    st.check_slot(slot, intrinsic, st.can_read)
    bit = 1 << slot
    expr = LOAD_EXPR[elem].format(slot)
    if element[0] == INDEX:
        if not st.mw & bit:
            st.rbw |= bit
    else:
        if element[0] == CONSTANT:  # naga rejects a constant index it can prove out of range
            element = st.launder(element)
        at = st.bits(element)
        st.raise_error_if(f"{at} >= arrayLength(&slot{slot})", KernelError.INDEX_RANGE)
        expr = expr.replace("[index]", f"[{at}]")
        st.gathers |= bit
    st.reads |= bit
    st.stack.append((NUMBER, intrinsic.scalar, st.let(BITS_FORM[intrinsic.scalar], expr)))


def write(st: Lowering, intrinsic: Intrinsic) -> None:
    elem = _typed(st, intrinsic)
    data = st.pop(intrinsic.scalar)
    if st.top.dead:
        st.pop(I32)
        st.pop(I32)
        return
    if data[0] == HANDLE:
        raise st.contract_error("buffer handle cannot be stored as data")
    slot = st.access_operands()
    st.check_slot(slot, intrinsic, st.can_write)
    st.emit(f"  slot{slot}[index] = {STORE_WRAP[elem].format(st.bits(data))};\n")
    bit = 1 << slot
    st.mw |= bit
    st.writes |= bit


INTRINSIC_HANDLERS: dict[IntrinsicKind, Callable[[Lowering, Intrinsic], None]] = {
    IntrinsicKind.GET: get_buffer,
    IntrinsicKind.READ: read,
    IntrinsicKind.WRITE: write,
    IntrinsicKind.MANAGEMENT: management,
}
