"""A guest module around one spliced spec function: its kernel, its CPU runner, and transfers.

The kernel `wago_gpu.kernel.<signature>(index)` loads each parameter from its input buffer at the
index (slot k for parameter k), runs the spliced body inside a block of the function's result
types, and stores each result into its output buffer (the slots after the parameters). The CPU
runner `wago_gpu.cpu.<signature>(count)` calls the kernel for every index, so the CPU path is the
function's own code as wasmtime runs it, reaching the buffers through the scalar imports.
`put`/`get` move words between guest memory and a buffer (setBuffer32/copyBuffer32 find guest
memory through their calling instance, so Python calls them through these wrappers); the
management imports are exported again unchanged. Import signatures come from spec/abi_v1.json.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .binary import DecodedModule, FuncType, Section, ValType, func_type, name, section, uleb, vector
from .splice import BLOCK_EMPTY, OP_END, OP_I32_CONST, OP_LOCAL_GET, OP_LOCAL_SET, Spliced

ABI_TABLE = Path(__file__).resolve().parent.parent / "abi_v1.json"
VALTYPE_BY_NAME = {"i32": ValType.I32, "i64": ValType.I64, "f32": ValType.F32, "f64": ValType.F64}
TYPE_LETTER = {ValType.I32: "i", ValType.F32: "f"}
ELEMENT_NAME = {ValType.I32: "I32", ValType.F32: "F32"}
OP_CALL, OP_BR_IF, OP_LOOP, OP_BLOCK = 0x10, 0x0D, 0x03, 0x02
OP_I32_ADD, OP_I32_GE_U = 0x6A, 0x4F
PAGE_BYTES = 65536
SLOT_LIMIT = 8  # wago_gpu_v1 slots per kernel

# Imports the guest needs, in function-index order; each is exported again when re-exported is set.
GUEST_IMPORTS: tuple[tuple[str, bool], ...] = (
    ("getBuffer", False), ("readBufferI32", False), ("readBufferF32", False), ("writeBufferI32", False),
    ("writeBufferF32", False), ("createBuffer", True), ("bindBuffer", True), ("dispatch", True),
    ("freeBuffer", True), ("setBuffer32", False), ("copyBuffer32", False))
IMPORT_INDEX = {n: i for i, (n, _) in enumerate(GUEST_IMPORTS)}
KERNEL_FUNC = len(GUEST_IMPORTS)
RUNNER_FUNC, PUT_FUNC, GET_FUNC = KERNEL_FUNC + 1, KERNEL_FUNC + 2, KERNEL_FUNC + 3


def _abi_signatures() -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    table = json.loads(ABI_TABLE.read_text(encoding="utf-8"))
    return {imp["name"]: (tuple(VALTYPE_BY_NAME[t] for t in imp["params"]),
                          tuple(VALTYPE_BY_NAME[t] for t in imp["results"]))
            for imp in table["imports"] if "anyref" not in imp["params"]}


ABI_SIGNATURES = _abi_signatures()
ABI_MODULE = "wago_gpu_v1"


def signature_name(ftype: FuncType) -> str:
    """A kernel name for the function type, e.g. `ff_f` for (f32, f32) -> f32."""
    return "s" + "".join(TYPE_LETTER[ValType(t)] for t in ftype.params) + "_" + \
        "".join(TYPE_LETTER[ValType(t)] for t in ftype.results)


def runnable_type(ftype: FuncType) -> bool:
    """Parameters and results only i32/f32, and few enough to give each its own slot."""
    types = ftype.params + ftype.results
    return all(t in TYPE_LETTER for t in types) and len(types) <= SLOT_LIMIT


class _Types:
    """The guest's type section: the spec module's own types first, then the guest's, interned."""

    def __init__(self, original: list[FuncType]):
        self.entries = [t.raw for t in original]
        self.index: dict[bytes, int] = {}

    def of(self, params: tuple[int, ...], results: tuple[int, ...]) -> int:
        raw = func_type(params, results)
        if raw not in self.index:
            self.index[raw] = len(self.entries)
            self.entries.append(raw)
        return self.index[raw]


def _call(func: int) -> bytes:
    return bytes([OP_CALL]) + uleb(func)


def _local(op: int, index: int) -> bytes:
    return bytes([op]) + uleb(index)


