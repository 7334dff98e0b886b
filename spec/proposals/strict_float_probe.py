"""Probe: are the strict_float kernels' integer-only f32 operations (strictfloat.py) exact on this adapter, how far off
are the adapter's native float operations, and what does strict mode cost?

    python3 spec/proposals/strict_float_probe.py [--pairs 200000] [--elements 4194304] [--out FILE]

Needs only numpy and wgpu. Every record names the adapter. Exactness: random and special operand
pairs (subnormals, NaNs, infinities, near-cancelling and overflowing pairs) through add, sub, mul,
div, sqrt, the six comparisons and the four roundings, once as WGSL's native operations and once
through the strict helpers, compared with numpy's IEEE results (a NaN result must be quiet, and
canonical when no operand is a NaN). Cost: a 32-step polynomial (v = v*0.875 + 0.25) over
--elements, native against strict, median of warm dispatches (each submitted and waited for).
"""
from __future__ import annotations

import argparse
import enum
import json
import sys
import time
from pathlib import Path

import numpy as np
import wgpu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))  # this checkout's wagogpu
from wagogpu.compiler import strictfloat  # noqa: E402
from wagogpu.compiler.ops import helper_text  # noqa: E402

# The strict helpers as the compiler emits them (wagogpu/compiler/strictfloat.py).
HELPERS = helper_text(tuple(strictfloat.HELPERS))
WORKGROUP = 64
ROW = 65535 * WORKGROUP


class Mode(enum.StrEnum):
    NATIVE = "native"
    STRICT = "strict"


# name -> (native WGSL expression, strict WGSL expression) over a, b (u32 bits); numpy reference
OPS: dict[str, tuple[str, str]] = {
    "add": ("bitcast<u32>(x + y)", "sf_add(a, b)"),
    "sub": ("bitcast<u32>(x - y)", "sf_sub(a, b)"),
    "mul": ("bitcast<u32>(x * y)", "sf_mul(a, b)"),
    "div": ("bitcast<u32>(x / y)", "sf_div(a, b)"),
    "sqrt": ("bitcast<u32>(sqrt(x))", "sf_sqrt(a)"),
    "compare": ("u32(x == y) | (u32(!(x == y)) << 1u) | (u32(x < y) << 2u) | (u32(x > y) << 3u)"
                " | (u32(x <= y) << 4u) | (u32(x >= y) << 5u)",
                "sf_eq(a, b) | (sf_ne(a, b) << 1u) | (sf_lt(a, b) << 2u) | (sf_gt(a, b) << 3u)"
                " | (sf_le(a, b) << 4u) | (sf_ge(a, b) << 5u)"),
    "trunc": ("bitcast<u32>(trunc(x))", "sf_trunc(a)"),
    "floor": ("bitcast<u32>(floor(x))", "sf_floor(a)"),
    "ceil": ("bitcast<u32>(ceil(x))", "sf_ceil(a)"),
    "nearest": ("bitcast<u32>(round(x))", "sf_nearest(a)"),
}
UNARY = {"sqrt", "trunc", "floor", "ceil", "nearest"}


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        cmp = ((x == y) * 1 | (x != y) * 2 | (x < y) * 4 | (x > y) * 8 | (x <= y) * 16 | (x >= y) * 32)
        cols = [x + y, x - y, x * y, x / y, np.sqrt(x), cmp.astype(np.uint32), np.trunc(x), np.floor(x),
                np.ceil(x), np.rint(x)]
    return np.stack([c.view(np.uint32) if c.dtype == np.float32 else c for c in cols], 1)


def _u32(rng: np.random.Generator, low: int, high: int, n: int) -> np.ndarray:
    return rng.integers(low, high, size=n, dtype=np.uint64).astype(np.uint32)


def operand_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    special = np.array([0, 0x80000000, 1, 0x80000001, 0x7FFFFF, 0x800000, 0x3F800000, 0xBF800000, 0x7F7FFFFF,
                        0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FA00000, 0x7F800001,
                        0x400000, 0x34000000, 0x4B800000, 0x3F800001, 0x3EFFFFFF, 0x3F000000, 0xBFC00000],
                       np.uint32)
    sa, sb = (m.ravel() for m in np.meshgrid(special, special))
    base = _u32(rng, 0, 1 << 32, n)
    sub = _u32(rng, 0, 1 << 24, n) | (_u32(rng, 0, 2, n) << np.uint32(31))
    mid, big = _u32(rng, 0x30000000, 0x48000000, n), _u32(rng, 0x7E000000, 0x7F800000, n)
    a = np.concatenate([sa, _u32(rng, 0, 1 << 32, n), base, sub, sub, big, mid])
    b = np.concatenate([sb, _u32(rng, 0, 1 << 32, n), base ^ _u32(rng, 0, 256, n) ^ np.uint32(0x80000000),
                        mid, sub[::-1], big[::-1], sub])
    return a, b


def _nan(v: np.ndarray) -> np.ndarray:
    return ((v & 0x7F800000) == 0x7F800000) & ((v & 0x7FFFFF) != 0)


