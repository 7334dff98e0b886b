"""Benchmark of the low-level GPU backend (wagogpu.gpu); prints JSONL.

Every record names the adapter.  Cold figures (device open, first pipeline,
first dispatch) are separate records from warm ones; results are checked
outside the timed region; a record on a software adapter says so.

    python bench/gpu_backend.py [--software] [--repeat N] [--micro] [--out FILE]

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
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wagogpu.gpu import ExecutePlan, GpuDevice, list_adapters  # noqa: E402
from wagogpu import memcopy as _copy  # noqa: E402
from wagogpu.gpu import device as devmod  # noqa: E402
from tests.gpu.kernels import WGSL_X2, grid, params  # noqa: E402,F401 (the test suite's doubling kernel)

_perf = time.perf_counter
OUT = sys.stdout


def emit(dev: GpuDevice | None, rec: dict) -> None:
    if dev is not None:
        rec = {"adapter": dev.info.name, "backend": dev.info.backend, "driver": dev.info.driver,
               "software": dev.info.is_software, **rec}
    OUT.write(json.dumps(rec) + "\n")
    OUT.flush()


def summary(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "min_s": xs[0], "median_s": statistics.median(xs),
            "p90_s": xs[min(len(xs) - 1, int(0.9 * len(xs)))], "mean_s": statistics.fmean(xs)}


def round_trip(dev: GpuDevice, pipe, n: int, repeat: int, label: str, target: float | None,
               use_out: bool = False, staged: bool = False, readahead: bool = False) -> None:
    """Fresh input every iteration: upload n words, x2 kernel, read n words back (with
    ``readahead`` the dispatch's submission also copies the output out, as the host does for an
    output it has been reading back)."""
    a = dev.create_storage(n * 4)
    b = dev.create_storage(n * 4)
    s = dev.create_staging(n * 4)
    u = dev.create_uniform(16)
    rng = np.random.default_rng(n)
    inputs = [rng.integers(0, 2**31, n, dtype=np.uint32) for _ in range(2)]
    out = np.empty(n, np.uint32) if use_out else None
    totals, ups, comps, reads, devc = [], [], [], [], []
    split: dict[str, list[float]] = {}
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
        for k, v in dev.last_upload_timing.items():
            split.setdefault("staging_" + k, []).append(v)
        ups.append(r.upload_s)
        comps.append(r.compute_s)
        reads.append(t2 - t1)
        if r.device_compute_s is not None:
            devc.append(r.device_compute_s)
    rec = {"bench": label, "phase": "warm", "elements": n, "bytes_each_way": n * 4,
           "separate_stages": staged, "read_into_out": use_out, "readahead": readahead, "ok": bad == 0,
           "total": summary(totals), "upload_s_median": statistics.median(ups),
           "compute_s_median": statistics.median(comps), "read_s_median": statistics.median(reads),
           "device_compute_s_median": statistics.median(devc) if devc else None,
           **{k + "_s_median": statistics.median(v) for k, v in split.items()}}
    if target is not None:
        rec["target_s"] = target
        rec["meets_target_median"] = rec["total"]["median_s"] <= target
    emit(dev, rec)
    for h in (a, b, s, u):
        dev.release(h)


def resident(dev: GpuDevice, pipe, n: int, repeat: int, timestamps: bool) -> None:
    """Dispatch on buffers already on the device: no uploads, no params, no readback."""
    a = dev.create_storage(n * 4)
    b = dev.create_storage(n * 4)
    s = dev.create_staging(n * 4)
    u = dev.create_uniform(16)
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


def micro(dev: GpuDevice) -> None:
    """Costs of the native building blocks, to see where a dispatch's time goes."""
    from wagogpu.gpu._native import ffi, lib

    D, Q = dev._D, dev._Q

    def bench(name: str, f, k: int = 2000) -> None:
        for _ in range(20):
            f()
        t = _perf()
        for _ in range(k):
            f()
        emit(dev, {"bench": "micro", "op": name, "each_s": (_perf() - t) / k})

    bench("poll_nonblocking", lambda: lib.wgpuDevicePoll(D, 0, ffi.NULL))
    bench("push_pop_two_scopes", lambda: (dev._push(), dev._pop()))

    def enc_finish() -> None:
        e = lib.wgpuDeviceCreateCommandEncoder(D, ffi.NULL)
        c = lib.wgpuCommandEncoderFinish(e, ffi.NULL)
        lib.wgpuCommandEncoderRelease(e)
        lib.wgpuCommandBufferRelease(c)

    bench("encoder_finish", enc_finish)

    def empty_submit_wait() -> None:
        e = lib.wgpuDeviceCreateCommandEncoder(D, ffi.NULL)
        c = lib.wgpuCommandEncoderFinish(e, ffi.NULL)
        lib.wgpuCommandEncoderRelease(e)
        dev._cmds[0] = c
        lib.wgpuQueueSubmit(Q, 1, dev._cmds)
        lib.wgpuCommandBufferRelease(c)
        while not lib.wgpuDevicePoll(D, 0, ffi.NULL):
            pass

    bench("empty_submit_and_poll_until_idle", empty_submit_wait, 500)
    for mb in (4, 40):
        n = mb << 20
        src = np.ones(n // 4, np.uint32)
        for threads in (1, 4, 8, 16):
            os.environ["WAGOGPU_COPY_THREADS"] = str(threads)
            ts = []
            for _ in range(10):
                dst = np.empty(n // 4, np.uint32)
                t = _perf()
                _copy.copy_bytes(dst.ctypes.data, src.ctypes.data, n)
                ts.append(_perf() - t)
            dst = np.empty(n // 4, np.uint32)
            dst[:] = 0
            t2 = []
            for _ in range(10):
                t = _perf()
                _copy.copy_bytes(dst.ctypes.data, src.ctypes.data, n)
                t2.append(_perf() - t)
            emit(dev, {"bench": "micro", "op": f"host_copy_{mb}MB", "threads": threads,
                       "fresh_dst_median_s": statistics.median(ts), "warm_dst_median_s": statistics.median(t2)})
        os.environ.pop("WAGOGPU_COPY_THREADS", None)


def upload_paths(dev: GpuDevice, pipe, n: int, repeat: int) -> None:
    """wgpuQueueWriteBuffer vs the mapped staging buffer for one large upload (separate stage timing)."""
    saved = devmod.QUEUE_WRITE_MAX
    a = dev.create_storage(n * 4)
    b = dev.create_storage(n * 4)
    u = dev.create_uniform(16)
    x = np.arange(n, dtype=np.uint32)
    for name, limit in (("queue_write_buffer", 1 << 40), ("mapped_staging", saved)):
        devmod.QUEUE_WRITE_MAX = limit
        ts = []
        for _ in range(repeat + 1):
            r = dev.execute(ExecutePlan(pipe, u, params(n), [a, b], [(a, 0, x)], [], grid(n),
                                        separate_stages=True), 10.0)
            ts.append(r.upload_s)
        emit(dev, {"bench": "upload_path", "path": name, "bytes": n * 4, "upload_stage": summary(ts[1:]),
                   "first_s": ts[0]})
    devmod.QUEUE_WRITE_MAX = saved
    for h in (a, b, u):
        dev.release(h)


def main() -> int:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--software", action="store_true", help="allow a software adapter (lavapipe)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--large", type=int, default=10_000_000)
    ap.add_argument("--micro", action="store_true", help="also print native building-block costs")
    ap.add_argument("--quick", action="store_true", help="only the target figures (no profile-mode or micro)")
    ap.add_argument("--out", help="also append the JSONL to this file")
    args = ap.parse_args()
    if args.out:
        fh = open(args.out, "a")

        class Tee:
            def write(self, s: str) -> None:
                sys.stdout.write(s)
                fh.write(s)

            def flush(self) -> None:
                sys.stdout.flush()
                fh.flush()

        OUT = Tee()  # type: ignore[assignment]
    emit(None, {"bench": "adapters", "adapters": [a.summary() for a in list_adapters()]})
    t0 = _perf()
    dev = GpuDevice.open(allow_software_adapter=args.software)
    emit(dev, {"bench": "device_open", "phase": "cold", "open_s": dev.open_seconds, "wall_s": _perf() - t0,
               "has_timestamps": dev.has_timestamps,
               "max_storage_buffer_binding_size": dev.limits["max-storage-buffer-binding-size"],
               "max_buffer_size": dev.limits["max-buffer-size"], "copy_threads": _copy.copy_threads()})
    t0 = _perf()
    pipe = dev.pipeline(WGSL_X2, [True, False])
    emit(dev, {"bench": "pipeline", "phase": "cold", "compile_s": _perf() - t0})
    t0 = _perf()
    dev.pipeline(WGSL_X2, [True, False])
    emit(dev, {"bench": "pipeline", "phase": "warm_cache_hit", "lookup_s": _perf() - t0})
    if args.micro:
        micro(dev)
    small_rep = max(args.repeat * 10, 100)
    round_trip(dev, pipe, 1024, small_rep, "round_trip_1024", 100e-6)
    round_trip(dev, pipe, 1024, small_rep, "round_trip_1024", 100e-6, readahead=True)
    resident(dev, pipe, 1024, small_rep, timestamps=False)
    resident(dev, pipe, 1024, small_rep, timestamps=True)
    n = args.large
    round_trip(dev, pipe, n, args.repeat, "round_trip_large", 4e-3)
    round_trip(dev, pipe, n, args.repeat, "round_trip_large", 4e-3, use_out=True)
    if not args.quick:
        round_trip(dev, pipe, n, max(5, args.repeat // 3), "round_trip_large_stages", None, staged=True)
    resident(dev, pipe, n, args.repeat, timestamps=False)
    resident(dev, pipe, n, args.repeat, timestamps=True)
    if args.micro:
        upload_paths(dev, pipe, n, max(5, args.repeat // 3))
    stats = dev.stats
    emit(dev, {"bench": "device_stats", **{k: getattr(stats, k) for k in stats.__dataclass_fields__}})
    dev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
