"""Shared benchmark plumbing: JSONL records, environment facts, timing helpers."""
from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def package_digest() -> str:
    """The measured code's name where there is no git (a lent machine's copy of the tree): sha256
    over the imported wagogpu's .py files, path and bytes in sorted order, first 12 hex digits."""
    import hashlib
    from pathlib import Path

    import wagogpu

    root = Path(wagogpu.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@functools.cache
def revision() -> str:
    """The commit this checkout is at, with "+dirty" when tracked files differ from it; "unknown"
    outside a git checkout."""
    import subprocess
    from pathlib import Path

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def environment() -> dict[str, Any]:
    return {"revision": revision(), "package_digest": package_digest(),
            "python": platform.python_version(), "numpy": np.__version__,
            "wasmtime": _version("wasmtime"), "wgpu": _version("wgpu"),
            "machine": platform.machine(), "processor": platform.processor() or platform.machine(),
            # glibc reads its tunables (e.g. the non-temporal copy threshold) at process start.
            "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}


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


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """The median wall time of `repeats` calls after one untimed call (buffers mapped, pages touched)."""
    fn()
    return statistics.median(timed(fn, repeats))


class CallHooks:
    """Each (object, attribute, label) wrapped while active (a `with` block, or start() to stop())
    and restored after; every call of a wrapped function reports (label, start, end, result) to
    `seen` (result None when it raised). With `skip_missing`, a target its object lacks is left out."""

    def __init__(self, targets: list[tuple[object, str, str]],
                 seen: Callable[[str, float, float, Any], None], skip_missing: bool = False) -> None:
        self.targets = targets
        self._seen = seen
        self._skip_missing = skip_missing
        self._saved: list[tuple[object, str, bool, Any]] = []

    def __enter__(self) -> "CallHooks":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        seen = self._seen
        for obj, attr, label in self.targets:
            if self._skip_missing and not hasattr(obj, attr):
                continue
            fn = getattr(obj, attr)
            own = attr in vars(obj)  # a module's function, or an instance's own attribute
            self._saved.append((obj, attr, own, vars(obj).get(attr)))

            def wrapper(*args: Any, _fn: Callable[..., Any] = fn, _label: str = label, **kwargs: Any) -> Any:
                result = None
                t0 = time.perf_counter()
                try:
                    result = _fn(*args, **kwargs)
                    return result
                finally:
                    seen(_label, t0, time.perf_counter(), result)
            setattr(obj, attr, wrapper)

    def stop(self) -> None:
        for obj, attr, own, fn in reversed(self._saved):
            if own:
                setattr(obj, attr, fn)
            else:
                delattr(obj, attr)  # the class's method shows through again
        self._saved.clear()


class CallTimer(CallHooks):
    """Time spent inside chosen functions, by label (CallHooks' targets). Nested wrapped calls count
    in both labels. `take()` returns the seconds per label since the last take and resets."""

    def __init__(self, targets: list[tuple[object, str, str]]) -> None:
        self.spent: dict[str, float] = {label: 0.0 for _, _, label in targets}
        super().__init__(targets, self._add)

    def __enter__(self) -> "CallTimer":
        self.start()
        return self

    def _add(self, label: str, start: float, end: float, _result: Any) -> None:
        self.spent[label] += end - start

    def take(self) -> dict[str, float]:
        out = dict(self.spent)
        for label in self.spent:
            self.spent[label] = 0.0
        return out


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
