"""Shared benchmark plumbing: JSONL records, environment facts, timing helpers."""
from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np


def environment() -> dict[str, Any]:
    import wasmtime
    import wgpu

    return {"python": platform.python_version(), "numpy": np.__version__,
            "wasmtime": getattr(wasmtime, "__version__", "?"), "wgpu": wgpu.__version__,
            "machine": platform.machine(), "processor": platform.processor() or platform.machine()}


def emit(record: dict[str, Any], out=sys.stdout) -> None:
    print(json.dumps(record, sort_keys=True), file=out, flush=True)


def timed(fn: Callable[[], Any], repeats: int, min_seconds: float = 0.0) -> list[float]:
    """Wall times of repeats calls (at least one; more until min_seconds have passed)."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 1000:
            break
    return times


def summary(times: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "runs": len(times)}


def poly32_coefficients() -> list[float]:
    """The 32 Horner coefficients of the polynomial benchmark kernel (exact in f32)."""
    return [((k * 37) % 17 - 8) / 16.0 for k in range(32)]


def poly32_numpy(x: np.ndarray) -> np.ndarray:
    y = np.zeros_like(x)
    for c in poly32_coefficients():
        y = y * x + np.float32(c)
    return y
