"""Kernels of the reference subset and the WGSL the compiler gives them, kept as a golden file.

The golden file (data/reference_wgsl.json) was written by the compiler as it stood before the
lowering became one path (commit fdd75f6), whose reference-subset output was checked against the
reference's sizes and texts (docs/design/compiler.md §2, §6). test_reference_wgsl.py compares today's output
with it byte for byte, so any change to reference-subset WGSL fails there.

Named cases cover every construct of the reference subset (docs/design/compiler.md §1.3.5: end, the void
return before end, local.get/set/tee, i32/f32 constants, f32 add/sub/mul with the deferred-node and
depth rules, getBuffer, loads and stores of every one-word element type, F16 helpers, handles and
zero locals in locals, the index kept through locals); random cases are drawn by a seeded generator
over the same subset (its draws depend only on the seed, so the file stays valid).

    PYTHONPATH=<checkout> python3 tests/compiler/reference_corpus.py --write   # rewrite the file
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wagogpu.abi.table import TYPE_INFO, Access, ElementType  # noqa: E402
from wagogpu.config import BindingConfig, KernelConfig  # noqa: E402
from wasmgen import (F32, FULL, I32, RETURN, f32add, f32bits, f32mul, f32sub, i32c, lget, lset,  # noqa: E402
                     ltee)

GOLDEN = Path(__file__).resolve().parent / "data" / "reference_wgsl.json"
RANDOM_CASES = 240
GPU_TYPES = [t.name for t, info in TYPE_INFO.items() if info.gpu]
FLOAT_TYPES = ("F32", "F16")
BITS = [0, 0x80000000, 0x3F800000, 0x40000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC12345, 1, 0x807FFFFF]


@dataclass(frozen=True)
class Case:
    name: str
    body: bytes
    groups: tuple[tuple[int, int], ...]
    bindings: tuple[tuple[int, str, int], ...]  # (slot, element type name, access value)

    def source(self) -> bytes:
        return FULL.module(self.body, list(self.groups), kernel="k")

    def kernel(self) -> KernelConfig:
        return KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                            [BindingConfig(s, ElementType[t], Access(a)) for s, t, a in self.bindings])


R, W, RW = int(Access.READ), int(Access.WRITE), int(Access.READ_WRITE)
F32_IO = ((0, "F32", R), (1, "F32", W))


def rd(t: str, slot: int, element: bytes = lget(0)) -> bytes:
    return FULL.read(t, FULL.get(slot), element)


def wr(t: str, slot: int, value: bytes, element: bytes = lget(0)) -> bytes:
    return FULL.write(t, FULL.get(slot), element, value)


def _named() -> list[Case]:
    x = rd("F32", 0)
    cases = [
        Case("empty", b"", (), F32_IO),
        Case("twice", wr("F32", 1, f32mul(x, f32bits(0x40000000))), (), F32_IO),
        Case("copy", wr("F32", 1, x), (), F32_IO),
        Case("square", wr("F32", 1, f32add(f32mul(x, x), f32bits(0x3F800000))), (), F32_IO),
        Case("return_before_end", wr("F32", 1, f32sub(x, x)) + RETURN, (), F32_IO),
        Case("snapshot", lset(1, f32bits(0x3F800000)) + wr("F32", 1, f32add(lget(1), ltee(1, f32bits(0x40000000)))),
             ((1, F32),), F32_IO),
        Case("zero_f32_local", wr("F32", 1, f32sub(lget(1), f32bits(0x3F800000))), ((1, F32),), F32_IO),
        Case("tee_of_load", wr("F32", 1, f32add(ltee(1, x), lget(1))), ((1, F32),), F32_IO),
        Case("dead_arithmetic", lset(1, f32add(x, x)) + wr("F32", 1, x), ((1, F32),), F32_IO),
        Case("chain_of_eight", lset(1, x) + b"".join(lset(1, f32add(lget(1), f32bits(0x3F800000))) for _ in range(8))
             + wr("F32", 1, lget(1)), ((1, F32),), F32_IO),
        Case("shared_256", lset(1, x) + b"".join(lset(1, f32add(lget(1), lget(1))) for _ in range(256))
             + wr("F32", 1, lget(1)), ((1, F32),), F32_IO),
        Case("polynomial", lset(1, x) + b"".join(lset(1, f32add(f32mul(lget(1), f32bits(0x3F600000)),
                                                                f32bits(0x3E800000))) for _ in range(32))
             + wr("F32", 1, lget(1)), ((1, F32),), F32_IO),
        Case("store_first", wr("F32", 1, f32bits(0x40400000)) + wr("F32", 1, f32add(rd("F32", 1), f32bits(0x3F800000))),
             (), ((0, "F32", R), (1, "F32", RW))),
        Case("load_before_store", lset(1, f32add(rd("F32", 1), f32bits(0x3F800000))) + wr("F32", 1, f32bits(0x40400000))
             + wr("F32", 1, lget(1)), ((1, F32),), ((0, "F32", R), (1, "F32", RW))),
        Case("saved_bits", lset(1, x) + wr("F32", 1, f32add(lget(1), f32bits(0x3F800000))) + wr("F32", 2, lget(1)),
             ((1, F32),), ((0, "F32", R), (1, "F32", W), (2, "F32", W))),
        Case("handle_in_local", lset(1, FULL.get(1)) + FULL.write("F32", lget(1), lget(0), f32bits(0x40000000)),
             ((1, I32),), F32_IO),
        Case("zero_local_slot", wr("F32", 1, FULL.read("F32", FULL.get(lget(1)), lget(0))), ((1, I32),), F32_IO),
        Case("index_restored", lset(1, lget(0)) + lset(0, i32c(0)) + lset(0, lget(1))
             + FULL.write("F32", FULL.get(1), lget(1), f32mul(rd("F32", 0, lget(1)), f32bits(0x40000000))),
             ((1, I32),), F32_IO),
        Case("unused_slots", wr("F32", 1, x), (), ((0, "F32", RW), (1, "F32", W), (7, "F32", W))),
        Case("mandelbrot_step", _mandelbrot(), ((4, F32),),
             ((0, "F32", R), (1, "F32", R), (2, "F32", RW), (3, "F32", RW))),
        Case("f16_round_trip", wr("F16", 1, f32add(rd("F16", 0), f32bits(0x3F800000))), (),
             ((0, "F16", R), (1, "F16", W))),
        Case("f16_widen_narrow", wr("F32", 1, rd("F16", 0)) + wr("F16", 2, rd("F32", 3)), (),
             ((0, "F16", R), (1, "F32", W), (2, "F16", W), (3, "F32", R))),
        Case("f16_unused", wr("F32", 1, x), (), ((0, "F32", R), (1, "F32", W), (2, "F16", R))),
        Case("constants", b"".join(wr("F32", 1, f32bits(b)) + wr("F32", 1, f32mul(x, f32bits(b))) for b in BITS),
             (), F32_IO),
        Case("i32_constants", b"".join(wr("I32", 1, i32c(v)) for v in (0, 1, 63, 64, -1, -64, -65, 0x7FFFFFFF,
                                                                        0x80000000, 0x12345678)),
             (), ((1, "I32", W),)),
    ]
    for t in GPU_TYPES:
        if t in FLOAT_TYPES:
            continue
        cases.append(Case(f"int_{t}", lset(1, lget(0)) + lset(0, i32c(0)) + lset(0, lget(1))
                          + wr(t, 0, i32c(-1)) + wr(t, 1, lget(1)) + wr(t, 2, rd(t, 3)), ((1, I32),),
                          ((0, t, W), (1, t, W), (2, t, W), (3, t, R))))
    return cases


def _mandelbrot() -> bytes:
    x, y, cr, ci = 1, 2, 3, 4
    loads = b"".join(lset(local, rd("F32", slot)) for local, slot in ((x, 2), (y, 3), (cr, 0), (ci, 1)))
    nx = f32add(f32sub(f32mul(lget(x), lget(x)), f32mul(lget(y), lget(y))), lget(cr))
    ny = f32add(f32mul(f32add(lget(x), lget(x)), lget(y)), lget(ci))
    return loads + wr("F32", 2, nx) + wr("F32", 3, ny)


class _Draw:
    """One random reference-subset kernel; every choice comes from `rng`."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        slots = rng.sample(range(8), rng.randint(1, 4))
        self.bindings = tuple((s, rng.choice(GPU_TYPES), rng.choice((R, W, RW))) for s in slots)
        self.readable = [(s, t) for s, t, a in self.bindings if a & R]
        self.writable = [(s, t) for s, t, a in self.bindings if a & W]
        n_f32, n_i32 = rng.randint(0, 3), rng.randint(0, 2)
        self.f32_locals = list(range(1, 1 + n_f32))
        self.i32_locals = list(range(1 + n_f32, 1 + n_f32 + n_i32))
        self.groups = tuple((n, t) for n, t in ((n_f32, F32), (n_i32, I32)) if n)

    def f32_leaf(self) -> bytes:
        rng = self.rng
        loads = [(s, t) for s, t in self.readable if t in FLOAT_TYPES]
        kind = rng.choice(["const"] + ["local"] * bool(self.f32_locals) + ["load"] * bool(loads))
        if kind == "const":
            return f32bits(rng.choice(BITS) if rng.random() < 0.5 else rng.getrandbits(32))
        if kind == "local":
            return lget(rng.choice(self.f32_locals))
        slot, t = rng.choice(loads)
        return rd(t, slot)

    def f32_expr(self, depth: int) -> bytes:
        rng = self.rng
        if depth <= 0 or rng.randint(0, 3) == 0:
            return self.f32_leaf()
        kind = rng.choice(["add", "sub", "mul"] + ["tee"] * bool(self.f32_locals))
        if kind == "tee":
            return ltee(rng.choice(self.f32_locals), self.f32_expr(depth - 1))
        left, right = self.f32_expr(depth - 1), self.f32_expr(depth - 1)
        return {"add": f32add, "sub": f32sub, "mul": f32mul}[kind](left, right)

    def i32_expr(self) -> bytes:
        rng = self.rng
        loads = [(s, t) for s, t in self.readable if t not in FLOAT_TYPES]
        kind = rng.choice(["const", "index"] + ["local"] * bool(self.i32_locals) + ["load"] * bool(loads))
        if kind == "const":
            return i32c(rng.getrandbits(32))
        if kind == "index":
            return lget(0)
        if kind == "local":
            return lget(rng.choice(self.i32_locals))
        slot, t = rng.choice(loads)
        return rd(t, slot)

    def statement(self) -> bytes:
        rng = self.rng
        kinds = ["f32_local"] * bool(self.f32_locals) + ["i32_local"] * bool(self.i32_locals)
        kinds += ["write"] * 2 * bool(self.writable)
        if not kinds:
            return b""
        kind = rng.choice(kinds)
        if kind == "f32_local":
            return lset(rng.choice(self.f32_locals), self.f32_expr(4))
        if kind == "i32_local":
            return lset(rng.choice(self.i32_locals), self.i32_expr())
        slot, t = rng.choice(self.writable)
        return wr(t, slot, self.f32_expr(4) if t in FLOAT_TYPES else self.i32_expr())

    def body(self) -> bytes:
        rng = self.rng
        out = b""
        if self.i32_locals and rng.random() < 0.3:
            saved = self.i32_locals[0]
            out += lset(saved, lget(0)) + lset(0, i32c(rng.getrandbits(32))) + lset(0, lget(saved))
        for _ in range(rng.randint(1, 10)):
            out += self.statement()
        return out + (RETURN if rng.random() < 0.2 else b"")


def random_case(seed: int) -> Case:
    draw = _Draw(random.Random(seed))
    body = draw.body()
    return Case(f"random_{seed}", body, draw.groups, draw.bindings)


def all_cases() -> list[Case]:
    return _named() + [random_case(seed) for seed in range(RANDOM_CASES)]


def digest(text: str) -> str:
    return f"{len(text)}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def outcome(case: Case) -> str:
    """The case's WGSL (named cases) or its digest (random ones), or the error it raised."""
    from wagogpu.compiler import CompileError, compile_buffer_wgsl

    try:
        text = compile_buffer_wgsl(case.source(), case.kernel())
    except CompileError as e:
        return f"error: {e.kind.name}: {e.message}"
    return digest(text) if case.name.startswith("random_") else text


def main() -> int:
    if sys.argv[1:] != ["--write"]:
        print(__doc__)
        return 2
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps({c.name: outcome(c) for c in all_cases()}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
