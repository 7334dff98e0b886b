"""Why a kernel stays on the CPU, in words: its first blocker (the CompileError the lowering
raised) and every instruction of its body and of the functions it calls that is outside the GPU
subset, each with its mnemonic, function index and byte offset.

The first blocker is exact. The list after it is a scan, not a lowering: it names instructions
that never run on the GPU (no row in the opcode table, call_indirect, recursion); a load, store or
global the lowering decides about by its operands is listed only when it is the first blocker.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..abi.kernel import KernelConfig
from . import reader as lim
from .buffer import lower_kernel, select_body, validate_kernel
from .golang import go_blockers, is_go_kernel
from .contract import CompileError
from .decoder import DecodedModule, decode_module
from .names import NameKind, described
from .opcodes import LOWERING
from .optable import Instruction, opcode_name, skip_locals, walk
from .reader import ReaderError

OP_CALL = 0x10
ALWAYS_CPU = frozenset((0x11, 0x12, 0x13))  # call_indirect, return_call, return_call_indirect


class BlockerKind(enum.Enum):
    FIRST = "first blocker"  # what compile_buffer_wgsl raised
    INSTRUCTION = "instruction outside the GPU subset"
    RECURSION = "recursive call"
    UNREADABLE = "body the scan could not read"
    GO_PATH = "Go path that raises the error word"  # a traced Go path the GPU leaves to the CPU runner


@dataclass(frozen=True, slots=True)
class Blocker:
    kind: BlockerKind
    opcode: str  # the instruction's mnemonic ("" where there is none)
    function: int  # absolute function index (-1: not known)
    offset: int  # byte offset in the module (-1: not known)
    reason: str

    def line(self) -> str:
        where = (f"function {self.function} at 0x{self.offset:x}" if self.offset >= 0
                 else "the kernel or a function it calls")
        name = f" {self.opcode}" if self.opcode else ""
        return f"{self.kind.value}:{name} in {where}: {self.reason}"


def explain_kernel(source: bytes, kernel: KernelConfig) -> list[Blocker]:
    """Every blocker of `kernel` in `source`; empty when it runs on the GPU. Raises CompileError only
    when the module or the contract is invalid (nothing to explain then)."""
    data = source if isinstance(source, bytes) else memoryview(source).tobytes()
    validate_kernel(kernel)
    module = decode_module(data)
    try:
        lower_kernel(module, kernel)
        return []
    except CompileError as e:
        first = Blocker(BlockerKind.FIRST, _failing_opcode(e), -1, -1, in_words(e))
    start, _end = select_body(module, kernel)
    if is_go_kernel(module, start, _end):  # the trace's reasons, in Go's terms (golang.py)
        return [first, *(Blocker(BlockerKind.GO_PATH, "", -1, -1, why) for why in go_blockers(module, start, _end))]
    kernel_function = len(module.func_imports) + module.bodies.index((start, _end))
    return [first, *_scan(module, kernel_function)]


def in_words(err: CompileError) -> str:
    """The message with the mnemonic of the opcode it names in hex ('unsupported opcode 0x23
    (global.get)'); other messages already say what they refuse in words."""
    name = _failing_opcode(err)
    return f"{err.message} ({name})" if name and not name.startswith("0x") else err.message


def _failing_opcode(err: CompileError) -> str:
    """The mnemonic an 'unsupported opcode 0x..' message names."""
    words = err.message.split()
    if len(words) >= 3 and words[:2] == ["unsupported", "opcode"]:
        try:
            code = bytes(int(w, 16) for w in words[2:4] if w.startswith("0x"))
        except ValueError:
            return ""
        return opcode_name(code + b"\x00", 0)
    return ""


def _scan(module: DecodedModule, root: int) -> list[Blocker]:
    """Instructions outside the subset in `root` and every function it calls (each once)."""
    found: list[Blocker] = []
    done: set[int] = set()
    path: list[int] = []

    def visit(function: int) -> None:
        defined = function - len(module.func_imports)
        if function in path:
            found.append(Blocker(BlockerKind.RECURSION, "call", path[-1], -1, f"{described(module, NameKind.FUNCTION, function)} "
                                                                             "calls itself through this chain"))
            return
        if function in done or not 0 <= defined < len(module.bodies) or len(path) > lim.MAX_INLINE_DEPTH:
            return
        done.add(function)
        path.append(function)
        for ins in _instructions(module, function, defined, found):
            if ins.opcode == OP_CALL:
                visit(ins.index)
            elif ins.opcode in ALWAYS_CPU or (ins.opcode not in LOWERING):
                found.append(Blocker(BlockerKind.INSTRUCTION, ins.name, function, ins.at, "never runs on the GPU"))
        path.pop()

    visit(root)
    return found


def _instructions(module: DecodedModule, function: int, defined: int, found: list[Blocker]) -> list[Instruction]:
    start, end = module.bodies[defined]
    try:
        return list(walk(module.source, skip_locals(module.source, start, end), end))
    except (ReaderError, CompileError):
        found.append(Blocker(BlockerKind.UNREADABLE, "", function, start, "truncated or malformed"))
        return []
