"""Host memory copies between numpy arrays and mapped GPU memory.

One thread copies roughly 5-10 GB/s; a 40 MB transfer then costs milliseconds
on the host alone, and a fresh output array adds its first-touch page faults.
Large copies are split over a few helper threads (ctypes.memmove releases the
GIL), which is what makes the 10M-element round trip fit its budget.

Why a crew of threads and not a ThreadPoolExecutor: handing a piece to a pool
costs a Future, a work item and a condition per piece, and the caller wakes
for each result. On the H200's host (bench.copy_fanout) a 10 MB copy on 8
threads took 0.57 ms through a pool and 0.34 ms through the crew, and handing
one piece over 87 against 24 us. A crew thread waits on a lock of its own, is
handed its piece by one release, and answers by releasing another.
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["copy_bytes", "copy_many", "copy_threads"]

#: Copies below this size run on the calling thread.
PARALLEL_MIN_BYTES = 4 << 20
_CHUNK_MIN = 1 << 20

#: Helper threads at most (a copy's first piece runs on the calling thread).
MAX_HELPERS = 15
Piece = tuple[int, int, int]  # (dst, src, nbytes)


def copy_threads(default: int = 8) -> int:
    """Threads for one large copy: ``default`` capped by the CPU count; WAGOGPU_COPY_THREADS overrides."""
    env = os.environ.get("WAGOGPU_COPY_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(default, os.cpu_count() or 1))


class _Crew:
    """The helper threads: helper i waits on go[i] (held until it has a piece), copies jobs[i],
    then releases done[i]. One copy at a time uses them (`lock`); the calling thread copies a piece
    itself meanwhile."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.go: list[threading.Lock] = []
        self.done: list[threading.Lock] = []
        self.jobs: list[Piece] = []

    def _grow(self, helpers: int) -> int:
        """The helpers there are, `helpers` of them unless the system refuses another thread."""
        while len(self.go) < helpers:
            i = len(self.go)
            go, done = threading.Lock(), threading.Lock()
            go.acquire()
            done.acquire()
            try:
                threading.Thread(target=self._serve, args=(i, go, done), name=f"wagogpu-copy-{i}", daemon=True).start()
            except RuntimeError:  # (can't start new thread): the calling thread copies the rest itself
                break
            self.jobs.append((0, 0, 0))
            self.go.append(go)
            self.done.append(done)
        return len(self.go)

    def _serve(self, i: int, go: threading.Lock, done: threading.Lock) -> None:
        jobs, move = self.jobs, ctypes.memmove
        while True:
            go.acquire()
            try:
                move(*jobs[i])
            finally:
                done.release()

    def copy(self, pieces: list[Piece]) -> None:
        """Every piece copied: pieces[0] on this thread, the rest (MAX_HELPERS at most at a time) on helpers."""
        with self.lock:
            while pieces:
                batch, pieces = pieces[:MAX_HELPERS + 1], pieces[MAX_HELPERS + 1:]
                helpers = min(len(batch) - 1, self._grow(len(batch) - 1))
                for i in range(helpers):
                    self.jobs[i] = batch[i + 1]
                    self.go[i].release()
                try:
                    for piece in (batch[0], *batch[helpers + 1:]):
                        ctypes.memmove(*piece)
                finally:
                    for i in range(helpers):
                        self.done[i].acquire()


_crew = _Crew()


def _new_crew() -> None:
    """A forked child has none of the parent's threads: it starts a crew of its own."""
    global _crew
    _crew = _Crew()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_crew)


def _pieces(dst: int, src: int, nbytes: int, threads: int) -> list[Piece]:
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
    """Several copies (dst, src, nbytes, threads) at once: their pieces share the helper threads, so
    a copy bound by PCIe and one bound by host memory overlap instead of running one after the other."""
    pieces = [p for dst, src, n, threads in jobs if n > 0 for p in _pieces(dst, src, n, threads)]
    if not pieces:
        return
    if len(pieces) == 1:
        ctypes.memmove(*pieces[0])
        return
    _crew.copy(pieces)

