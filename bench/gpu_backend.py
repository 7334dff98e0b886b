"""Benchmark of the low-level GPU backend (wagogpu.gpu); prints JSONL.

Every record names the adapter and the code it measured.  Cold figures (device open in a fresh
process, first pipeline, first dispatch) are separate records from warm ones; results are
checked outside the timed region; a record on a software adapter says so.

    python bench/gpu_backend.py [--software] [--repeat N] [--large N] [--quick] [--cold N]
                                [--root DIR] [--api raw|public] [--out FILE]

``--root`` measures another checkout's wagogpu with this same script (the records say which), so
old and new code can be run alternately on one machine:

    git worktree add /tmp/gpu-old <commit>
    for i in 1 2 3; do python bench/gpu_backend.py --root /tmp/gpu-old --out ab.jsonl
                       python bench/gpu_backend.py --out ab.jsonl; done

Targets the host needs (recorded as "target_s" next to the figure):
  fresh-input 10M-element x2 round trip (upload 40 MB, kernel, read 40 MB) <= 4 ms
  resident dispatch (no transfers) <= 50 us
  1,024-element checked round trip <= 100 us
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
_perf = time.perf_counter
OUT: Any = sys.stdout
CODE: dict[str, Any] = {}

# The cold open, timed in a fresh interpreter: import, then GpuDevice.open() (driver start-up,
# adapter enumeration, device request).
_COLD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from wagogpu.gpu import GpuDevice
t1 = time.perf_counter()
kw = json.loads(sys.argv[2])
dev = GpuDevice.open(**kw)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "open_seconds": dev.open_seconds,
                  "adapter": dev.info.name, "backend": dev.info.backend, "software": dev.info.is_software,
                  "api": str(getattr(dev, "api", "raw"))}))
dev.close()
"""


def emit(dev: Any, rec: dict) -> None:
    if dev is not None:
        rec = {"adapter": dev.info.name, "backend": dev.info.backend, "driver": dev.info.driver,
               "software": dev.info.is_software, "api": str(getattr(dev, "api", "raw")), **rec}
    OUT.write(json.dumps({**rec, **CODE}) + "\n")
    OUT.flush()


def summary(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "min_s": xs[0], "median_s": statistics.median(xs),
            "p90_s": xs[min(len(xs) - 1, int(0.9 * len(xs)))], "mean_s": statistics.fmean(xs)}


def round_trip(dev: Any, pipe: Any, n: int, repeat: int, label: str, target: float | None,
               use_out: bool = False, staged: bool = False, readahead: bool = False) -> None:
    """Fresh input every iteration: upload n words, x2 kernel, read n words back (with
    ``readahead`` the dispatch's submission also copies the output out, as the host does for an
    output it has been reading back)."""
    import numpy as np
    from wagogpu.gpu import ExecutePlan
    from tests.gpu.kernels import grid, params

    a, b, s, u = dev.create_storage(n * 4), dev.create_storage(n * 4), dev.create_staging(n * 4), dev.create_uniform(16)
    rng = np.random.default_rng(n)
    inputs = [rng.integers(0, 2**31, n, dtype=np.uint32) for _ in range(2)]
    out = np.empty(n, np.uint32) if use_out else None
    totals, ups, comps, reads, devc = [], [], [], [], []
    bad = 0
    for it in range(repeat + 1):
        x = inputs[it % 2]
        plan = ExecutePlan(pipe, u, params(n), [a, b], [(a, 0, x)], [], grid(n), separate_stages=staged,
                           readahead=[b] if readahead else ())
        t0 = _perf()
        r = dev.execute(plan, 10.0)
        t1 = _perf()
        y = dev.read(b, s, n * 4, 10.0, out=out)
        t2 = _perf()
        if not np.array_equal(y, x * np.uint32(2)):  # checked outside the timer
            bad += 1
        if it == 0:
            emit(dev, {"bench": label, "phase": "cold", "elements": n, "total_s": t2 - t0,
                       "execute_s": t1 - t0, "read_s": t2 - t1, "ok": bad == 0})
            continue
        totals.append(t2 - t0)
        ups.append(r.upload_s)
        comps.append(r.compute_s)
        reads.append(t2 - t1)
        if r.device_compute_s is not None:
            devc.append(r.device_compute_s)
    rec = {"bench": label, "phase": "warm", "elements": n, "bytes_each_way": n * 4,
           "separate_stages": staged, "read_into_out": use_out, "readahead": readahead, "ok": bad == 0,
           "total": summary(totals), "upload_s_median": statistics.median(ups),
           "compute_s_median": statistics.median(comps), "read_s_median": statistics.median(reads),
           "device_compute_s_median": statistics.median(devc) if devc else None}
    if target is not None:
        rec["target_s"] = target
        rec["meets_target_median"] = rec["total"]["median_s"] <= target
    emit(dev, rec)
    for h in (a, b, s, u):
        dev.release(h)