class Probe:
    def __init__(self, power_preference: str):
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        self.info = dict(adapter.info)
        self.device = adapter.request_device_sync()

    @property
    def adapter(self) -> dict:
        return {"adapter": self.info.get("device", "?"), "backend": self.info.get("backend_type", "?"),
                "driver": self.info.get("description", "?")}

    def _pipeline(self, body: str) -> wgpu.GPUComputePipeline:
        code = HELPERS + f"""
@group(0) @binding(0) var<storage, read> inp: array<u32>;
@group(0) @binding(1) var<storage, read_write> outp: array<u32>;
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
  let i = id.x + id.y * {ROW}u;
  if (i >= arrayLength(&inp) / 2u) {{ return; }}
{body}
}}
"""
        module = self.device.create_shader_module(code=code)
        return self.device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})

    def _run(self, pipe: wgpu.GPUComputePipeline, inp: np.ndarray, out_words: int, n: int) -> np.ndarray:
        dev = self.device
        src = dev.create_buffer_with_data(data=inp.tobytes(), usage=wgpu.BufferUsage.STORAGE)
        dst = dev.create_buffer(size=4 * out_words, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": src}}, {"binding": 1, "resource": {"buffer": dst}}])
        self.dispatch(pipe, group, n)
        return np.frombuffer(dev.queue.read_buffer(dst), np.uint32)

    def dispatch(self, pipe: wgpu.GPUComputePipeline, group: wgpu.GPUBindGroup, n: int) -> None:
        enc = self.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipe)
        cpass.set_bind_group(0, group)
        groups = -(-n // WORKGROUP)
        cpass.dispatch_workgroups(min(groups, 65535), -(-groups // 65535))
        cpass.end()
        self.device.queue.submit([enc.finish()])

    def exactness(self, mode: Mode, a: np.ndarray, b: np.ndarray) -> list[dict]:
        k = len(OPS)
        lines = ["  let a = inp[2u * i];", "  let b = inp[2u * i + 1u];",
                 "  let x = bitcast<f32>(a);", "  let y = bitcast<f32>(b);"]
        lines += [f"  outp[{k}u * i + {j}u] = {exprs[mode is Mode.STRICT]};" for j, exprs in enumerate(OPS.values())]
        inp = np.empty(2 * len(a), np.uint32)
        inp[0::2], inp[1::2] = a, b
        got = self._run(self._pipeline("\n".join(lines)), inp, k * len(a), len(a)).reshape(len(a), k)
        want = _reference(a, b)
        records = []
        for j, name in enumerate(OPS):
            g, w = got[:, j], want[:, j]
            operand_nan = _nan(a) | (False if name in UNARY else _nan(b))
            ok = (g == w) | (_nan(g) & _nan(w) & ((g & 0x400000) != 0))
            if name != "compare":
                ok &= ~(_nan(g) & ~operand_nan & ((g & 0x7FFFFFFF) != 0x7FC00000))
            bad = np.nonzero(~ok)[0]
            examples = [f"{a[i]:08x} {b[i]:08x}: want {w[i]:08x} got {g[i]:08x}" for i in bad[:3]]
            records.append({"record": "exactness", **self.adapter, "mode": str(mode), "op": name,
                            "cases": int(len(g)), "wrong": int(len(bad)), "examples": examples})
        return records

    def cost(self, mode: Mode, elements: int, repeats: int = 12) -> dict:
        native, strict = "v * 0.875 + 0.25", "sf_add(sf_mul(v, 0x3f600000u), 0x3e800000u)"
        carrier = "bitcast<f32>(inp[2u * i])" if mode is Mode.NATIVE else "inp[2u * i]"
        step = native if mode is Mode.NATIVE else strict
        body = [f"  var v = {carrier};"] + [f"  v = {step};"] * 32
        body.append("  outp[i] = " + ("bitcast<u32>(v);" if mode is Mode.NATIVE else "v;"))
        pipe = self._pipeline("\n".join(body))
        dev = self.device
        src = dev.create_buffer(size=8 * elements, usage=wgpu.BufferUsage.STORAGE)
        dst = dev.create_buffer(size=4 * elements, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        probe = dev.create_buffer(size=4, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": src}}, {"binding": 1, "resource": {"buffer": dst}}])
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            self.dispatch(pipe, group, elements)
            dev.queue.read_buffer(probe)  # waits for the dispatch before it
            times.append(time.perf_counter() - t0)
        return {"record": "cost", **self.adapter, "mode": str(mode), "elements": elements, "steps": 32,
                "median_ms": round(1e3 * float(np.median(times[2:])), 3), "min_ms": round(1e3 * min(times[2:]), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--elements", type=int, default=1 << 22)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--power-preference", default="high-performance")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    probe = Probe(args.power_preference)
    a, b = operand_pairs(args.pairs, args.seed)
    records = [r for mode in Mode for r in probe.exactness(mode, a, b)]
    records += [probe.cost(mode, args.elements) for mode in Mode]
    text = "".join(json.dumps(r) + "\n" for r in records)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    strict_wrong = sum(r["wrong"] for r in records if r["record"] == "exactness" and r["mode"] == Mode.STRICT)
    return 1 if strict_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
