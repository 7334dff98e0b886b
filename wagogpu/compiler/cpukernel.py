"""The CPU-kernel backend: a GPU-eligible kernel as a Wasm module that loops over an index range
with its buffer reads and writes as plain loads and stores on the accessor memory.

Why a Wasm-to-Wasm rewrite: the kernel and the functions it calls are Wasm already, so copying
their instructions keeps every arithmetic instruction Wasm's own (results bit for bit those of
the guest's runner, NaN payloads included) and the host's engine compiles it like the guest. Only
four things change (rewrite.py does it per instruction):

* `call getBuffer` leaves (slot + 1) * 8 as the handle: the address of the slot's row of the
  kernel table (abi.accessor.KERNEL_TABLE_OFFSET, less 8), where the host writes the bound
  buffer's address and length before the run;
* `call readBuffer<T>` / `writeBuffer<T>` check the index against the row's length (a trap, as
  the accessor's own check traps) and load or store at address + index * size;
* `global.get` of an immutable constant global becomes the constant; the guest's stack-pointer
  global (the one mutable global the GPU compiler accepts) is imported from the guest, so frames of
  -O0 and Debug code live below the guest's own stack pointer, as in its runner;
* each `loop` head spends one unit of a per-invocation fuel global (the GPU's loop budget), so a
  loop past its budget traps here as its invocation raises the error word there.

What the GPU compiler already proved is relied on: handles only come from getBuffer with a
constant declared slot, writes happen at the invocation's own index, and no slot that is written
is read at another element (so any split of the range gives the same bytes). Guest-memory loads
read the guest's memory itself, imported as memory 0; the buffers are then memory 1. What the
rewrite does not carry (an opcode it does not know, a second mutable global) raises
CompileError(UNSUPPORTED) naming it, and the kernel stays with the guest's runner. F16 elements
convert through the accessor's own exported conversions, imported as functions 0 and 1.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..abi.accessor import KERNEL_TABLE_OFFSET
from ..abi.kernel import KernelConfig
from . import reader as lim
from . import wasmencode as enc
from .buffer import select_body
from .contract import CompileError, CompileErrorKind, KernelPlan
from .cpurewrite import F16_IMPORTS, TEMP_TYPES, FunctionRewrite, Rewriter
from .decoder import DecodedModule, decode_module
from .intrinsics import I32

__all__ = ["CpuKernelModule", "IMPORT_MODULE", "GUEST_MEMORY", "BUFFER_MEMORY", "STACK_POINTER", "F16_IMPORTS",
           "RUN_EXPORT",
           "build_cpu_kernel", "cpu_kernel_module"]

IMPORT_MODULE = "wagogpu:cpu"
GUEST_MEMORY = "guest"
BUFFER_MEMORY = "buffers"
STACK_POINTER = "stack_pointer"
RUN_EXPORT = "run"  # run(start, end): the kernel for every index in [start, end)
UNSUPPORTED = CompileErrorKind.UNSUPPORTED
_PLACEHOLDER_TYPE = enc.func_type(b"", b"")  # stands for a GC type no kernel can use


@dataclass(frozen=True)
class CpuKernelModule:
    """A kernel's CPU module and what the host needs to run it."""

    kernel_id: int
    wasm: bytes
    guest_memory: int  # the guest memory index it imports as memory 0; -1: none
    table_offset: int  # where the host writes (address, length) of each slot's buffer
    used_slots: tuple[int, ...]  # slots the body reads or writes
    write_slots: tuple[int, ...]
    can_trap: bool  # a trap may stop it midway: the host keeps the written buffers' bytes to restore
    stack_pointer: int = -1  # the guest global it imports as its stack pointer (STACK_POINTER); -1: none
    f16: bool = False  # it imports the accessor's F16 conversions (F16_IMPORTS): one thread, the guest's store


def _closure(module: DecodedModule, root: int) -> list[int]:
    """Defined functions (module indices) the kernel reaches through calls, the kernel first."""
    n_imports = len(module.func_imports)
    order, seen = [root], {root}
    i = 0
    while i < len(order):
        start, end = module.bodies[order[i] - n_imports]
        for callee in Rewriter.callees(module.source, start, end):
            if callee >= n_imports and callee not in seen:
                if len(order) >= lim.MAX_INLINE_DEPTH * 64:
                    raise CompileError(UNSUPPORTED, "too many functions for a CPU kernel")
                seen.add(callee)
                order.append(callee)
        i += 1
    return order


RUN_LOCALS = 2  # run's parameters: start (the loop's counter) and end


