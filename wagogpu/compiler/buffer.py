"""compile_buffer_wgsl: validate config -> decode -> select exports -> lower -> assemble (docs/design/compiler.md §1.3)."""
from __future__ import annotations

from dataclasses import dataclass

from ..abi.table import SLOT_COUNT
from ..abi.kernel import CPU_PREFIX, KERNEL_PREFIX, MAX_EXPORT_NAME_BYTES, KernelConfig, kernel_contract_problem
from . import memload, reader as lim
from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule, decode_module
from .intrinsics import I32
from .bindings import binding_facts
from .golang import specialize
from .lower import lower_body
from .ops import helper_text
from .wgsl import assemble

INVALID = CompileErrorKind.INVALID_CONTRACT
BAD_NAMES = "invalid kernel ID or export names"
BAD_LIMITS = "invalid kernel binding or name limit"
BAD_BINDING = "invalid slot, type, or access"
KERNEL_SIGNATURE = (bytes([I32]), b"")  # (i32) -> ()


@dataclass(frozen=True, slots=True)
class LoweredKernel:
    """A kernel's WGSL plus the facts the runtime needs (docs/design/compiler.md §1.3.7)."""

    wgsl: str
    reads: int  # bit masks over slots
    writes: int
    read_before_write: int
    is_float: bool  # needs relaxed_float consent (a strict_float kernel: only for its native f64)
    error_word: bool = False  # the shader declares the error word binding after the slots
    loop_budget: int = 0  # loop iterations per invocation the shader allows (0: no loop)
    memory: int = -1  # the guest memory its loads read (memload.py); -1: none
    memory_low: int = 0
    f64: bool = False  # the shader uses WGSL f64: only an adapter with shader-f64 runs it


_VALID: dict[int, KernelConfig] = {}  # id -> kernel configs that passed (frozen, so they stay valid)


def validate_kernel(kernel: KernelConfig) -> None:
    """Config checks of docs/design/compiler.md §1.3.1, reusing config.kernel_contract_problem for the rules.

    That function reports (field, message) in the spec's order; here each field maps to the spec's
    message for its step. An export field fails step 1 when its prefix/suffix rule is broken and
    step 2 (name length) otherwise.
    """
    if _VALID.get(id(kernel)) is kernel:
        return
    try:
        kernel.export.encode()
        kernel.cpu_export.encode()
    except (UnicodeError, AttributeError):
        raise CompileError(INVALID, BAD_NAMES) from None
    problem = kernel_contract_problem(kernel, SLOT_COUNT)
    if problem is None:
        if len(_VALID) >= 256:
            _VALID.clear()
        _VALID[id(kernel)] = kernel
        return
    field = problem[0]
    if field.startswith("bindings["):
        message = BAD_BINDING
    elif field == "bindings":
        message = BAD_LIMITS
    elif field == "export":
        names_ok = kernel.export.startswith(KERNEL_PREFIX) and len(kernel.export) > len(KERNEL_PREFIX)
        message = BAD_LIMITS if names_ok and len(kernel.export.encode()) > MAX_EXPORT_NAME_BYTES else BAD_NAMES
    elif field == "cpu_export":
        names_ok = kernel.cpu_export == CPU_PREFIX + kernel.suffix
        message = BAD_LIMITS if names_ok and len(kernel.cpu_export.encode()) > MAX_EXPORT_NAME_BYTES else BAD_NAMES
    else:
        message = BAD_NAMES
    raise CompileError(INVALID, message)


def select_body(module: DecodedModule, kernel: KernelConfig) -> tuple[int, int]:
    """Both exports must be defined (i32) -> () functions; returns the kernel body's byte range."""
    n_imports = len(module.func_imports)
    selected = -1
    for name in (kernel.export, kernel.cpu_export):
        index = module.exports.get(name.encode())
        if index is None or index < n_imports or module.function_type(index) != KERNEL_SIGNATURE:
            raise CompileError(INVALID, f"{name} must be a defined (i32) -> () export")
        if selected < 0:
            selected = index - n_imports
    return module.bodies[selected]


def lower_kernel(module: DecodedModule, kernel: KernelConfig, grid_2d: bool = True) -> LoweredKernel:
    """Lower a validated kernel config against a decoded module; raises CompileError."""
    start, end = select_body(module, kernel)
    module, start, end = specialize(module, start, end)  # a Go kernel: its trace (golang.py)
    facts = binding_facts(kernel.bindings)
    body = lower_body(module, start, end, facts, kernel.strict_float)
    if body.memory >= 0:  # loads always can raise the error word: the snapshot binds after it
        binding = bin(body.reads | body.writes).count("1") + 2
        text = assemble(body.reads, body.writes, facts.f16, body.code, grid_2d, True,
                        helper_text(body.helpers) + memload.helper_text(body.extra_helpers), facts.wide,
                        memload.binding_line(binding))
    elif body.error_word or body.helpers or facts.wide:
        text = assemble(body.reads, body.writes, facts.f16, body.code, grid_2d, body.error_word,
                        helper_text(body.helpers), facts.wide)
    else:  # every kernel of the reference subset
        text = assemble(body.reads, body.writes, facts.f16, body.code, grid_2d)
    if len(text) > lim.MAX_WGSL_BYTES:
        raise CompileError(CompileErrorKind.LIMIT, "WGSL byte limit")
    # A strict kernel's floats are Wasm's, except what has no exact form (rows that stay rounding).
    is_float = body.rounding if kernel.strict_float else body.is_float
    return LoweredKernel(text, body.reads, body.writes, body.read_before_write & body.writes, is_float,
                         body.error_word or body.memory >= 0, body.loop_budget, body.memory, body.memory_low, body.f64)


def compile_buffer_wgsl(source: bytes, kernel: KernelConfig) -> str:
    """WGSL for the buffer kernel `kernel` of module `source`; raises CompileError, nothing else."""
    validate_kernel(kernel)
    data = source if isinstance(source, bytes) else memoryview(source).tobytes()
    return lower_kernel(decode_module(data), kernel).wgsl
