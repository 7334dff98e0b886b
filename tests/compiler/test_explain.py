"""explain_kernel and in_words: the first blocker in words and every blocker of the callees."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import wasmtime

from wagogpu import BindingConfig, KernelConfig
from wagogpu.abi.table import IMPORTS
from wagogpu.compiler import BlockerKind, CompileError, explain_kernel, in_words
from wagogpu.compiler.contract import CompileErrorKind

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
sys.path.insert(0, str(CORPUS.parents[1]))
from tests.corpus.table import KERNELS  # noqa: E402
from tests.compiler.watkit import kernel_wat  # noqa: E402

C_O2 = (CORPUS / "wasm" / "c-O2.wasm").read_bytes()


def config(name: str):
    kid, kernel = next((i, k) for i, k in enumerate(KERNELS, start=1) if k.name == name)
    return kernel.config(kid)


def test_an_eligible_kernel_has_no_blockers():
    assert explain_kernel(C_O2, config("saxpy")) == []


# A kernel whose own body and whose callee each hold an instruction that never runs on the GPU.
BLOCKED = kernel_wat("""    (call $writeBufferI32 (call $getBuffer (i32.const 1)) (local.get $i)
      (call $helper (memory.grow (i32.const 0))))""").replace(
    "  (memory (export", "  (func $helper (param i32) (result i32) (i32.add (local.get 0) (memory.size)))\n"
    "  (memory (export", 1)
BLOCKED_KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", (BindingConfig(1, "I32", "write"),))


def test_every_blocker_of_a_kernel_and_its_callees():
    blockers = explain_kernel(bytes(wasmtime.wat2wasm(BLOCKED)), BLOCKED_KERNEL)
    assert blockers[0].kind is BlockerKind.FIRST and blockers[0].opcode == "memory.grow"
    listed = [(b.opcode, b.function) for b in blockers[1:] if b.kind is BlockerKind.INSTRUCTION]
    helper = len(IMPORTS) - sum("anyref" in spec.params for spec in IMPORTS)  # the first defined function
    assert listed == [("memory.grow", helper + 1), ("memory.size", helper)]
    assert all(b.offset > 0 for b in blockers[1:])


def test_the_first_blocker_names_its_opcode():
    assert in_words(CompileError(CompileErrorKind.UNSUPPORTED, "unsupported opcode 0x3f")) == \
        "unsupported opcode 0x3f (memory.size)"
    assert in_words(CompileError(CompileErrorKind.UNSUPPORTED, "unsupported opcode 0xfc 0x0b")) == \
        "unsupported opcode 0xfc 0x0b (memory.fill)"


def test_cli_explain(tmp_path):
    module = tmp_path / "blocked.wat"
    module.write_text(BLOCKED)
    out = subprocess.run([sys.executable, "-m", "wagogpu", "compile", str(module), "--kernel", "k", "--binding",
                          "1:I32:write", "--explain"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "instruction outside the GPU subset: memory.size" in out.stderr
