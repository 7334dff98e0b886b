"""`wagogpu compile`: a kernel's WGSL on stdout and, on stderr, the dispatch rules the compiler can
see for that kernel (the count rule, bindings it never touches or whose declared access differs
from what its body does, float consent) or, when it cannot compile, the first blocker in words."""
from __future__ import annotations

import argparse
import difflib
import sys
from typing import TYPE_CHECKING

from .common import UsageError, load_module, one_line

if TYPE_CHECKING:  # pragma: no cover
    from ..compiler.contract import KernelPlan
    from ..config import KernelConfig

#: What a kernel that cannot compile means for the guest, by CompileErrorKind name.
BLOCKER_MEANING = {
    "INVALID_CONTRACT": "every dispatch of kernel {id} answers INVALID_KERNEL (10): fix the kernel or its bindings",
    "UNSUPPORTED": "the kernel runs on the CPU only: every valid dispatch answers 1 (reason UNSUPPORTED_KERNEL) "
                   "and the guest runs {cpu}",
    "LIMIT": "the kernel runs on the CPU only: every valid dispatch answers 1 (reason UNSUPPORTED_KERNEL) "
             "and the guest runs {cpu}",
}


def binding_notes(kernel: KernelConfig, plan: KernelPlan) -> list[str]:
    """What the body does with each declared slot, where that is worth a word."""
    from ..abi.table import Access, ElementType

    notes = []
    for b in kernel.bindings:
        label = f"slot {b.slot} ({ElementType(b.type).name}, {Access(b.access).name.lower()})"
        reads, writes = b.slot in plan.read_slots, b.slot in plan.write_slots
        if not reads and not writes:
            notes.append(f"{label} is never touched by the kernel; dispatch still needs a buffer bound there "
                         "that holds at least count elements")
        elif b.access != Access.READ and not writes:
            notes.append(f"{label} is never written by the kernel: its buffer keeps its contents "
                         f"(declare it read)")
        elif b.access == Access.READ_WRITE and not reads:
            notes.append(f"{label} is written but never read by the kernel (declare it write)")
    return notes


def rule_notes(kernel: KernelConfig, plan: KernelPlan) -> list[str]:
    slots = ", ".join(str(b.slot) for b in kernel.bindings)
    notes = [f"dispatch({kernel.id}, count) runs indices 0..count-1: the buffers bound to slots {slots} must each "
             "hold at least count elements (INVALID_RANGE otherwise), be distinct handles (INVALID_BINDING) "
             "and have the declared types (TYPE_MISMATCH)"]
    if plan.is_float and not kernel.relaxed_float:
        notes.append("the kernel does float arithmetic: it runs on the GPU only with relaxed_float "
                     "(--relaxed-float); without it every dispatch answers 1 (reason FLOAT_MODE)")
    return notes


def access_violations(wasm: bytes, kernel: KernelConfig) -> list[str]:
    """Which declared accesses the body breaks: the kernel lowered again with every slot read-write
    says what it reads and writes (the compiler's own message does not name the slot)."""
    from dataclasses import replace

    from ..abi.table import Access
    from ..compiler import inspect_module

    permissive = replace(kernel, bindings=tuple(replace(b, access=Access.READ_WRITE) for b in kernel.bindings))
    plan = inspect_module(wasm, [permissive]).kernels.get(kernel.id)
    if plan is None or plan.wgsl is None:
        return []
    found = []
    for b in kernel.bindings:
        if b.access == Access.READ and b.slot in plan.write_slots:
            found.append(f"slot {b.slot} is declared read but the kernel writes it (declare it write or rw)")
        if b.access == Access.WRITE and b.slot in plan.read_slots:
            found.append(f"slot {b.slot} is declared write but the kernel reads it (declare it rw)")
    return found


def report_kernel(wasm: bytes, kernel: KernelConfig) -> None:
    """The notes for one compiled kernel, on stderr."""
    from ..compiler import inspect_module

    plan = inspect_module(wasm, [kernel]).kernels.get(kernel.id)
    if plan is None or plan.wgsl is None:
        return
    for note in binding_notes(kernel, plan) + rule_notes(kernel, plan):
        print(f"note: {note}", file=sys.stderr)


def explain(wasm: bytes, kernel: KernelConfig) -> None:
    """--explain: the first blocker, then every never-GPU instruction of the kernel and its callees."""
    from ..compiler import CompileError, explain_kernel

    try:
        for blocker in explain_kernel(wasm, kernel):
            print(f"  {blocker.line()}", file=sys.stderr)
    except CompileError:
        pass  # the contract itself is invalid: the line above says why


def kernels_found(wasm: bytes, asked: str) -> str | None:
    """For a --kernel the module does not export: the kernels it does export (the closest first,
    by difflib), or that it exports none. None when the asked kernel's export exists."""
    from ..compiler import CompileError
    from ..compiler.decoder import decode_module
    from ..config import KERNEL_PREFIX

    try:
        exports = decode_module(wasm).exports
    except CompileError:
        return None
    if (KERNEL_PREFIX + asked.removeprefix(KERNEL_PREFIX)).encode() in exports:
        return None
    names = sorted(name.decode(errors="replace").removeprefix(KERNEL_PREFIX) for name in exports
                   if name.startswith(KERNEL_PREFIX.encode()))
    if not names:
        return f"the module exports no kernel (no export named {KERNEL_PREFIX}NAME)"
    close = difflib.get_close_matches(asked.removeprefix(KERNEL_PREFIX), names, n=1)
    hint = f"did you mean --kernel {close[0]}? " if close else ""
    return f"{hint}the module exports the kernels: {', '.join(names)}"


def cmd_compile(args: argparse.Namespace) -> int:
    from .. import CompileError, compile_buffer_wgsl, compile_wgsl
    from ..config import KernelConfig, kernel_exports

    if args.legacy and (args.kernel or args.binding):
        raise UsageError("--legacy takes no --kernel or --binding")
    if not args.legacy and not args.kernel:
        raise UsageError("give --kernel NAME with --binding SLOT:TYPE:ACCESS ..., or --legacy EXPORT")
    if args.kernel and not args.binding:
        raise UsageError("--kernel needs at least one --binding SLOT:TYPE:ACCESS")
    wasm = load_module(args.module)
    kernel = None
    try:
        if args.legacy:
            wgsl = compile_wgsl(wasm, args.legacy)
        else:
            export, cpu_export = kernel_exports(args.kernel)
            kernel = KernelConfig(args.id, export, cpu_export, tuple(args.binding), relaxed_float=args.relaxed_float,
                                  strict_float=args.strict_float)
            wgsl = compile_buffer_wgsl(wasm, kernel)
    except CompileError as exc:
        from ..compiler import in_words

        print(f"CompileError {exc.kind.name}: {one_line(in_words(exc))}", file=sys.stderr)
        if kernel is not None and args.explain:
            explain(wasm, kernel)
        found = kernels_found(wasm, args.kernel) if kernel is not None else None
        if found is not None:
            print(f"note: {found}", file=sys.stderr)
        if kernel is not None:
            for problem in access_violations(wasm, kernel) if exc.kind.name == "INVALID_CONTRACT" else []:
                print(f"note: {problem}", file=sys.stderr)
            meaning = BLOCKER_MEANING[exc.kind.name].format(id=kernel.id, cpu=kernel.cpu_export)
            print(f"note: {meaning}", file=sys.stderr)
        return 1
    sys.stdout.write(wgsl if wgsl.endswith("\n") else wgsl + "\n")
    if kernel is not None:
        report_kernel(wasm, kernel)
    return 0
