"""The eligibility report and the tools behind it: the checked-in report is what the generator makes
of the checked-in .wasm with this checkout's compiler; every module exports exactly its kernels;
the Wasm scan and the blocker classification say what the code really contains."""
from __future__ import annotations

import pytest
import wasmtime

from wagogpu import Access, CompileError, CompileErrorKind, ElementType

from .cells import CELLS, Cell
from .kernels import Kernel, Slot
from .languages import Language
from .report import REPORT_JSONL, REPORT_MD, check_exports, classify, generate
from .table import BY_NAME
from .wasmscan import Kind, Module, local_kinds, parse_module, uses

SIZE_BUDGET = 6 << 20  # the repository travels to the GPU machine under a 64 MiB limit (each Go level adds 1.9 MB of runtime)


def test_report_is_current() -> None:
    md, lines = generate()
    hint = "regenerate it: python3 -m tests.corpus.report (and commit report.md, report.jsonl)"
    assert REPORT_JSONL.read_text() == lines, f"report.jsonl is stale; {hint}"
    assert REPORT_MD.read_text() == md, f"report.md is stale; {hint}"


@pytest.mark.parametrize("cell", CELLS, ids=[c.file_name for c in CELLS])
def test_module_exports_exactly_its_kernels_and_imports_only_the_abi(cell: Cell) -> None:
    data = cell.path().read_bytes()
    check_exports(cell, parse_module(data))
    module = wasmtime.Module(wasmtime.Engine(), data)
    namespaces = {i.module for i in module.imports}
    assert namespaces <= {"wago_gpu_v1", "wasi_snapshot_preview1"}, namespaces  # WASI: Go, and C -O0's libc
    if cell.language in (Language.ZIG, Language.AS):
        assert namespaces == {"wago_gpu_v1"}


def test_checked_in_modules_stay_small() -> None:
    total = sum(c.path().stat().st_size for c in CELLS)
    assert total < SIZE_BUDGET, total


SCAN_WAT = """(module
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $rd (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $wr (param i32 i32 f32)))
  (import "wago_gpu_v1" "readBufferF64" (func $rd64 (param i32 i32) (result f64)))
  (memory 1)
  (global $sp (mut i32) (i32.const 1024))
  (table 1 funcref)
  (type $void (func (param i32)))
  (func $helper (export "wago_gpu.kernel.helper") (param $i i32) (local $d f64)
    (local.set $d (f64.const 1.5))
    (drop (i64.const 7)))
  (func (export "wago_gpu.kernel.frame") (param $i i32)
    (global.set $sp (i32.sub (global.get $sp) (i32.const 16)))
    (drop (i32.load offset=4 (global.get $sp)))
    (call $helper (local.get $i)))
  (func (export "wago_gpu.kernel.plain") (param $i i32)
    (call $wr (call $get (i32.const 1)) (local.get $i)
      (f32.mul (call $rd (call $get (i32.const 0)) (local.get $i)) (f32.const 2))))
  (func (export "wago_gpu.kernel.wide") (param $i i32) (local $x i64)
    (drop (call $rd64 (call $get (i32.const 0)) (local.get $i)))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 4))
    (call_indirect (type $void) (local.get $i) (i32.const 0))
    (block $b (br_table $b $b (local.get $i)))))
"""


@pytest.fixture(scope="module")
def scanned() -> Module:
    return parse_module(bytes(wasmtime.wat2wasm(SCAN_WAT)))


def test_scan_follows_calls_and_finds_every_kind(scanned: Module) -> None:
    assert uses(scanned, "wago_gpu.kernel.plain") == set()
    assert uses(scanned, "wago_gpu.kernel.helper") == {Kind.F64, Kind.I64}
    assert uses(scanned, "wago_gpu.kernel.frame") == {Kind.GLOBALS, Kind.MEMORY_LOAD, Kind.DEFINED_CALL, Kind.F64, Kind.I64}
    assert uses(scanned, "wago_gpu.kernel.wide") == {Kind.F64, Kind.I64, Kind.MEMORY_STORE, Kind.DEFINED_CALL}
    assert local_kinds(scanned, "wago_gpu.kernel.wide") == {Kind.I64} and local_kinds(scanned, "wago_gpu.kernel.frame") == set()


def _kernel(export: str, t: ElementType = ElementType.F32) -> Kernel:
    return Kernel(export, (Slot(0, t, Access.READ),), lambda v: {}, "")


@pytest.mark.parametrize(("message", "kind"), [
    ("unsupported opcode 0x23", Kind.GLOBALS), ("unsupported opcode 0x2d", Kind.MEMORY_LOAD),
    ("unsupported opcode 0x37", Kind.MEMORY_STORE), ("unsupported opcode 0xac", Kind.I64),
    ("unsupported opcode 0xbb", Kind.F64), ("unsupported opcode 0xfc 0x0b", Kind.MEMORY_STORE),
    ("unsupported opcode 0xfc 0x02", Kind.F64), ("unsupported opcode 0x1b", Kind.OTHER),
    ("only buffer intrinsic calls are supported", Kind.DEFINED_CALL),
    ("unsupported instruction global.get in kernel", Kind.GLOBALS),  # issue 17 item 6's wording
    ("gather read of a written slot", Kind.OTHER),
])
def test_classify_reads_the_message(scanned: Module, message: str, kind: Kind) -> None:
    assert classify(CompileError(CompileErrorKind.UNSUPPORTED, message), _kernel("plain"), scanned) == kind


def test_classify_names_the_64_bit_type_from_locals_and_bindings(scanned: Module) -> None:
    local = CompileError(CompileErrorKind.UNSUPPORTED, "local type is unsupported")
    assert classify(local, _kernel("wide"), scanned) == Kind.I64
    buffers = CompileError(CompileErrorKind.UNSUPPORTED, "64-bit GPU buffers are unsupported")
    assert classify(buffers, _kernel("plain", ElementType.F64), scanned) == Kind.F64
    assert classify(buffers, _kernel("plain", ElementType.U64), scanned) == Kind.I64


def test_inputs_are_fixed_and_start_with_the_edges() -> None:
    kernel = BY_NAME["safe_div"]
    first, again = kernel.inputs(64), kernel.inputs(64)
    assert all((first[s] == again[s]).all() for s in first)
    edges = kernel.slots[0].domain.edges  # type: ignore[union-attr]
    assert list(first[0][:len(edges)]) == list(edges)
