"""Test modules of docs/design/compiler.md §6 and docs/design/abi.md §9 (our own renderings of the reference's fixtures)."""
from __future__ import annotations

import functools

import wasmtime

from wagogpu.abi.table import Access, ElementType
from wagogpu.config import BindingConfig, KernelConfig
from wasmgen import F32, I32, TM, f32add, f32c, f32mul, f32sub, lget, lset

E = ElementType
A = Access


def kernel_config(name: str = "double", bindings=((0, E.F32, A.READ), (1, E.F32, A.WRITE)), kid: int = 1,
                  **kw) -> KernelConfig:
    return KernelConfig(kid, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(s, t, a) for s, t, a in bindings], **kw)


K = kernel_config()  # the standard config of docs/design/compiler.md §6

BUFFERS_WAT = """
(module
  (import "wago_gpu_v1" "createBuffer" (func $create (param i32 i32) (result i32 i32)))
  (import "wago_gpu_v1" "freeBuffer" (func $free (param i32) (result i32)))
  (import "wago_gpu_v1" "bindBuffer" (func $bind (param i32 i32) (result i32)))
  (import "wago_gpu_v1" "getBuffer" (func $get (param i32) (result i32)))
  (import "wago_gpu_v1" "setBuffer32" (func $set (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "copyBuffer32" (func $copy (param i32 i32 i32 i32 i32) (result i32)))
  (import "wago_gpu_v1" "readBufferF32" (func $read (param i32 i32) (result f32)))
  (import "wago_gpu_v1" "writeBufferF32" (func $write (param i32 i32 f32)))
  (import "wago_gpu_v1" "dispatch" (func $dispatch (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wago_gpu.kernel.double") (param $i i32)
    (call $write (call $get (i32.const 1)) (local.get $i)
      (f32.mul (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 2))))
  (func (export "wago_gpu.kernel.addOne") (param $i i32)
    (call $write (call $get (i32.const 1)) (local.get $i)
      (f32.add (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 1))))
  (func $double (export "wago_gpu.cpu.double") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $write (call $get (i32.const 1)) (local.get $i)
        (f32.mul (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 2)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
  (func $addOne (export "wago_gpu.cpu.addOne") (param $n i32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (call $write (call $get (i32.const 1)) (local.get $i)
        (f32.add (call $read (call $get (i32.const 0)) (local.get $i)) (f32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
  (func $check (param $status i32)
    (if (local.get $status) (then unreachable)))
  (func $run (param $id i32) (param $n i32) (param $at i32) (param $runner i32) (local $s i32)
    (local.set $s (call $dispatch (local.get $id) (local.get $n)))
    (i32.store (local.get $at) (local.get $s))
    (if (i32.eq (local.get $s) (i32.const 1))
      (then (if (local.get $runner) (then (call $addOne (local.get $n))) (else (call $double (local.get $n)))))
      (else (call $check (local.get $s)))))
  (func $start (local $a i32) (local $b i32)
    (f32.store (i32.const 0) (f32.const 1)) (f32.store (i32.const 4) (f32.const 2))
    (f32.store (i32.const 8) (f32.const 3)) (f32.store (i32.const 12) (f32.const 4))
    (call $create (i32.const 8) (i32.const 4)) (call $check) (local.set $a)
    (call $create (i32.const 8) (i32.const 4)) (call $check) (local.set $b)
    (call $check (call $set (local.get $a) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4)))
    (call $check (call $bind (i32.const 0) (local.get $a)))
    (call $check (call $bind (i32.const 1) (local.get $b)))
    (call $run (i32.const 1) (i32.const 4) (i32.const 32) (i32.const 0))
    (call $check (call $bind (i32.const 0) (local.get $b)))
    (call $check (call $bind (i32.const 1) (local.get $a)))
    (call $run (i32.const 2) (i32.const 4) (i32.const 36) (i32.const 1))
    (call $check (call $copy (local.get $a) (i32.const 0) (i32.const 0) (i32.const 16) (i32.const 4)))
    (call $check (call $free (local.get $b)))
    (call $check (call $free (local.get $a))))
  (start $start))
"""


@functools.cache
def buffers_wasm() -> bytes:
    """F1 (internal/fixtures/buffers.wat): kernels double (ID 1) and addOne (ID 2)."""
    return bytes(wasmtime.wat2wasm(BUFFERS_WAT))


def read0() -> bytes:
    return TM.read("F32", TM.get(0), lget(0))


def write1(value: bytes) -> bytes:
    return TM.write("F32", TM.get(1), lget(0), value)


TWICE_BODY = write1(f32mul(read0(), f32c(2.0)))
SQUARE_BODY = write1(f32add(f32mul(read0(), read0()), f32c(1.0)))
COPY_BODY = write1(read0())
POLY_BODY = (lset(1, read0())
             + b"".join(lset(1, f32add(f32mul(lget(1), f32c(0.875)), f32c(0.25))) for _ in range(32))
             + write1(lget(1)))


@functools.cache
def bufferwork_wasm() -> bytes:
    """BufferWork: twice, square, copy and polynomial kernels in one module."""
    return TM.module(TWICE_BODY, kernel="twice", extra_kernels=[
        ("square", SQUARE_BODY, ()), ("copy", COPY_BODY, ()), ("polynomial", POLY_BODY, [(1, F32)])])