def _kernel_code(ftype: FuncType, original_locals: tuple[tuple[int, int], ...], spliced: Spliced,
                 types: _Types) -> bytes:
    """Locals and instructions of the kernel (index) -> (): load params, run the body, store results."""
    params, results = ftype.params, ftype.results
    declared = sum(n for n, _ in original_locals)
    first_result = 1 + len(params) + declared
    groups = [(1, t) for t in params] + list(original_locals) + [(1, t) for t in results]
    code = bytearray(vector([uleb(n) + bytes([t]) for n, t in groups]))
    for k, t in enumerate(params):
        code += bytes([OP_I32_CONST]) + uleb(k) + _call(IMPORT_INDEX["getBuffer"]) + _local(OP_LOCAL_GET, 0)
        code += _call(IMPORT_INDEX["readBuffer" + ELEMENT_NAME[ValType(t)]]) + _local(OP_LOCAL_SET, 1 + k)
    if not results:
        block_type = bytes([BLOCK_EMPTY])
    elif len(results) == 1:
        block_type = bytes(results)
    else:
        block_type = uleb(types.of((), results))
    code += bytes([OP_BLOCK]) + block_type + spliced.code
    for j in reversed(range(len(results))):
        code += _local(OP_LOCAL_SET, first_result + j)
    for j, t in enumerate(results):
        code += bytes([OP_I32_CONST]) + uleb(len(params) + j) + _call(IMPORT_INDEX["getBuffer"])
        code += _local(OP_LOCAL_GET, 0) + _local(OP_LOCAL_GET, first_result + j)
        code += _call(IMPORT_INDEX["writeBuffer" + ELEMENT_NAME[ValType(t)]])
    return bytes(code) + bytes([OP_END])


def _runner_code() -> bytes:
    """(count) -> (): for j in [0, count): kernel(j)."""
    j = 1
    body = bytes([OP_BLOCK, BLOCK_EMPTY, OP_LOOP, BLOCK_EMPTY]) + _local(OP_LOCAL_GET, j) + _local(OP_LOCAL_GET, 0)
    body += bytes([OP_I32_GE_U, OP_BR_IF, 1]) + _local(OP_LOCAL_GET, j) + _call(KERNEL_FUNC)
    body += _local(OP_LOCAL_GET, j) + bytes([OP_I32_CONST, 1, OP_I32_ADD]) + _local(OP_LOCAL_SET, j)
    body += bytes([0x0C, 0, OP_END, OP_END, OP_END])
    return vector([uleb(1) + bytes([ValType.I32])]) + body


def _transfer_code(import_name: str) -> bytes:
    """(handle, offset, guest byte offset, count) -> status through memory 0."""
    args = _local(OP_LOCAL_GET, 0) + _local(OP_LOCAL_GET, 1) + bytes([OP_I32_CONST, 0])
    args += _local(OP_LOCAL_GET, 2) + _local(OP_LOCAL_GET, 3)
    return vector([]) + args + _call(IMPORT_INDEX[import_name]) + bytes([OP_END])


@dataclass(frozen=True, slots=True)
class GuestModule:
    wasm: bytes
    signature: str  # the kernel's name suffix
    slots: int  # parameters + results


def build_guest(module: DecodedModule, func_index: int, spliced: Spliced, elements: int) -> GuestModule:
    """The guest for defined function `func_index` of `module`, with memory for `elements` words."""
    defined = func_index - module.imported_funcs
    ftype = module.types[module.func_types[defined]]
    sig = signature_name(ftype)
    types = _Types(module.types)
    imports = [name(ABI_MODULE) + name(n) + bytes([0]) + uleb(types.of(*ABI_SIGNATURES[n]))
               for n, _ in GUEST_IMPORTS]
    i32 = ValType.I32
    own = [types.of((i32,), ()), types.of((i32,), ()), types.of((i32,) * 4, (i32,)), types.of((i32,) * 4, (i32,))]
    codes = [_kernel_code(ftype, module.bodies[defined].locals, spliced, types), _runner_code(),
             _transfer_code("setBuffer32"), _transfer_code("copyBuffer32")]
    pages = max(1, -(-4 * elements // PAGE_BYTES))
    exports = [name(f"wago_gpu.kernel.{sig}") + bytes([0]) + uleb(KERNEL_FUNC),
               name(f"wago_gpu.cpu.{sig}") + bytes([0]) + uleb(RUNNER_FUNC),
               name("put") + bytes([0]) + uleb(PUT_FUNC), name("get") + bytes([0]) + uleb(GET_FUNC),
               name("memory") + bytes([2, 0])]
    exports += [name(n) + bytes([0]) + uleb(i) for i, (n, again) in enumerate(GUEST_IMPORTS) if again]
    wasm = b"\x00asm\x01\x00\x00\x00" + b"".join([
        section(Section.TYPE, vector(types.entries)),
        section(Section.IMPORT, vector(imports)),
        section(Section.FUNCTION, vector([uleb(t) for t in own])),
        section(Section.MEMORY, vector([bytes([0]) + uleb(pages)])),
        section(Section.EXPORT, vector(exports)),
        section(Section.CODE, vector([uleb(len(c)) + c for c in codes])),
    ])
    return GuestModule(wasm, sig, len(ftype.params) + len(ftype.results))
