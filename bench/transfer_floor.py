"""The floor under a large round trip: what plain wgpu-py (its public API, nothing of wagogpu's
device layer) moves per second host-to-device and device-to-host, and what the host's own memory
copy does, for one buffer of ``--mib`` MiB (default 40 MB: a 10M-element f32 buffer). JSONL,
medians of ``--reps`` warm runs; every device result is checked against its input after the timer.

python -m bench.transfer_floor [--mib 38.15] [--reps 15] [--chunks 4] [--allow-software-adapter]

Ways measured (each figure names its adapter):
  h2d_write_buffer   queue.write_buffer into a storage buffer, then a wait (a 4-byte map probe);
  h2d_mapped         the bytes written into a mapped MAP_WRITE buffer, unmapped, copied to storage,
                     waited; ``_host`` is the write into the mapping alone;
  d2h_dma            copy to a MAP_READ buffer and map it, no read-out (the device and PCIe alone);
  d2h_mapped         copy to a MAP_READ buffer, map, read out into a caller's array, unmap;
  d2h_threaded       the same, read out with wagogpu.memcopy's threads;
  d2h_chunked        the same in ``--chunks`` pieces, each its own submission and staging buffer,
                     the pieces read out as they arrive (the host copy of one overlaps the PCIe
                     transfer of the next);
  host_memcpy        numpy copyto between two warm arrays (one thread), and wagogpu.memcopy's
                     threaded copy; ``host_memcpy_fresh`` into a new array (its page faults).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import wgpu

from bench.common import emit, environment, median_seconds
from wagogpu import memcopy


class Floor:
    """One device with a storage buffer of ``nbytes`` and the helpers around it (``chunks`` > 0:
    that many readback buffers for d2h_chunked)."""

    def __init__(self, adapter: Any, nbytes: int, chunks: int = 0, features: Sequence[str] = ()) -> None:
        self.info = adapter.info
        self.dev = adapter.request_device_sync(required_features=list(features), required_limits={
            "max-buffer-size": adapter.limits["max-buffer-size"],
            "max-storage-buffer-binding-size": adapter.limits["max-storage-buffer-binding-size"]})
        usage = wgpu.BufferUsage
        self.nbytes = nbytes
        self.src = (np.arange(nbytes // 4, dtype=np.uint32) * 2654435761).astype(np.uint32)
        self.out = np.zeros_like(self.src)
        self.storage = self.dev.create_buffer(size=nbytes, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        self.upload = self.dev.create_buffer(size=nbytes, usage=usage.MAP_WRITE | usage.COPY_SRC)
        self.readback = self.dev.create_buffer(size=nbytes, usage=usage.MAP_READ | usage.COPY_DST)
        self.probe = self.dev.create_buffer(size=4, usage=usage.MAP_READ | usage.COPY_DST)
        self.chunk_ranges: list[tuple[int, int]] = []
        if chunks > 0:
            piece = ((nbytes + chunks - 1) // chunks + 255) // 256 * 256
            self.chunk_ranges = [(off, min(piece, nbytes - off)) for off in range(0, nbytes, piece)]
        self.chunk_bufs = [self.dev.create_buffer(size=n, usage=usage.MAP_READ | usage.COPY_DST)
                           for _off, n in self.chunk_ranges]

    def wait(self) -> None:
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(self.storage, 0, self.probe, 0, 4)
        self.dev.queue.submit([enc.finish()])
        self.probe.map_sync(wgpu.MapMode.READ)
        self.probe.unmap()

    def h2d_write_buffer(self) -> None:
        self.dev.queue.write_buffer(self.storage, 0, self.src)
        self.wait()

    def h2d_mapped_host(self) -> None:
        self.upload.map_sync(wgpu.MapMode.WRITE)
        self.upload.write_mapped(self.src)
        self.upload.unmap()

    def h2d_mapped(self) -> None:
        self.h2d_mapped_host()
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(self.upload, 0, self.storage, 0, self.nbytes)
        self.dev.queue.submit([enc.finish()])
        self.wait()

    def d2h_mapped(self) -> None:
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(self.storage, 0, self.readback, 0, self.nbytes)
        self.dev.queue.submit([enc.finish()])
        self.readback.map_sync(wgpu.MapMode.READ)
        view = self.readback.read_mapped(copy=False)
        np.copyto(self.out, np.frombuffer(view, dtype=np.uint32))
        del view
        self.readback.unmap()

    def d2h_dma(self) -> None:
        """The copy and the map alone: what the device and PCIe take, no read-out."""
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(self.storage, 0, self.readback, 0, self.nbytes)
        self.dev.queue.submit([enc.finish()])
        self.readback.map_sync(wgpu.MapMode.READ)
        self.readback.unmap()

    def d2h_threaded(self) -> None:
        """d2h_mapped with the read-out split over wagogpu.memcopy's threads."""
        enc = self.dev.create_command_encoder()
        enc.copy_buffer_to_buffer(self.storage, 0, self.readback, 0, self.nbytes)
        self.dev.queue.submit([enc.finish()])
        self.readback.map_sync(wgpu.MapMode.READ)
        view = self.readback.read_mapped(copy=False)
        mapped = np.frombuffer(view, dtype=np.uint8)
        memcopy.copy_bytes(self.out.ctypes.data, mapped.ctypes.data, self.nbytes)
        del view, mapped
        self.readback.unmap()

    def d2h_chunked(self) -> None:
        for (off, n), buf in zip(self.chunk_ranges, self.chunk_bufs):
            enc = self.dev.create_command_encoder()
            enc.copy_buffer_to_buffer(self.storage, off, buf, 0, n)
            self.dev.queue.submit([enc.finish()])
        promises = [buf.map_async(wgpu.MapMode.READ) for buf in self.chunk_bufs]
        flat = self.out.view(np.uint8)
        for (off, n), buf, promise in zip(self.chunk_ranges, self.chunk_bufs, promises):
            promise.sync_wait()
            view = buf.read_mapped(copy=False)
            flat[off:off + n] = np.frombuffer(view, dtype=np.uint8)
            del view
            buf.unmap()

    def checked(self, fill: Callable[[], None], read: Callable[[], None]) -> bool:
        self.out[:] = 0
        fill()
        read()
        return bool(np.array_equal(self.out, self.src))