BUFFERWORK_KERNELS = ("twice", "square", "copy", "polynomial")


def bufferwork_config(name: str, kid: int = 1) -> KernelConfig:
    return kernel_config(name, kid=kid, relaxed_float=True)


MANDEL_CONFIG = kernel_config("step", ((0, E.F32, A.READ), (1, E.F32, A.READ), (2, E.F32, A.READ_WRITE),
                                       (3, E.F32, A.READ_WRITE)))


@functools.cache
def mandelbrot_wasm() -> bytes:
    """A hand-written Mandelbrot step shaped like TinyGo's: loads x, y, cr, ci; 2*x*y as x+x."""
    x, y, cr, ci = 1, 2, 3, 4
    loads = b"".join(lset(local, TM.read("F32", TM.get(slot), lget(0)))
                     for local, slot in ((x, 2), (y, 3), (cr, 0), (ci, 1)))
    nx = f32add(f32sub(f32mul(lget(x), lget(x)), f32mul(lget(y), lget(y))), lget(cr))
    ny = f32add(f32mul(f32add(lget(x), lget(x)), lget(y)), lget(ci))
    body = loads + TM.write("F32", TM.get(2), lget(0), nx) + TM.write("F32", TM.get(3), lget(0), ny)
    return TM.module(body, [(4, F32)], kernel="step")


# ---- legacy fixtures -------------------------------------------------------------------------
def _legacy_wat(expr: str) -> bytes:
    return bytes(wasmtime.wat2wasm(f"""
(module
  (import "wago_gpu" "run" (func $run (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "kernel") (param $x f32) (result f32) {expr})
  (func (export "cpu") (param i32 i32 i32)))
"""))


@functools.cache
def legacy_twice() -> bytes:
    return _legacy_wat("(f32.mul (local.get $x) (f32.const 2))")


@functools.cache
def legacy_square() -> bytes:
    return _legacy_wat("(f32.add (f32.mul (local.get $x) (local.get $x)) (f32.const 1))")


@functools.cache
def legacy_heavy() -> bytes:
    expr = "(local.get $x)"
    for _ in range(32):
        expr = f"(f32.add (f32.mul {expr} (f32.const 0.9990234375)) (f32.const 0.0009765625))"
    return _legacy_wat(expr)


START_WAT = """
(module
  (import "wago_gpu" "run" (func $run (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 0))
  (func $init (global.set $g (i32.const 1)))
  (start $init)
  (func (export "kernel") (param $x f32) (result f32)
    (f32.mul (local.get $x) (f32.const 2))))
"""

__all__ = ["A", "E", "K", "I32", "F32", "kernel_config", "buffers_wasm", "bufferwork_wasm", "mandelbrot_wasm",
           "legacy_twice", "legacy_square", "legacy_heavy", "START_WAT", "TWICE_BODY", "SQUARE_BODY", "COPY_BODY",
           "POLY_BODY", "MANDEL_CONFIG", "BUFFERWORK_KERNELS", "bufferwork_config", "read0", "write1"]


# ---- compile helpers -------------------------------------------------------------------------
from wagogpu.compiler import CompileError, compile_buffer_wgsl  # noqa: E402
from wagogpu.compiler.buffer import LoweredKernel, lower_kernel  # noqa: E402
from wagogpu.compiler.decoder import decode_module  # noqa: E402
from wagogpu.compiler.wgsl import INDEX_LINE_GROWTH  # noqa: E402
from wasmgen import END, Abi  # noqa: E402


def tm(body: bytes, groups=(), abi: Abi = TM, **kw) -> bytes:
    return abi.module(body, list(groups), **kw)


def config(*bindings, name: str = "double") -> KernelConfig:
    return kernel_config(name, bindings)


def compile_ok(body: bytes, kernel: KernelConfig = K, groups=(), abi: Abi = TM) -> str:
    return compile_buffer_wgsl(tm(body, groups, abi), kernel)


def compile_err(body: bytes, kernel: KernelConfig = K, groups=(), abi: Abi = TM) -> CompileError:
    try:
        compile_buffer_wgsl(tm(body, groups, abi), kernel)
    except CompileError as e:
        return e
    raise AssertionError("expected a CompileError")


def lowered(body: bytes, kernel: KernelConfig = K, groups=(), abi: Abi = TM, grid_2d: bool = True) -> LoweredKernel:
    return lower_kernel(decode_module(tm(body, groups, abi)), kernel, grid_2d=grid_2d)


def spec_size(source: bytes, kernel: KernelConfig) -> int:
    """The reference's (1-D) shader size, and check the public shader differs only by the index line."""
    one_d = lower_kernel(decode_module(source), kernel, grid_2d=False).wgsl
    assert len(compile_buffer_wgsl(source, kernel)) == len(one_d) + INDEX_LINE_GROWTH
    return len(one_d)


def raw_kernel_module(raw_body: bytes, abi: Abi = TM, name: str = "double") -> bytes:
    """TM with the kernel's code entry given byte for byte (local declarations included)."""
    from wasmgen import uleb

    m = abi.builder()
    m.func([I32], [], END, export=f"wago_gpu.kernel.{name}")
    m.bodies[-1] = uleb(len(raw_body)) + raw_body
    m.func([I32], [], END, export=f"wago_gpu.cpu.{name}")
    return m.build()
