"""Where a large fresh round trip's time goes, phase by phase, and which phases overlap: a timeline
of the one-call round trip (the work guest's ``sample``: set, dispatch, copy back), beside plain
wgpu-py probes of the overlaps the path could use. JSONL, medians of ``--reps`` warm runs.

python -m bench.transfer_phases [--n 10000000] [--reps 20] [--chunks 4,8] [--allow-software-adapter]

Records:
  transfer_phases   one per host tuning: for each phase (the set's host copies, the dispatch's
                    execute, the readback's DMA wait, the copy-out into guest memory, ...) its
                    median duration and median start/end offset from the round trip's start;
                    ``serial_ms`` sums the phases, ``overlap_ms`` is what ran side by side
                    (serial minus the union of the phases' intervals), ``other_ms`` the rest.
  transfer_probe    plain wgpu-py, one buffer of 4n bytes: the BAR write at 1-16 host threads;
                    the readback pipelined in k pieces (piece j's threaded copy-out while piece
                    j+1's DMA runs); the upload through host-cached memory (mappable primary
                    buffers: MAP_READ|COPY_SRC, written while mapped, copied by the DMA engine),
                    whole and in k pieces. Every probe's result is checked after its timer. The
                    pieces' maps are waited for with non-blocking polls (``pieces_wait: poll``;
                    wgpu-py's own sync_wait blocks until the whole queue is done).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import wgpu

from bench.buffer_bench import kernel_configs
from bench.common import CallHooks, emit, environment, median_seconds
from bench.transfer_floor import Floor
from bench.work_guest import KERNEL_IDS, input_values, reference, wat
from wagogpu import Config, Host, memcopy
from wagogpu.buffers import TransferTuning
from wagogpu.buffers import residency as residency_module
copyout_module: Any
try:
    from wagogpu.buffers import copyout as copyout_module
except ImportError:  # (a version of the path before pieced readbacks: those phases do not exist)
    copyout_module = object()
from wagogpu.host import transfers as transfers_module

OFF = 1 << 62


class Timeline(CallHooks):
    """Intervals spent inside chosen functions, by label, relative to mark(); wrapped while active
    (a phase this version of the path does not have is left out). An ExecuteResult's own
    submit-to-done split is a span of its own."""

    def __init__(self, targets: list[tuple[object, str, str]]) -> None:
        self.t0 = 0.0
        self.spans: list[tuple[str, float, float]] = []
        super().__init__(targets, self._span, skip_missing=True)

    def __enter__(self) -> Timeline:
        self.start()
        return self

    def _span(self, label: str, start: float, end: float, result: Any) -> None:
        self.spans.append((label, start, end))
        compute_s = getattr(result, "compute_s", None)
        if compute_s is not None:
            self.spans.append((f"{label}_in_submit_to_done", end - compute_s, end))

    def mark(self) -> None:
        self.spans.clear()
        self.t0 = time.perf_counter()


def union_seconds(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def phase_targets(dev: Any) -> list[tuple[object, str, str]]:
    """The phases of a large round trip: the functions each one runs in (outermost first)."""
    return [(residency_module, "copy_many", "set_copies"), (residency_module, "copy_bytes", "host_copy"),
            (dev, "stage", "set_stage_acquire"), (dev, "execute", "dispatch_execute"),
            (dev, "read_mapped", "readback_dma"), (dev, "read", "readback_whole"),
            (dev, "read_pieces", "readback_pieces"),
            (transfers_module, "copy_bytes", "copy_out"), (copyout_module, "copy_range", "copy_out"),
            (copyout_module, "copy_many", "readback_dma_in_publish"),
            (copyout_module, "copy_bytes", "readback_dma_in_publish")]


def host_phases(name: str, tuning: TransferTuning, n: int, reps: int, software: bool, k: int) -> dict[str, Any]:
    x = input_values(n)
    config = Config(kernels=kernel_configs(), allow_software_adapter=software, require_gpu=not software)
    host = Host(config, tuning=tuning)
    try:
        inst = host.instantiate(host.compile(wat()))
        inst.call("grow_to", 12 * n // 65536 + 2)
        mem = inst.memory_view().view(np.float32)
        mem[:n] = x
        assert inst.call("setup", n) == 0
        for _ in range(3):
            assert inst.call("sample", k, n) == 0
        timeline = Timeline(phase_targets(host.device))
        totals: list[float] = []
        per_phase: dict[str, list[tuple[float, float, float]]] = {}
        serial, overlap = [], []
        ok = True
        with timeline:
            for _ in range(reps):
                mem[2 * n:3 * n] = 0
                timeline.mark()
                status = inst.call("sample", k, n)
                total = time.perf_counter() - timeline.t0
                if status:
                    raise SystemExit(f"{name}: status {status}")
                totals.append(total)
                spans = list(timeline.spans)
                sums: dict[str, list[float]] = {}
                for label, a, b in spans:
                    s = sums.setdefault(label, [0.0, a, b])
                    s[0] += b - a
                    s[1], s[2] = min(s[1], a), max(s[2], b)
                for label, (spent, a, b) in sums.items():
                    per_phase.setdefault(label, []).append((spent, a - timeline.t0, b - timeline.t0))
                intervals = [(a, b) for label, a, b in spans if "_in_" not in label]  # (sub-spans nest)
                serial.append(sum(b - a for a, b in intervals))
                overlap.append(serial[-1] - union_seconds(intervals))
                ok &= bool(np.array_equal(mem[2 * n:3 * n], reference("twice" if k == KERNEL_IDS["twice"]
                                                                        else "polynomial", x)))
        record: dict[str, Any] = {"bench": "transfer_phases", "variant": name, "elements": n, "checked": ok,
                                  "total_ms": statistics.median(totals) * 1e3, "samples": reps,
                                  "serial_ms": statistics.median(serial) * 1e3,
                                  "overlap_ms": statistics.median(overlap) * 1e3}
        for label, rows in per_phase.items():
            record[f"{label}_ms"] = statistics.median(r[0] for r in rows) * 1e3
            record[f"{label}_start_ms"] = statistics.median(r[1] for r in rows) * 1e3
            record[f"{label}_end_ms"] = statistics.median(r[2] for r in rows) * 1e3
            record[f"{label}_calls"] = len(rows)
        record["other_ms"] = record["total_ms"] - record["serial_ms"] + record["overlap_ms"]
        info = host.device.info
        record["adapter"] = f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"
        return record
    finally:
        host.close()


# ---------------------------------------------------------------------------------- plain wgpu-py


class Probe(Floor):
    """transfer_floor's device and buffers (with mappable primary buffers where offered), and the
    buffers of the probes."""

    def __init__(self, software: bool, nbytes: int, want_mappable: bool = True) -> None:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance",
                                                force_fallback_adapter=software)
        info = adapter.info
        self.adapter = f"{info.get('device')}; {info.get('description')}; {info.get('adapter_type')}; " \
                       f"{info.get('backend_type')}"
        self.mappable = want_mappable and "mappable-primary-buffers" in adapter.features
        super().__init__(adapter, nbytes, features=["mappable-primary-buffers"] if self.mappable else [])
        u = wgpu.BufferUsage
        self.hostcached = self.dev.create_buffer(size=nbytes, usage=u.MAP_READ | u.COPY_SRC) \
            if self.mappable else None
        self._pieces: dict[tuple[int, int], list[tuple[int, int, Any]]] = {}

    def pieces(self, k: int, usage: int) -> list[tuple[int, int, Any]]:
        key = (k, usage)
        if key not in self._pieces:
            piece = ((self.nbytes + k - 1) // k + 255) // 256 * 256
            self._pieces[key] = [(off, min(piece, self.nbytes - off),
                                  self.dev.create_buffer(size=min(piece, self.nbytes - off), usage=usage))
                                 for off in range(0, self.nbytes, piece)]
        return self._pieces[key]

    def resolve(self, promise: Any) -> None:
        """Wait for one map without waiting for the whole queue: wgpu-py's sync_wait polls the device
        blocking, which returns only when every submission is done (no piece would overlap the next)."""
        while promise._state == "pending":  # noqa: SLF001 (probe only)
            self.dev._poll(False)  # noqa: SLF001
        promise.sync_wait()

    def _submit_copy(self, src: Any, so: int, dst: Any, do: int, n: int) -> None:
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(src, so, dst, do, n)
        self.dev.queue.submit([enc.finish()])

    @staticmethod
    def address(buf: Any, offset: int = 0, size: int | None = None) -> int:
        """The host address of a mapped range (read or write mapping), through wgpu-native's C API."""
        from wgpu.backends.wgpu_native._ffi import ffi, lib

        ptr = lib.wgpuBufferGetMappedRange(buf._internal, offset, buf.size - offset if size is None else size)
        return int(ffi.cast("intptr_t", ptr))

    def bar_write(self, threads: int) -> None:
        self.upload.map_sync(wgpu.MapMode.WRITE)
        memcopy.copy_bytes(self.address(self.upload), self.src.ctypes.data, self.nbytes, threads)
        self.upload.unmap()
        self._submit_copy(self.upload, 0, self.storage, 0, self.nbytes)
        self.wait()

    def readback_whole(self, threads: int) -> None:
        self._submit_copy(self.storage, 0, self.readback, 0, self.nbytes)
        self.readback.map_sync(wgpu.MapMode.READ)
        memcopy.copy_bytes(self.out.ctypes.data, self.address(self.readback), self.nbytes, threads)
        self.readback.unmap()

    def readback_pipelined(self, k: int, threads: int, read_out: bool = True) -> None:
        """k submissions and maps, each piece read out as it maps (without `read_out`: what the
        pieces cost the device and the maps alone)."""
        u = wgpu.BufferUsage
        pieces = self.pieces(k, u.MAP_READ | u.COPY_DST)
        promises = []
        for off, n, buf in pieces:
            self._submit_copy(self.storage, off, buf, 0, n)
            promises.append(buf.map_async(wgpu.MapMode.READ))
        for (off, n, buf), promise in zip(pieces, promises):
            self.resolve(promise)
            if read_out:
                memcopy.copy_bytes(self.out.ctypes.data + off, self.address(buf), n, threads)
            buf.unmap()

    def readback_one_submission(self, k: int, threads: int) -> None:
        """k copies in one submission (so every map resolves at its end), each piece read out."""
        u = wgpu.BufferUsage
        pieces = self.pieces(k, u.MAP_READ | u.COPY_DST)
        enc = self.dev.create_command_encoder()
        for off, n, buf in pieces:
            enc.copy_buffer_to_buffer(self.storage, off, buf, 0, n)
        self.dev.queue.submit([enc.finish()])
        promises = [buf.map_async(wgpu.MapMode.READ) for _off, _n, buf in pieces]
        for (off, n, buf), promise in zip(pieces, promises):
            self.resolve(promise)
            memcopy.copy_bytes(self.out.ctypes.data + off, self.address(buf), n, threads)
            buf.unmap()

    def readout_twice(self, threads: int) -> tuple[float, float]:
        """A whole readback read out twice from the same mapping: (first, second) read-out seconds
        (the first pays for a fresh mapping's pages, if the driver maps them anew per map)."""
        self._submit_copy(self.storage, 0, self.readback, 0, self.nbytes)
        self.readback.map_sync(wgpu.MapMode.READ)
        address = self.address(self.readback)
        t0 = time.perf_counter()
        memcopy.copy_bytes(self.out.ctypes.data, address, self.nbytes, threads)
        t1 = time.perf_counter()
        memcopy.copy_bytes(self.out.ctypes.data, address, self.nbytes, threads)
        t2 = time.perf_counter()
        self.readback.unmap()
        return t1 - t0, t2 - t1

    def upload_hostcached(self, threads: int) -> None:
        buf = self.hostcached
        assert buf is not None
        buf.map_sync(wgpu.MapMode.READ)
        memcopy.copy_bytes(self.address(buf), self.src.ctypes.data, self.nbytes, threads)
        buf.unmap()
        self._submit_copy(buf, 0, self.storage, 0, self.nbytes)
        self.wait()

    def upload_hostcached_pipelined(self, k: int, threads: int) -> None:
        u = wgpu.BufferUsage
        pieces = self.pieces(k, u.MAP_READ | u.COPY_SRC)
        promises = [buf.map_async(wgpu.MapMode.READ) for _off, _n, buf in pieces]
        for (off, n, buf), promise in zip(pieces, promises):
            self.resolve(promise)
            memcopy.copy_bytes(self.address(buf), self.src.ctypes.data + off, n, threads)
            buf.unmap()
            self._submit_copy(buf, 0, self.storage, off, n)
        self.wait()

    def clear_storage(self) -> None:
        self.dev.queue.write_buffer(self.storage, 0, np.zeros(self.nbytes // 4, np.uint32))
        self.wait()

    def storage_equals_src(self) -> bool:
        self.out[:] = 0
        self.readback_whole(8)
        return bool(np.array_equal(self.out, self.src))


def probes(software: bool, nbytes: int, reps: int, chunks: list[int], no_hostcached: bool = False) -> list[dict[str, Any]]:
    p = Probe(software, nbytes, not no_hostcached)
    rows: list[dict[str, Any]] = []

    def row(way: str, fn: Callable[[], Any], check: Callable[[], bool], **extra: Any) -> None:
        ms = median_seconds(fn, reps) * 1e3
        rows.append({"bench": "transfer_probe", "way": way, "ms": ms, "gbps": nbytes / ms / 1e6,
                     "checked": check(), "bytes": nbytes, "adapter": p.adapter, **extra})

    def uploaded(fn: Callable[[], Any]) -> Callable[[], bool]:
        def check() -> bool:
            p.clear_storage()
            fn()
            return p.storage_equals_src()
        return check

    def read_back(fn: Callable[[], Any]) -> Callable[[], bool]:
        def check() -> bool:
            p.dev.queue.write_buffer(p.storage, 0, p.src)
            p.wait()
            p.out[:] = 0
            fn()
            return bool(np.array_equal(p.out, p.src))
        return check

    for threads in (1, 4, 8, 16):
        fn = (lambda t=threads: p.bar_write(t))
        row("h2d_bar_write", fn, uploaded(fn), threads=threads)
    p.dev.queue.write_buffer(p.storage, 0, p.src)
    for threads in (8, 16):
        fn = (lambda t=threads: p.readback_whole(t))
        row("d2h_whole", fn, read_back(fn), threads=threads, pieces=1)
        for k in chunks:
            fn = (lambda t=threads, k=k: p.readback_pipelined(k, t))
            row("d2h_pipelined", fn, read_back(fn), threads=threads, pieces=k, pieces_wait="poll")
    for k in chunks:
        fn = (lambda k=k: p.readback_pipelined(k, 0, read_out=False))
        row("d2h_pieces_no_readout", fn, lambda: True, pieces=k, pieces_wait="poll")
        fn = (lambda k=k: p.readback_one_submission(k, 8))
        row("d2h_pieces_one_submission", fn, read_back(fn), threads=8, pieces=k, pieces_wait="poll")
    pairs = [p.readout_twice(8) for _ in range(reps + 1)][1:]
    rows.append({"bench": "transfer_probe", "way": "d2h_readout_first_then_second", "threads": 8,
                 "first_ms": statistics.median(a for a, _ in pairs) * 1e3,
                 "second_ms": statistics.median(b for _, b in pairs) * 1e3, "ms": 0.0, "gbps": 0.0,
                 "checked": read_back(lambda: p.readout_twice(8))(), "bytes": nbytes, "adapter": p.adapter})
    if p.mappable and not no_hostcached:
        for threads in (8, 16):
            fn = (lambda t=threads: p.upload_hostcached(t))
            row("h2d_hostcached", fn, uploaded(fn), threads=threads, pieces=1)
            for k in chunks:
                fn = (lambda t=threads, k=k: p.upload_hostcached_pipelined(k, t))
                row("h2d_hostcached_pipelined", fn, uploaded(fn), threads=threads, pieces=k, pieces_wait="poll")
    return rows


def _pieces(k: int) -> TransferTuning:
    try:
        return TransferTuning(readback_pieces=k)  # type: ignore[call-arg]
    except TypeError:  # (a version of the path before pieced readbacks)
        return TransferTuning()


VARIANTS: dict[str, TransferTuning] = {
    "default": TransferTuning(),
    "pieces_2": _pieces(2),
    "pieces_4": _pieces(4),
    "pieces_8": _pieces(8),
    "no_prestage": TransferTuning(prestage_min_bytes=OFF),
    "no_park": TransferTuning(park_min_bytes=OFF),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--kernel", default="twice", choices=sorted(KERNEL_IDS))
    parser.add_argument("--chunks", default="2,4,8")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--no-probes", action="store_true")
    parser.add_argument("--no-hostcached", action="store_true", help="skip the mappable-primary-buffers probes")
    parser.add_argument("--allow-software-adapter", action="store_true")
    args = parser.parse_args(argv)
    ok = True
    env = environment()
    for name in args.variant or list(VARIANTS):
        record = host_phases(name, VARIANTS[name], args.n, args.reps, args.allow_software_adapter,
                             KERNEL_IDS[args.kernel])
        ok &= record["checked"]
        emit({**record, "kernel": args.kernel, **env})
    if not args.no_probes:
        for record in probes(args.allow_software_adapter, 4 * args.n // 256 * 256, args.reps,
                             [int(c) for c in args.chunks.split(",")], args.no_hostcached):
            ok &= record["checked"]
            emit({**record, **env})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
