"""Host memory copies between numpy arrays and mapped GPU memory.

One thread copies roughly 5-10 GB/s; a 40 MB transfer then costs milliseconds
on the host alone, and a fresh output array adds its first-touch page faults.
Large copies are split over a small thread pool (ctypes.memmove releases the
GIL), which is what makes the 10M-element round trip fit its budget.
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["copy_bytes", "copy_many", "copy_threads"]

#: Copies below this size run on the calling thread.
PARALLEL_MIN_BYTES = 4 << 20
_CHUNK_MIN = 1 << 20

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def copy_threads(default: int = 8) -> int:
    """Threads for one large copy: ``default`` capped by the CPU count; WAGOGPU_COPY_THREADS overrides."""
    env = os.environ.get("WAGOGPU_COPY_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(default, os.cpu_count() or 1))


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, min(16, os.cpu_count() or 1)),
                                       thread_name_prefix="wagogpu-copy")
        return _pool


def _pieces(dst: int, src: int, nbytes: int, threads: int) -> list[tuple[int, int, int]]:
    threads = copy_threads(threads) if nbytes >= PARALLEL_MIN_BYTES else 1
    parts = max(1, min(threads, nbytes // _CHUNK_MIN))
    chunk = ((nbytes + parts - 1) // parts + 4095) & ~4095
    return [(dst + off, src + off, min(chunk, nbytes - off)) for off in range(0, nbytes, chunk)]


def copy_bytes(dst: int, src: int, nbytes: int, threads: int = 8) -> None:
    """memcpy ``nbytes`` from address ``src`` to address ``dst`` (non-overlapping), on up to ``threads``."""
    if nbytes < PARALLEL_MIN_BYTES:  # the small copies of every set and copy-back: no list, no pool
        ctypes.memmove(dst, src, nbytes)
        return
    copy_many([(dst, src, nbytes, threads)])


def copy_many(jobs: list[tuple[int, int, int, int]]) -> None:
    """Several copies (dst, src, nbytes, threads) at once: their pieces share one thread pool, so a
    copy bound by PCIe and one bound by host memory overlap instead of running one after the other."""
    pieces = [p for dst, src, n, threads in jobs if n > 0 for p in _pieces(dst, src, n, threads)]
    if not pieces:
        return
    if len(pieces) == 1:
        ctypes.memmove(*pieces[0])
        return
    pool = _get_pool()
    futures = [pool.submit(ctypes.memmove, *p) for p in pieces[1:]]
    ctypes.memmove(*pieces[0])
    for f in futures:
        f.result()

