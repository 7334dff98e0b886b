"""Where does a GPU round trip spend its time?  Breakdowns behind wagogpu.gpu's design; prints JSONL.

Not a regression benchmark (see gpu_backend.py): it pokes at the device's
internals to time each native step of a readback and an upload, compares
host copy thread counts, and tries chunked (pipelined) transfers.

    python bench/gpu_explore.py [--software]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from wagogpu.gpu import ExecutePlan, GpuDevice  # noqa: E402
from wagogpu import memcopy as _copy  # noqa: E402
from wagogpu.gpu import _native as nat, device as devmod  # noqa: E402
from wagogpu.gpu._native import ffi, lib  # noqa: E402
from tests.gpu.kernels import WGSL_X2, grid, params  # noqa: E402

_perf = time.perf_counter
NULL = ffi.NULL


def emit(dev: GpuDevice, rec: dict) -> None:
    print(json.dumps({"adapter": dev.info.name, "driver": dev.info.driver, **rec}), flush=True)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def x2_rig(dev: GpuDevice, n: int, staging: bool = False) -> tuple:
    """The doubling pipeline, an input, an output and the uniform of n words (and a readback staging)."""
    bufs = [dev.create_storage(n * 4), dev.create_storage(n * 4), dev.create_uniform()]
    if staging:
        bufs.append(dev.create_staging(n * 4))
    return dev.pipeline(WGSL_X2, [True, False]), bufs


def submit_copy(dev: GpuDevice, src, sof: int, dst, dof: int, n: int) -> None:
    e = lib.wgpuDeviceCreateCommandEncoder(dev._D, NULL)
    lib.wgpuCommandEncoderCopyBufferToBuffer(e, src, sof, dst, dof, n)
    c = lib.wgpuCommandEncoderFinish(e, NULL)
    lib.wgpuCommandEncoderRelease(e)
    dev._cmds[0] = c
    lib.wgpuQueueSubmit(dev._Q, 1, dev._cmds)
    lib.wgpuCommandBufferRelease(c)


def wait_cells(dev: GpuDevice, cells) -> None:
    while True:
        lib.wgpuDevicePoll(dev._D, 0, NULL)
        if all(c.status for c in cells):
            return


def readback_breakdown(dev: GpuDevice, nbytes: int, reps: int) -> None:
    src = dev.create_storage(nbytes)
    st = dev.create_staging(nbytes)
    dev.write(src, 0, np.arange(nbytes // 4, dtype=np.uint32))
    out = np.empty(nbytes // 4, np.uint32)
    out[:] = 1
    rows: dict[str, list[float]] = {k: [] for k in ("submit", "ready", "copy", "unmap", "total")}
    for i in range(reps + 2):
        t0 = _perf()
        submit_copy(dev, src._ptr, 0, st._ptr, 0, nbytes)
        cell, info = nat.map_callback_info()
        lib.wgpuBufferMapAsync(st._ptr, nat.MAP_READ, 0, nbytes, info[0])
        t1 = _perf()
        wait_cells(dev, [cell])
        t2 = _perf()
        p = lib.wgpuBufferGetConstMappedRange(st._ptr, 0, nbytes)
        _copy.copy_bytes(out.ctypes.data, int(ffi.cast("uintptr_t", p)), nbytes)
        t3 = _perf()
        lib.wgpuBufferUnmap(st._ptr)
        t4 = _perf()
        if i >= 2:
            for k, v in zip(rows, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                rows[k].append(v)
    assert out[-1] == nbytes // 4 - 1
    emit(dev, {"bench": "readback_breakdown", "bytes": nbytes, **{k + "_s": med(v) for k, v in rows.items()}})
    # Same, but blocking poll instead of spinning (lower latency? it cannot time out).
    ts = []
    for i in range(reps):
        t0 = _perf()
        submit_copy(dev, src._ptr, 0, st._ptr, 0, nbytes)
        cell, info = nat.map_callback_info()
        lib.wgpuBufferMapAsync(st._ptr, nat.MAP_READ, 0, nbytes, info[0])
        lib.wgpuDevicePoll(dev._D, 1, NULL)
        while not cell.status:
            lib.wgpuDevicePoll(dev._D, 0, NULL)
        ts.append(_perf() - t0)
        lib.wgpuBufferUnmap(st._ptr)
    emit(dev, {"bench": "readback_blocking_poll", "bytes": nbytes, "submit_to_mapped_s": med(ts)})
    dev.release(src)
    dev.release(st)


def fine_read_path(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """Median cost of every native step of a small readback."""
    src = dev.create_storage(nbytes)
    st = dev.create_staging(nbytes)
    out = np.empty(nbytes // 4, np.uint32)
    names = ["create_encoder", "copy_cmd", "finish", "release_encoder", "submit", "release_cmd",
             "callback_info", "map_async", "poll_until_mapped", "polls", "const_range", "memmove", "unmap"]
    rows: dict[str, list[float]] = {k: [] for k in names}
    for i in range(reps + 5):
        t = [_perf()]
        e = lib.wgpuDeviceCreateCommandEncoder(dev._D, NULL); t.append(_perf())
        lib.wgpuCommandEncoderCopyBufferToBuffer(e, src._ptr, 0, st._ptr, 0, nbytes); t.append(_perf())
        c = lib.wgpuCommandEncoderFinish(e, NULL); t.append(_perf())
        lib.wgpuCommandEncoderRelease(e); t.append(_perf())
        dev._cmds[0] = c
        lib.wgpuQueueSubmit(dev._Q, 1, dev._cmds); t.append(_perf())
        lib.wgpuCommandBufferRelease(c); t.append(_perf())
        cell, info = nat.map_callback_info(); t.append(_perf())
        lib.wgpuBufferMapAsync(st._ptr, nat.MAP_READ, 0, nbytes, info[0]); t.append(_perf())
        polls = 0
        while not cell.status:
            lib.wgpuDevicePoll(dev._D, 0, NULL)
            polls += 1
        t.append(_perf())
        t.append(t[-1])
        p = lib.wgpuBufferGetConstMappedRange(st._ptr, 0, nbytes); t.append(_perf())
        ffi.memmove(out, p, nbytes); t.append(_perf())
        lib.wgpuBufferUnmap(st._ptr); t.append(_perf())
        if i >= 5:
            for k, name in enumerate(names):
                rows[name].append(polls if name == "polls" else t[k + 1] - t[k])
    emit(dev, {"bench": "fine_read_path", "bytes": nbytes, **{k: med(v) for k, v in rows.items()},
               "sum_s": sum(med(v) for k, v in rows.items() if k != "polls")})
    dev.release(src)
    dev.release(st)


def fine_dispatch_path(dev: GpuDevice, reps: int) -> None:
    """Median cost of every native step of a resident dispatch (plus a 16-byte queue write)."""
    n = 1024
    pipe, (a, b, u) = x2_rig(dev, n)
    bg = dev._bind_group(pipe, u, [a, b])
    prm = params(n)
    for with_write in (False, True):
        names = ["queue_write16", "create_encoder", "begin_pass", "set_pipeline", "set_bind_group", "dispatch",
                 "end_pass", "release_pass", "finish", "release_encoder", "submit", "release_cmd",
                 "fence_info", "work_done", "poll_until_done", "polls"]
        rows: dict[str, list[float]] = {k: [] for k in names}
        for i in range(reps + 5):
            t = [_perf()]
            if with_write:
                lib.wgpuQueueWriteBuffer(dev._Q, u._ptr, 0, prm, 16)
            t.append(_perf())
            e = lib.wgpuDeviceCreateCommandEncoder(dev._D, NULL); t.append(_perf())
            cp = lib.wgpuCommandEncoderBeginComputePass(e, dev._pass_desc); t.append(_perf())
            lib.wgpuComputePassEncoderSetPipeline(cp, pipe._ptr); t.append(_perf())
            lib.wgpuComputePassEncoderSetBindGroup(cp, 0, bg, 0, NULL); t.append(_perf())
            lib.wgpuComputePassEncoderDispatchWorkgroups(cp, 4, 1, 1); t.append(_perf())
            lib.wgpuComputePassEncoderEnd(cp); t.append(_perf())
            lib.wgpuComputePassEncoderRelease(cp); t.append(_perf())
            c = lib.wgpuCommandEncoderFinish(e, NULL); t.append(_perf())
            lib.wgpuCommandEncoderRelease(e); t.append(_perf())
            dev._cmds[0] = c
            lib.wgpuQueueSubmit(dev._Q, 1, dev._cmds); t.append(_perf())
            lib.wgpuCommandBufferRelease(c); t.append(_perf())
            cell, info = nat.work_done_callback_info(); t.append(_perf())
            lib.wgpuQueueOnSubmittedWorkDone(dev._Q, info[0]); t.append(_perf())
            polls = 0
            while not cell.status:
                lib.wgpuDevicePoll(dev._D, 0, NULL)
                polls += 1
            t.append(_perf())
            t.append(t[-1])
            if i >= 5:
                for k, name in enumerate(names):
                    rows[name].append(polls if name == "polls" else t[k + 1] - t[k])
        emit(dev, {"bench": "fine_dispatch_path", "queue_write": with_write, **{k: med(v) for k, v in rows.items()},
                   "sum_s": sum(med(v) for k, v in rows.items() if k != "polls")})
    # The same dispatch through GpuDevice.execute, for the Python overhead on top.
    for qmax in (devmod.QUEUE_WRITE_MAX, 0):
        saved = devmod.QUEUE_WRITE_MAX
        devmod.QUEUE_WRITE_MAX = qmax
        x = np.arange(n, dtype=np.uint32)
        plans = {"resident": ExecutePlan(pipe, u, None, [a, b], [], [], grid(n)),
                 "params": ExecutePlan(pipe, u, prm, [a, b], [], [], grid(n)),
                 "params_upload4k": ExecutePlan(pipe, u, prm, [a, b], [(a, 0, x)], [], grid(n))}
        for name, plan in plans.items():
            ts = []
            for i in range(reps + 5):
                t0 = _perf()
                dev.execute(plan, 5.0)
                if i >= 5:
                    ts.append(_perf() - t0)
            emit(dev, {"bench": "execute_small", "plan": name, "queue_write_max": qmax, "total_s": med(ts)})
        devmod.QUEUE_WRITE_MAX = saved
    for h in (a, b, u):
        dev.release(h)


def real_read_timing(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """GpuDevice.read itself, with its internal phase split (dev.last_read_timing)."""
    src = dev.create_storage(nbytes)
    st = dev.create_staging(nbytes)
    out = np.empty(nbytes // 4, np.uint32)
    out[:] = 0
    for use_out in (True, False):
        rows: dict[str, list[float]] = {}
        tot = []
        for i in range(reps + 2):
            t0 = _perf()
            dev.read(src, st, nbytes, 5.0, out=out if use_out else None)
            if i >= 2:
                tot.append(_perf() - t0)
                for k, v in dev.last_read_timing.items():
                    rows.setdefault(k, []).append(v)
        emit(dev, {"bench": "real_read", "bytes": nbytes, "out": use_out, "total_s": med(tot),
                   **{k + "_s": med(v) for k, v in rows.items()}})
    dev.release(src)
    dev.release(st)


def big_paths(dev: GpuDevice, n: int, reps: int) -> None:
    """10M round trip variants: read split parts, profile mode, with the internal phase splits."""
    pipe, (a, b, u, s) = x2_rig(dev, n, staging=True)
    x = np.arange(n, dtype=np.uint32)
    out = np.empty(n, np.uint32)
    out[:] = 0
    saved = devmod.READ_SPLIT_PARTS
    for staged in (False, True):
        for parts in ((1, 2, 3, 4) if not staged else (2,)):
            devmod.READ_SPLIT_PARTS = parts
            rows: dict[str, list[float]] = {}
            for i in range(reps + 2):
                t0 = _perf()
                r = dev.execute(ExecutePlan(pipe, u, params(n), [a, b], [(a, 0, x)], [], grid(n),
                                            separate_stages=staged), 10.0)
                t1 = _perf()
                dev.read(b, s, n * 4, 10.0, out=out)
                t2 = _perf()
                if i >= 2:
                    vals = {"total": t2 - t0, "execute": t1 - t0, "read": t2 - t1, "upload_s": r.upload_s,
                            "compute_s": r.compute_s,
                            **{"up_" + k: v for k, v in dev.last_upload_timing.items()},
                            **{"rd_" + k: v for k, v in dev.last_read_timing.items()}}
                    for k, v in vals.items():
                        rows.setdefault(k, []).append(v)
            assert out[5] == 10
            emit(dev, {"bench": "big_paths", "elements": n, "staged": staged, "read_parts": parts,
                       **{k: med(v) for k, v in rows.items()}})
    devmod.READ_SPLIT_PARTS = saved
    for h in (a, b, u, s):
        dev.release(h)


def chunked_readback(dev: GpuDevice, nbytes: int, parts: int, reps: int) -> None:
    """Separate submissions per chunk into separate staging buffers, copy out as each lands."""
    src = dev.create_storage(nbytes)
    dev.write(src, 0, np.arange(nbytes // 4, dtype=np.uint32))
    chunk = nbytes // parts
    sts = [dev.create_staging(chunk) for _ in range(parts)]
    out = np.empty(nbytes // 4, np.uint32)
    out[:] = 1
    ts = []
    for i in range(reps + 2):
        t0 = _perf()
        cells = []
        for k in range(parts):
            submit_copy(dev, src._ptr, k * chunk, sts[k]._ptr, 0, chunk)
            cell, info = nat.map_callback_info()
            lib.wgpuBufferMapAsync(sts[k]._ptr, nat.MAP_READ, 0, chunk, info[0])
            cells.append(cell)
        base = out.ctypes.data
        for k in range(parts):
            wait_cells(dev, [cells[k]])
            p = lib.wgpuBufferGetConstMappedRange(sts[k]._ptr, 0, chunk)
            _copy.copy_bytes(base + k * chunk, int(ffi.cast("uintptr_t", p)), chunk)
            lib.wgpuBufferUnmap(sts[k]._ptr)
        if i >= 2:
            ts.append(_perf() - t0)
    assert np.array_equal(out, np.arange(nbytes // 4, dtype=np.uint32))
    emit(dev, {"bench": "chunked_readback", "bytes": nbytes, "parts": parts, "total_s": med(ts)})
    dev.release(src)
    for s in sts:
        dev.release(s)


def upload_breakdown(dev: GpuDevice, nbytes: int, reps: int) -> None:
    dst = dev.create_storage(nbytes)
    x = np.arange(nbytes // 4, dtype=np.uint32)
    for usage_name, usage in (("MAP_WRITE|COPY_SRC", nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC),):
        ptr = dev._raw_buffer(nbytes, usage, mapped=True)
        for threads in (1, 4, 8, 16):
            os.environ["WAGOGPU_COPY_THREADS"] = str(threads)
            rows: dict[str, list[float]] = {"memcpy": [], "unmap": [], "gpu_copy": [], "remap": []}
            for i in range(reps + 1):
                t0 = _perf()
                p = lib.wgpuBufferGetMappedRange(ptr, 0, nbytes)
                _copy.copy_bytes(int(ffi.cast("uintptr_t", p)), x.ctypes.data, nbytes)
                t1 = _perf()
                lib.wgpuBufferUnmap(ptr)
                t2 = _perf()
                submit_copy(dev, ptr, 0, dst._ptr, 0, nbytes)
                while not lib.wgpuDevicePoll(dev._D, 0, NULL):
                    pass
                t3 = _perf()
                cell, info = nat.map_callback_info()
                lib.wgpuBufferMapAsync(ptr, nat.MAP_WRITE, 0, nbytes, info[0])
                wait_cells(dev, [cell])
                t4 = _perf()
                if i:
                    for k, v in zip(rows, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                        rows[k].append(v)
            emit(dev, {"bench": "upload_breakdown", "usage": usage_name, "bytes": nbytes, "threads": threads,
                       **{k + "_s": med(v) for k, v in rows.items()},
                       "memcpy_GBps": nbytes / med(rows["memcpy"]) / 1e9})
        os.environ.pop("WAGOGPU_COPY_THREADS", None)
        dev._free_raw_buffer(ptr)
    dev.release(dst)


def chunked_upload(dev: GpuDevice, nbytes: int, parts: int, reps: int) -> None:
    dst = dev.create_storage(nbytes)
    x = np.arange(nbytes // 4, dtype=np.uint32)
    chunk = nbytes // parts
    ptrs = [dev._raw_buffer(chunk, nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC, mapped=True) for _ in range(parts)]
    ts = []
    for i in range(reps + 1):
        t0 = _perf()
        cells = []
        for k in range(parts):
            p = lib.wgpuBufferGetMappedRange(ptrs[k], 0, chunk)
            _copy.copy_bytes(int(ffi.cast("uintptr_t", p)), x.ctypes.data + k * chunk, chunk)
            lib.wgpuBufferUnmap(ptrs[k])
            submit_copy(dev, ptrs[k], 0, dst._ptr, k * chunk, chunk)
            cell, info = nat.map_callback_info()
            lib.wgpuBufferMapAsync(ptrs[k], nat.MAP_WRITE, 0, chunk, info[0])
            cells.append(cell)
        wait_cells(dev, cells)
        while not lib.wgpuDevicePoll(dev._D, 0, NULL):
            pass
        if i:
            ts.append(_perf() - t0)
    emit(dev, {"bench": "chunked_upload", "bytes": nbytes, "parts": parts, "total_s": med(ts)})
    for p in ptrs:
        dev._free_raw_buffer(p)
    dev.release(dst)


def small_paths(dev: GpuDevice, reps: int) -> None:
    n = 1024
    pipe, (a, b, u, s) = x2_rig(dev, n, staging=True)
    x = np.arange(n, dtype=np.uint32)
    for scopes in (False, True):
        devmod.HOT_PATH_SCOPES = scopes
        for ts_on in (False, True):
            plan = ExecutePlan(pipe, u, params(n), [a, b], [(a, 0, x)], [], grid(n), timestamps=ts_on)
            rplan = ExecutePlan(pipe, u, None, [a, b], [], [], grid(n), timestamps=ts_on)
            rows: dict[str, list[float]] = {"resident": [], "upload_exec": [], "read": []}
            for i in range(reps + 5):
                t0 = _perf()
                dev.execute(rplan, 5.0)
                t1 = _perf()
                dev.execute(plan, 5.0)
                t2 = _perf()
                dev.read(b, s, n * 4, 5.0)
                t3 = _perf()
                if i >= 5:
                    for k, v in zip(rows, (t1 - t0, t2 - t1, t3 - t2)):
                        rows[k].append(v)
            emit(dev, {"bench": "small_paths", "hot_path_scopes": scopes, "timestamps": ts_on,
                       **{k + "_s": med(v) for k, v in rows.items()}})
    devmod.HOT_PATH_SCOPES = False
    for h in (a, b, u, s):
        dev.release(h)


def wait_modes(dev: GpuDevice, reps: int) -> None:
    """A resident 1,024-element dispatch: spin on non-blocking polls against one blocking poll."""
    n = 1024
    pipe, (a, b, u) = x2_rig(dev, n)
    bg = dev._bind_group(pipe, u, [a, b])
    gx, gy = grid(n)
    for mode in ("spin", "blocking", "empty_spin", "empty_blocking"):
        ts = []
        for i in range(reps + 5):
            t0 = _perf()
            e = lib.wgpuDeviceCreateCommandEncoder(dev._D, NULL)
            if not mode.startswith("empty"):
                cp = lib.wgpuCommandEncoderBeginComputePass(e, dev._pass_desc)
                lib.wgpuComputePassEncoderSetPipeline(cp, pipe._ptr)
                lib.wgpuComputePassEncoderSetBindGroup(cp, 0, bg, 0, NULL)
                lib.wgpuComputePassEncoderDispatchWorkgroups(cp, gx, gy, 1)
                lib.wgpuComputePassEncoderEnd(cp)
                lib.wgpuComputePassEncoderRelease(cp)
            c = lib.wgpuCommandEncoderFinish(e, NULL)
            lib.wgpuCommandEncoderRelease(e)
            dev._cmds[0] = c
            lib.wgpuQueueSubmit(dev._Q, 1, dev._cmds)
            lib.wgpuCommandBufferRelease(c)
            cell, info = nat.work_done_callback_info()
            lib.wgpuQueueOnSubmittedWorkDone(dev._Q, info[0])
            if mode.endswith("blocking"):
                lib.wgpuDevicePoll(dev._D, 1, NULL)
            while not cell.status:
                lib.wgpuDevicePoll(dev._D, 0, NULL)
            if i >= 5:
                ts.append(_perf() - t0)
        emit(dev, {"bench": "wait_modes", "mode": mode, "median_s": med(ts), "min_s": min(ts)})
    for h in (a, b, u):
        dev.release(h)


def memcpy_threads(nbytes: int, reps: int) -> None:
    """Host memcpy bandwidth between warm arrays by thread count (no GPU involved)."""
    src = np.ones(nbytes, np.uint8)
    dst = np.zeros(nbytes, np.uint8)
    for threads in (1, 2, 4, 6, 8, 12, 16):
        ts = []
        for i in range(reps + 2):
            t0 = _perf()
            _copy.copy_bytes(dst.ctypes.data, src.ctypes.data, nbytes, threads)
            if i >= 2:
                ts.append(_perf() - t0)
        print(json.dumps({"bench": "memcpy_threads", "bytes": nbytes, "threads": threads,
                          "median_s": med(ts), "gb_per_s": nbytes / med(ts) / 1e9}), flush=True)


def dual_copy(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """A set that also pre-stages its upload: guest -> CPU copy (host memory) and guest -> mapped
    upload staging (VRAM through the BAR), one after the other and at once."""
    src = np.arange(nbytes // 4, dtype=np.uint32)
    cpu = np.zeros(nbytes // 4, np.uint32)
    ptr = dev._raw_buffer(nbytes, nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC, mapped=True)
    bar = int(ffi.cast("uintptr_t", lib.wgpuBufferGetMappedRange(ptr, 0, nbytes)))
    jobs = {"cpu_only": [(cpu.ctypes.data, src.ctypes.data, nbytes, 8)],
            "bar_only": [(bar, src.ctypes.data, nbytes, 8)],
            "both_at_once": [(cpu.ctypes.data, src.ctypes.data, nbytes, 8), (bar, src.ctypes.data, nbytes, 8)],
            "both_at_once_4_4": [(cpu.ctypes.data, src.ctypes.data, nbytes, 4), (bar, src.ctypes.data, nbytes, 4)],
            "both_at_once_8_4": [(cpu.ctypes.data, src.ctypes.data, nbytes, 8), (bar, src.ctypes.data, nbytes, 4)]}
    rows: dict[str, list[float]] = {}

    def fused(threads: int, chunk: int) -> None:
        """Each thread copies its range a chunk at a time: guest -> CPU copy, then that chunk (now
        in cache) -> BAR, so the guest bytes are read from memory once."""
        per = (nbytes // threads + 4095) & ~4095
        c_dst, s_ptr = cpu.ctypes.data, src.ctypes.data

        def part(lo: int, hi: int) -> None:
            for off in range(lo, hi, chunk):
                n = min(chunk, hi - off)
                ctypes.memmove(c_dst + off, s_ptr + off, n)
                ctypes.memmove(bar + off, c_dst + off, n)

        pool = _copy._get_pool()
        futures = [pool.submit(part, lo, min(lo + per, nbytes)) for lo in range(per, nbytes, per)]
        part(0, min(per, nbytes))
        for f in futures:
            f.result()

    for threads, chunk in ((8, 256 << 10), (8, 1 << 20), (16, 256 << 10), (4, 256 << 10)):
        jobs[f"fused_{threads}_{chunk >> 10}k"] = (threads, chunk)
    flush = np.ones(64 << 20, np.uint32)  # 256 MB: rewritten before each "_cold" run to evict the source
    for i in range(reps + 2):
        for cold in (False, True):
            for name, job in jobs.items():
                if cold:
                    src += 1
                    flush += 1
                t0 = _perf()
                if isinstance(job, tuple):
                    fused(*job)
                else:
                    _copy.copy_many(job)
                if i >= 2:
                    rows.setdefault(name + ("_cold" if cold else ""), []).append(_perf() - t0)
        t0 = _perf()
        _copy.copy_many(jobs["cpu_only"])
        _copy.copy_many(jobs["bar_only"])
        if i >= 2:
            rows.setdefault("one_after_other", []).append(_perf() - t0)
    assert np.array_equal(cpu, src)
    emit(dev, {"bench": "dual_copy", "bytes": nbytes, **{k + "_s": med(v) for k, v in rows.items()}})
    lib.wgpuBufferUnmap(ptr)
    dev._free_raw_buffer(ptr)


def readback_touch(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """Copy-out of a fresh mapping twice (first touch of the mapped pages vs warm), and a copy-out
    that overlaps the next readback's DMA (does the DMA slow the host copy?)."""
    src = dev.create_storage(nbytes)
    dev.write(src, 0, np.arange(nbytes // 4, dtype=np.uint32))
    sts = [dev.create_staging(nbytes), dev.create_staging(nbytes)]
    out = np.ones(nbytes // 4, np.uint32)
    rows: dict[str, list[float]] = {}
    for i in range(reps + 2):
        submit_copy(dev, src._ptr, 0, sts[0]._ptr, 0, nbytes)
        cell, info = nat.map_callback_info()
        lib.wgpuBufferMapAsync(sts[0]._ptr, nat.MAP_READ, 0, nbytes, info[0])
        t0 = _perf()
        wait_cells(dev, [cell])
        t1 = _perf()
        p = int(ffi.cast("uintptr_t", lib.wgpuBufferGetConstMappedRange(sts[0]._ptr, 0, nbytes)))
        _copy.copy_bytes(out.ctypes.data, p, nbytes)
        t2 = _perf()
        _copy.copy_bytes(out.ctypes.data, p, nbytes)
        t3 = _perf()
        # Now the same copy-out while a second 40 MB DMA runs.
        submit_copy(dev, src._ptr, 0, sts[1]._ptr, 0, nbytes)
        cell2, info2 = nat.map_callback_info()
        lib.wgpuBufferMapAsync(sts[1]._ptr, nat.MAP_READ, 0, nbytes, info2[0])
        t4 = _perf()
        _copy.copy_bytes(out.ctypes.data, p, nbytes)
        t5 = _perf()
        wait_cells(dev, [cell2])
        t6 = _perf()
        lib.wgpuBufferUnmap(sts[0]._ptr)
        lib.wgpuBufferUnmap(sts[1]._ptr)
        if i >= 2:
            for k, v in (("dma_wait", t1 - t0), ("copy_first_touch", t2 - t1), ("copy_warm", t3 - t2),
                         ("copy_during_dma", t5 - t4), ("dma_with_copy", t6 - t4)):
                rows.setdefault(k, []).append(v)
    assert out[-1] == nbytes // 4 - 1
    emit(dev, {"bench": "readback_touch", "bytes": nbytes, **{k + "_s": med(v) for k, v in rows.items()}})
    dev.release(src)
    for s in sts:
        dev.release(s)


def map_cycles(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """Does each map of a big mapped buffer cost a fresh mapping (page faults on first touch, an
    mmap/munmap per cycle)? The same bytes as one buffer and as several smaller ones: map wait,
    copy out right after the map (first touch), the same copy again (warm), unmap; and the write
    side through MAP_WRITE upload buffers."""
    src = dev.create_storage(nbytes)
    dev.write(src, 0, np.arange(nbytes // 4, dtype=np.uint32))
    out = np.ones(nbytes // 4, np.uint32)
    for parts in (1, 3, 5, 10):
        size = (nbytes // parts + 4095) & ~4095
        pieces = [(off, min(size, nbytes - off)) for off in range(0, nbytes, size)]
        reads = [dev._raw_buffer(n, nat.USAGE_MAP_READ | nat.USAGE_COPY_DST) for _, n in pieces]
        writes = [dev._raw_buffer(n, nat.USAGE_MAP_WRITE | nat.USAGE_COPY_SRC, mapped=True) for _, n in pieces]
        rows: dict[str, list[float]] = {}

        def cycle(side: str, bufs: list, mode: int, mapped_range, to_host: bool, remap: bool) -> None:
            """Map every piece (unless it is still mapped from creation), copy twice, unmap."""
            t0 = _perf()
            if remap:
                cells = []
                for (_, n), buf in zip(pieces, bufs):
                    cell, info = nat.map_callback_info()
                    lib.wgpuBufferMapAsync(buf, mode, 0, n, info[0])
                    cells.append((cell, info))
                wait_cells(dev, [c for c, _ in cells])
            t1 = _perf()
            ptrs = [int(ffi.cast("uintptr_t", mapped_range(buf, 0, n))) for (_, n), buf in zip(pieces, bufs)]
            jobs = [(out.ctypes.data + off, p, n, 8) if to_host else (p, out.ctypes.data + off, n, 8)
                    for (off, n), p in zip(pieces, ptrs)]
            _copy.copy_many(jobs)
            t2 = _perf()
            _copy.copy_many(jobs)
            t3 = _perf()
            for buf in bufs:
                lib.wgpuBufferUnmap(buf)
            if measured:
                for k, v in (("map_wait", t1 - t0), ("copy_first_touch", t2 - t1), ("copy_warm", t3 - t2),
                             ("unmap", _perf() - t3)):
                    rows.setdefault(f"{side}_{k}", []).append(v)

        for i in range(reps + 2):
            measured = i >= 2
            for (off, n), buf in zip(pieces, reads):
                submit_copy(dev, src._ptr, off, buf, 0, n)
            cycle("read", reads, nat.MAP_READ, lib.wgpuBufferGetConstMappedRange, True, True)
            # The write buffers start mapped (from creation); later rounds map them again.
            cycle("write", writes, nat.MAP_WRITE, lib.wgpuBufferGetMappedRange, False, i > 0)
        assert out[-1] == nbytes // 4 - 1
        emit(dev, {"bench": "map_cycles", "bytes": nbytes, "parts": len(pieces),
                   **{k + "_s": med(v) for k, v in rows.items()}})
        for buf in reads + writes:
            dev._free_raw_buffer(buf)
    dev.release(src)


def alloc_costs(dev: GpuDevice, nbytes: int, reps: int) -> None:
    """What re-creating a buffer costs: create, first use, release, for each kind (40 MB)."""
    src = dev.create_storage(nbytes)
    dev.write(src, 0, np.arange(nbytes // 4, dtype=np.uint32))
    warm = dev.create_staging(nbytes)
    rows: dict[str, list[float]] = {}
    for i in range(reps + 1):
        t0 = _perf()
        st = dev.create_staging(nbytes)
        t1 = _perf()
        dev.read_mapped(src, st, nbytes, 10.0)
        t2 = _perf()
        dev.release(st)
        t3 = _perf()
        dev.read_mapped(src, warm, nbytes, 10.0)
        t4 = _perf()
        dev.unmap(warm)
        t5 = _perf()
        sto = dev.create_storage(nbytes)
        t6 = _perf()
        lib.wgpuDevicePoll(dev._D, 1, NULL)
        dev.release(sto)
        t7 = _perf()
        sg = dev.stage(nbytes)
        t8 = _perf()
        dev._lock.acquire()
        dev._free_stage(sg)
        dev._lock.release()
        t9 = _perf()
        if i:
            for k, v in (("staging_create", t1 - t0), ("staging_first_read_mapped", t2 - t1),
                         ("staging_release", t3 - t2), ("staging_warm_read_mapped", t4 - t3),
                         ("storage_create", t6 - t5), ("storage_release", t7 - t6),
                         ("stage_create_mapped", t8 - t7), ("stage_release", t9 - t8)):
                rows.setdefault(k, []).append(v)
    emit(dev, {"bench": "alloc_costs", "bytes": nbytes, **{k + "_s": med(v) for k, v in rows.items()}})
    dev.release(src)
    dev.release(warm)


def stage_execute(dev: GpuDevice, n: int, reps: int) -> None:
    """Where a 10M dispatch with a prestaged input spends its time: execute with the input already
    resident, with a stage upload, with an array upload; ExecuteResult's phase split."""
    pipe, (a, b, u) = x2_rig(dev, n)
    x = np.arange(n, dtype=np.uint32)
    rows: dict[str, list[float]] = {}
    for i in range(reps + 2):
        for mode in ("resident", "stage", "array"):
            uploads = []
            if mode == "stage":
                sg = dev.stage(n * 4)
                ffi.memmove(ffi.cast("char *", sg.address), ffi.from_buffer(x), n * 4)
                uploads = [(a, 0, sg)]
            elif mode == "array":
                uploads = [(a, 0, x)]
            t0 = _perf()
            r = dev.execute(ExecutePlan(pipe, u, params(n), [a, b], uploads, [], grid(n)), 10.0)
            t1 = _perf()
            if i >= 2:
                for k, v in (("total", t1 - t0), ("upload_s", r.upload_s), ("compute_s", r.compute_s)):
                    rows.setdefault(f"{mode}_{k}", []).append(v)
    emit(dev, {"bench": "stage_execute", "elements": n, **{k: med(v) for k, v in rows.items()}})
    for h in (a, b, u):
        dev.release(h)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--software", action="store_true")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--mb", type=int, default=40)
    ap.add_argument("--only", default="", help="comma list of: memcpy,wait,small,dispatch,fine,read,big,readback,upload,dual,touch,alloc,stage,maps")
    args = ap.parse_args()
    dev = GpuDevice.open(allow_software_adapter=args.software)
    only = set(args.only.split(",")) if args.only else None

    def want(name: str) -> bool:
        return only is None or name in only

    big = args.mb * 1_000_000
    if want("memcpy"):
        memcpy_threads(big, args.reps * 3)
    if want("wait"):
        wait_modes(dev, args.reps * 20)
    if want("small"):
        small_paths(dev, args.reps * 20)
    if want("big"):
        big_paths(dev, big // 4, args.reps)
    if want("dispatch"):
        fine_dispatch_path(dev, args.reps * 20)
    if want("fine"):
        fine_read_path(dev, 4096, args.reps * 20)
        fine_read_path(dev, big, args.reps)
    if want("read"):
        real_read_timing(dev, 4096, args.reps * 20)
        real_read_timing(dev, big, args.reps)
    if want("readback"):
        readback_breakdown(dev, big, args.reps)
        chunked_readback(dev, big, 2, args.reps)
    if want("dual"):
        dual_copy(dev, big, args.reps)
    if want("touch"):
        readback_touch(dev, big, args.reps)
    if want("stage"):
        stage_execute(dev, big // 4, args.reps)
    if want("maps"):
        map_cycles(dev, big, args.reps)
    if want("alloc"):
        alloc_costs(dev, big, args.reps)
    if want("upload"):
        upload_breakdown(dev, big, args.reps)
        chunked_upload(dev, big, 2, args.reps)
    dev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
