"""explain_kernel and in_words: the first blocker in words and every blocker of the callees."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wagogpu.compiler import BlockerKind, CompileError, explain_kernel, in_words
from wagogpu.compiler.contract import CompileErrorKind

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
sys.path.insert(0, str(CORPUS.parents[1]))
from tests.corpus.table import KERNELS  # noqa: E402

C_O2 = (CORPUS / "wasm" / "c-O2.wasm").read_bytes()


def config(name: str):
    kid, kernel = next((i, k) for i, k in enumerate(KERNELS, start=1) if k.name == name)
    return kernel.config(kid)


def test_an_eligible_kernel_has_no_blockers():
    assert explain_kernel(C_O2, config("saxpy")) == []


def test_every_blocker_of_a_kernel_and_its_callees():
    blockers = explain_kernel(C_O2, config("fmix64"))
    assert blockers[0].kind is BlockerKind.FIRST
    listed = [b for b in blockers[1:] if b.kind is BlockerKind.INSTRUCTION]
    assert listed and all("64" in b.opcode and b.offset > 0 and b.function >= 0 for b in listed)


def test_the_first_blocker_names_its_opcode():
    assert in_words(CompileError(CompileErrorKind.UNSUPPORTED, "unsupported opcode 0x3f")) == \
        "unsupported opcode 0x3f (memory.size)"
    assert in_words(CompileError(CompileErrorKind.UNSUPPORTED, "unsupported opcode 0xfc 0x0b")) == \
        "unsupported opcode 0xfc 0x0b (memory.fill)"


def test_cli_explain():
    out = subprocess.run([sys.executable, "-m", "wagogpu", "compile", str(CORPUS / "wasm" / "c-O2.wasm"), "--kernel",
                          "fmix64", "--binding", "0:U32:read", "--binding", "1:U32:read", "--binding", "2:U32:write",
                          "--explain"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "instruction outside the GPU subset: i64." in out.stderr