def resident(dev: Any, pipe: Any, n: int, repeat: int, timestamps: bool) -> None:
    """Dispatch on buffers already on the device: no uploads, no params, no readback."""
    import numpy as np
    from wagogpu.gpu import ExecutePlan
    from tests.gpu.kernels import grid, params

    a, b, s, u = dev.create_storage(n * 4), dev.create_storage(n * 4), dev.create_staging(n * 4), dev.create_uniform(16)
    x = np.arange(n, dtype=np.uint32)
    dev.execute(ExecutePlan(pipe, u, params(n), [a, b], [(a, 0, x)], [], grid(n)), 10.0)
    plan = ExecutePlan(pipe, u, None, [a, b], [], [], grid(n), timestamps=timestamps)
    first = _perf()
    dev.execute(plan, 10.0)
    cold = _perf() - first
    ts, devc = [], []
    for _ in range(repeat):
        t0 = _perf()
        r = dev.execute(plan, 10.0)
        ts.append(_perf() - t0)
        if r.device_compute_s is not None:
            devc.append(r.device_compute_s)
    ok = bool(np.array_equal(dev.read(b, s, n * 4, 10.0), x * np.uint32(2)))
    target = 50e-6 if n <= 4096 else None
    emit(dev, {"bench": "resident_dispatch", "phase": "warm", "elements": n, "timestamps": timestamps,
               "first_s": cold, "total": summary(ts), "target_s": target,
               "meets_target_median": statistics.median(ts) <= target if target else None,
               "device_compute_s_median": statistics.median(devc) if devc else None, "ok": ok})
    for h in (a, b, s, u):
        dev.release(h)