def _run_body(kernel: FunctionRewrite, buffer_memory: int, fuel: int, fuel_global: int) -> bytes:
    """run(start, end): for i in [start, end): fuel = budget; kernel(i). The kernel's body is
    inlined in the loop where it can be (a call per element costs about as much as a short
    kernel): its locals then follow run's, param first, re-zeroed per element as a call would."""
    g, s = enc.local, enc.op
    reset = s("i32.const", enc.sleb(fuel)) + s("global.set", enc.uleb(fuel_global)) if fuel else b""
    groups: list[tuple[int, int]] = []
    if kernel.inlinable:
        first = RUN_LOCALS + 1
        zero = b"".join(enc.const(t, 0) + g("local.set", first + k) for k, t in enumerate(
            t for n, t in kernel.declared for _ in range(n)))
        element = (g("local.get", 0) + g("local.set", RUN_LOCALS) + zero + s("block", b"\x40")
                   + kernel.code_bytes(buffer_memory, fuel_global, RUN_LOCALS))  # its final end closes the block
        groups = [(1, I32), *kernel.declared, *((1, t) for t in TEMP_TYPES)]
    else:
        element = g("local.get", 0) + s("call", enc.uleb(kernel.rewriter.function_base))
    code = (s("block", b"\x40") + s("loop", b"\x40")
            + g("local.get", 0) + g("local.get", 1) + s("i32.ge_u") + s("br_if", enc.uleb(1))
            + reset + element
            + g("local.get", 0) + enc.i32_const(1) + s("i32.add") + g("local.set", 0)
            + s("br", enc.uleb(0)) + s("end") + s("end") + s("end"))
    return enc.body(groups, code)


def build_cpu_kernel(module: DecodedModule, kernel: KernelConfig, plan: KernelPlan,
                     shared_pages: int = 0) -> CpuKernelModule:
    """The CPU module of an ELIGIBLE kernel; raises CompileError(UNSUPPORTED) for what it cannot carry.
    `shared_pages`: the buffer memory is a shared one of at most that many pages (several threads)."""
    start, _end = select_body(module, kernel)
    n_imports = len(module.func_imports)
    root = module.bodies.index((start, _end)) + n_imports
    functions = _closure(module, root)
    index_of = {f: i for i, f in enumerate(functions)}
    rewriter = Rewriter(module, index_of, KERNEL_TABLE_OFFSET)
    rewritten: list[FunctionRewrite] = [rewriter.function(f) for f in functions]
    guest = any(r.memory_access for r in rewritten)
    if guest:
        memories = {m for r in rewritten for m in r.memories}
        if len(memories) != 1:
            raise CompileError(UNSUPPORTED, "a CPU kernel reads at most one guest memory")
        guest_memory = memories.pop()
    else:
        guest_memory = -1
    buffer_memory = 1 if guest else 0
    fuel = lim.LOOP_BUDGET if any(r.loops for r in rewritten) else 0
    rewriter.function_base = len(F16_IMPORTS) if rewriter.f16 else 0
    wasm = _assemble(module, rewriter, rewritten, buffer_memory, guest, fuel, shared_pages)
    return CpuKernelModule(kernel.id, wasm, guest_memory, KERNEL_TABLE_OFFSET, plan.used_slots,
                           tuple(sorted(plan.write_slots)),
                           plan.error_word or bool(fuel) or guest or any(r.stubbed for r in rewritten),
                           rewriter.stack_pointer, rewriter.f16)


def _assemble(module: DecodedModule, rewriter: Rewriter, rewritten: list[FunctionRewrite], buffer_memory: int,
              guest: bool, fuel: int, shared_pages: int) -> bytes:
    types = [enc.func_type(*sig) if sig is not None else _PLACEHOLDER_TYPE for sig in module.types]
    run_type = len(types)
    types.append(enc.func_type(bytes([I32, I32]), b""))
    imports = [enc.memory_import(IMPORT_MODULE, GUEST_MEMORY)] if guest else []
    imports.append(enc.memory_import(IMPORT_MODULE, BUFFER_MEMORY, shared_pages))
    if rewriter.f16:
        half_type = len(types)
        types.append(enc.func_type(bytes([I32]), bytes([I32])))
        imports += [enc.name(IMPORT_MODULE) + enc.name(n) + b"\x00" + enc.uleb(half_type) for n in F16_IMPORTS]
    if rewriter.stack_pointer >= 0:
        imports.append(enc.name(IMPORT_MODULE) + enc.name(STACK_POINTER) + bytes([0x03, I32, 1]))
    type_indices = [r.type_index for r in rewritten] + [run_type]
    base = rewriter.function_base
    fuel_global = 1 if rewriter.stack_pointer >= 0 else 0  # defined after the imported stack pointer
    globals_ = [bytes([I32, 1]) + enc.i32_const(0) + enc.op("end")]  # the fuel, even when unused
    bodies = [r.encode(buffer_memory, fuel_global) for r in rewritten]
    bodies.append(_run_body(rewritten[0], buffer_memory, fuel, fuel_global))
    export = enc.name(RUN_EXPORT) + b"\x00" + enc.uleb(base + len(rewritten))
    return (enc.HEADER + enc.section(enc.Section.TYPE, enc.vector(types))
            + enc.section(enc.Section.IMPORT, enc.vector(imports))
            + enc.section(enc.Section.FUNCTION, enc.vector(enc.uleb(t) for t in type_indices))
            + enc.section(enc.Section.GLOBAL, enc.vector(globals_))
            + enc.section(enc.Section.EXPORT, enc.vector([export]))
            + enc.section(enc.Section.CODE, enc.vector(bodies)))


def cpu_kernel_module(source: bytes, kernel: KernelConfig, plan: KernelPlan, shared_pages: int = 0) -> CpuKernelModule:
    """build_cpu_kernel over the module's bytes (the host's entry point: it keeps the plan, not the
    decoding)."""
    data = source if isinstance(source, bytes) else memoryview(source).tobytes()
    return build_cpu_kernel(decode_module(data), kernel, plan, shared_pages)
