"""Hypothesis strategies: random kernels inside the GPU subset, and mutations of modules.

`subset_kernels()` draws a whole module plus its KernelConfig and what the body must produce
(the slots it reads and writes). Everything it draws must compile; the fuzzers reuse it as a
source of valid seeds to mutate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from wagogpu.abi.table import TYPE_INFO, Access, ElementType
from wagogpu.config import BindingConfig, KernelConfig
from wasmgen import (F32, FULL, I32, f32add, f32bits, f32mul, f32sub, i32c, lget, lset, ltee)

GPU_TYPES = [t for t, info in TYPE_INFO.items() if info.gpu]
F32_TYPES = [t for t in GPU_TYPES if TYPE_INFO[t].scalar == "f32"]
INTERESTING_BITS = [0, 0x80000000, 0x3F800000, 0x40000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC12345,
                    0x00000001, 0x807FFFFF, 0x3F600000, 0x3E800000, 0xFFFFFFFF]


@dataclass
class Program:
    """A generated kernel and what lowering it must report."""

    source: bytes
    kernel: KernelConfig
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    arithmetic: int = 0  # binary ops in the body (emitted or dead)


@dataclass
class _Env:
    readable: list[tuple[int, ElementType]]
    writable: list[tuple[int, ElementType]]
    f32_locals: list[int]
    i32_locals: list[int]
    reads: set[int] = field(default_factory=set)
    arithmetic: int = 0


def _f32_leaf(draw, env: _Env) -> bytes:
    options = ["const"]
    if env.f32_locals:
        options.append("local")
    loads = [(s, t) for s, t in env.readable if t in F32_TYPES]
    if loads:
        options.append("load")
    kind = draw(st.sampled_from(options))
    if kind == "const":
        bits = draw(st.one_of(st.sampled_from(INTERESTING_BITS), st.integers(0, 0xFFFFFFFF)))
        return f32bits(bits)
    if kind == "local":
        return lget(draw(st.sampled_from(env.f32_locals)))
    slot, t = draw(st.sampled_from(loads))
    env.reads.add(slot)
    return FULL.read(t.name, FULL.get(slot), lget(0))


def _f32_expr(draw, env: _Env, depth: int) -> bytes:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return _f32_leaf(draw, env)
    kind = draw(st.sampled_from(["add", "sub", "mul", "tee"] if env.f32_locals else ["add", "sub", "mul"]))
    if kind == "tee":
        return ltee(draw(st.sampled_from(env.f32_locals)), _f32_expr(draw, env, depth - 1))
    env.arithmetic += 1
    left = _f32_expr(draw, env, depth - 1)
    right = _f32_expr(draw, env, depth - 1)
    return {"add": f32add, "sub": f32sub, "mul": f32mul}[kind](left, right)


def _i32_expr(draw, env: _Env) -> bytes:
    options = ["const", "index"]
    if env.i32_locals:
        options.append("local")
    loads = [(s, t) for s, t in env.readable if t not in F32_TYPES]
    if loads:
        options.append("load")
    kind = draw(st.sampled_from(options))
    if kind == "const":
        return i32c(draw(st.integers(0, 0xFFFFFFFF)))
    if kind == "index":
        return lget(0)
    if kind == "local":
        return lget(draw(st.sampled_from(env.i32_locals)))
    slot, t = draw(st.sampled_from(loads))
    env.reads.add(slot)
    return FULL.read(t.name, FULL.get(slot), lget(0))


@st.composite
def subset_kernels(draw, max_statements: int = 8, max_depth: int = 4) -> Program:
    """A random kernel using only the accepted subset: it must always compile."""
    n_bindings = draw(st.integers(1, 4))
    slots = draw(st.lists(st.integers(0, 7), min_size=n_bindings, max_size=n_bindings, unique=True))
    bindings = [BindingConfig(s, draw(st.sampled_from(GPU_TYPES)),
                              draw(st.sampled_from([Access.READ, Access.WRITE, Access.READ_WRITE]))) for s in slots]
    n_f32 = draw(st.integers(0, 3))
    n_i32 = draw(st.integers(0, 2))
    f32_locals = list(range(1, 1 + n_f32))
    i32_locals = list(range(1 + n_f32, 1 + n_f32 + n_i32))
    env = _Env([(b.slot, ElementType(b.type)) for b in bindings if b.access & Access.READ],
               [(b.slot, ElementType(b.type)) for b in bindings if b.access & Access.WRITE], f32_locals, i32_locals)
    writes: set[int] = set()
    body = b""
    if i32_locals and draw(st.booleans()):  # the index survives a save / clobber / restore round trip
        saved = i32_locals[0]
        body += lset(saved, lget(0)) + lset(0, i32c(draw(st.integers(0, 0xFFFFFFFF)))) + lset(0, lget(saved))
    for _ in range(draw(st.integers(1, max_statements))):
        kinds = ["f32_local"] * bool(f32_locals) + ["i32_local"] * bool(i32_locals) + ["write"] * bool(env.writable)
        if not kinds:
            break
        kind = draw(st.sampled_from(kinds))
        if kind == "f32_local":
            body += lset(draw(st.sampled_from(f32_locals)), _f32_expr(draw, env, max_depth))
        elif kind == "i32_local":
            body += lset(draw(st.sampled_from(i32_locals)), _i32_expr(draw, env))
        else:
            slot, t = draw(st.sampled_from(env.writable))
            value = _f32_expr(draw, env, max_depth) if t in F32_TYPES else _i32_expr(draw, env)
            body += FULL.write(t.name, FULL.get(slot), lget(0), value)
            writes.add(slot)
    groups = [(n, t) for n, t in ((n_f32, F32), (n_i32, I32)) if n]
    kernel = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k", bindings)
    source = FULL.module(body, groups, kernel="k")
    return Program(source, kernel, env.reads, writes, env.arithmetic)


@st.composite
def mutations(draw, source: bytes) -> bytes:
    """A few random byte edits (replace, insert, delete, truncate, duplicate a run) of `source`."""
    data = bytearray(source)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "truncate", "duplicate", "bitflip"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "replace" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "bitflip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and data:
            del data[at:at + draw(st.integers(1, 4))]
        elif op == "truncate":
            del data[at:]
        elif op == "duplicate" and data:
            n = draw(st.integers(1, 16))
            data[at:at] = data[at:at + n]
    return bytes(data)