def host_figures(nbytes: int, reps: int) -> dict[str, float]:
    src = np.full(nbytes, 7, np.uint8)
    dst = np.zeros_like(src)
    one = median_seconds(lambda: np.copyto(dst, src), reps)
    threaded = median_seconds(lambda: memcopy.copy_bytes(dst.ctypes.data, src.ctypes.data, nbytes), reps)
    fresh = median_seconds(lambda: np.copyto(np.empty_like(src), src), reps)
    return {"host_memcpy_gbps": nbytes / one / 1e9, "host_memcpy_threaded_gbps": nbytes / threaded / 1e9,
            "host_memcpy_fresh_gbps": nbytes / fresh / 1e9, "host_memcpy_ms": one * 1e3,
            "host_memcpy_threaded_ms": threaded * 1e3, "host_memcpy_fresh_ms": fresh * 1e3,
            "copy_threads": memcopy.copy_threads()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=40e6 / (1 << 20))
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--allow-software-adapter", action="store_true")
    args = parser.parse_args(argv)
    nbytes = int(args.mib * (1 << 20)) // 256 * 256
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance",
                                            force_fallback_adapter=args.allow_software_adapter)
    floor = Floor(adapter, nbytes, args.chunks)
    info = floor.info
    adapter_name = f"{info.get('device')}; {info.get('description')}; {info.get('adapter_type')}; " \
                   f"{info.get('backend_type')}"
    if not args.allow_software_adapter and "cpu" in str(info.get("adapter_type", "")).lower():
        print("transfer_floor: only a software adapter; pass --allow-software-adapter", file=sys.stderr)
        return 2
    figures: dict[str, float | int] = {}
    for name in ("h2d_write_buffer", "h2d_mapped_host", "h2d_mapped", "d2h_dma", "d2h_mapped", "d2h_threaded",
                 "d2h_chunked"):
        seconds = median_seconds(getattr(floor, name), args.reps)
        figures[f"{name}_ms"] = seconds * 1e3
        figures[f"{name}_gbps"] = nbytes / seconds / 1e9
    checks = {"write_buffer_then_mapped": floor.checked(floor.h2d_write_buffer, floor.d2h_mapped),
              "write_buffer_then_threaded": floor.checked(floor.h2d_write_buffer, floor.d2h_threaded),
              "mapped_then_chunked": floor.checked(floor.h2d_mapped, floor.d2h_chunked)}
    figures.update(host_figures(nbytes, args.reps))
    ok = all(checks.values())
    emit({"bench": "transfer_floor", "bytes": nbytes, "reps": args.reps, "chunks": len(floor.chunk_ranges),
          "checked": ok, "checks": checks, **figures, "adapter": adapter_name, **environment()})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