def cold_open(root: str, kw: dict, times: int) -> None:
    """GpuDevice.open() in ``times`` fresh interpreters (what the first Host() pays)."""
    runs = []
    for _ in range(times):
        done = subprocess.run([sys.executable, "-c", _COLD, root, json.dumps(kw)], capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            emit(None, {"bench": "device_open_process", "phase": "cold", "ok": False,
                        "error": (done.stderr.strip().splitlines() or ["?"])[-1]})
            return
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    last = runs[-1]
    emit(None, {"bench": "device_open_process", "phase": "cold", "ok": True, "adapter": last["adapter"],
                "backend": last["backend"], "software": last["software"], "api": last["api"],
                "open": summary([r["open_s"] for r in runs]), "import": summary([r["import_s"] for r in runs])})


def _code(root: str) -> dict[str, Any]:
    """Which checkout is measured (its commit, and whether its tree has changes)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception:
            return ""
    return {"code_root": root, "code_commit": git("rev-parse", "--short", "HEAD"),
            "code_dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def measurements(dev: Any, pipe: Any, args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The warm figures, in the order they run: (label, measurement)."""
    small_rep = max(args.repeat * 10, 100)
    n = args.large
    return [
        ("round_trip_1024", lambda: round_trip(dev, pipe, 1024, small_rep, "round_trip_1024", 100e-6)),
        ("round_trip_1024 readahead",
         lambda: round_trip(dev, pipe, 1024, small_rep, "round_trip_1024", 100e-6, readahead=True)),
        ("resident 1024", lambda: resident(dev, pipe, 1024, small_rep, timestamps=False)),
        ("resident 1024 timestamps", lambda: resident(dev, pipe, 1024, small_rep, timestamps=True)),
        ("round_trip_large", lambda: round_trip(dev, pipe, n, args.repeat, "round_trip_large", 4e-3)),
        ("round_trip_large out=", lambda: round_trip(dev, pipe, n, args.repeat, "round_trip_large", 4e-3,
                                                     use_out=True)),
        *([] if args.quick else [("round_trip_large_stages", lambda: round_trip(
            dev, pipe, n, max(5, args.repeat // 3), "round_trip_large_stages", None, staged=True))]),
        ("resident large", lambda: resident(dev, pipe, n, args.repeat, timestamps=False)),
        ("resident large timestamps", lambda: resident(dev, pipe, n, args.repeat, timestamps=True)),
    ]


def main() -> int:
    global OUT, CODE
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--software", action="store_true", help="allow a software adapter (lavapipe)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--large", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="only the target figures (no profile-mode run)")
    ap.add_argument("--cold", type=int, default=3, help="fresh-process device opens to time (0: none)")
    ap.add_argument("--root", default=os.path.dirname(HERE), help="the checkout whose wagogpu is measured")
    ap.add_argument("--api", choices=["raw", "public"], help="force a backend (code that has the choice)")
    ap.add_argument("--out", help="also append the JSONL to this file")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    sys.path.insert(0, os.path.dirname(HERE))  # tests.gpu.kernels: the suite's doubling kernel
    sys.path.insert(0, root)  # ... and the wagogpu under test before it
    CODE = _code(root)
    if args.out:
        fh = open(args.out, "a")

        class Tee:
            def write(self, s: str) -> None:
                sys.stdout.write(s)
                fh.write(s)

            def flush(self) -> None:
                sys.stdout.flush()
                fh.flush()

        OUT = Tee()
    from wagogpu.gpu import GpuDevice, list_adapters
    from tests.gpu.kernels import WGSL_X2

    kw: dict[str, Any] = {"allow_software_adapter": args.software}
    if args.api:
        kw["api"] = args.api
    emit(None, {"bench": "adapters", "adapters": [a.summary() for a in list_adapters()]})
    if args.cold:
        cold_open(root, kw, args.cold)
    t0 = _perf()
    dev = GpuDevice.open(**kw)
    emit(dev, {"bench": "device_open", "phase": "cold_in_process", "open_s": dev.open_seconds, "wall_s": _perf() - t0,
               "has_timestamps": dev.has_timestamps,
               "max_storage_buffer_binding_size": dev.limits["max-storage-buffer-binding-size"],
               "max_buffer_size": dev.limits["max-buffer-size"]})
    t0 = _perf()
    pipe = dev.pipeline(WGSL_X2, [True, False])
    emit(dev, {"bench": "pipeline", "phase": "cold", "compile_s": _perf() - t0})
    t0 = _perf()
    dev.pipeline(WGSL_X2, [True, False])
    emit(dev, {"bench": "pipeline", "phase": "warm_cache_hit", "lookup_s": _perf() - t0})
    steps = measurements(dev, pipe, args)
    from examples.progress import Progress  # after the checkout's root is on sys.path

    with Progress(len(steps), "gpu_backend") as progress:
        for label, step in steps:
            progress.step(label)
            step()
    stats = dev.stats
    emit(dev, {"bench": "device_stats", **{k: getattr(stats, k) for k in stats.__dataclass_fields__}})
    dev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
