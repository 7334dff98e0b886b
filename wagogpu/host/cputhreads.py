"""Threads for CPU kernels (Config.cpu_threads): the index range split across threads that run
Wasm with the GIL released.

Why this design: a wasmtime Store runs on one thread at a time, so each thread has a Store of its
own with its own instance of the kernel's CPU module; they reach the same bytes because the
instance's accessor memory is then a shared memory (Wasm threads), made so when the Host is
configured for more than one thread. The calling thread works too, in the guest's store. Calls go
through wasmtime's unchecked C entry point via cffi, which releases the GIL for the call. The GPU
compiler proved that no written slot is read at another element, so any split gives the bytes one
thread gives. Kernels that load guest memory run on one thread: the guest's own memory is not
shared.

The range is shared out in Wasm (compiler/cpuwork.py, Schedule.QUEUE): each thread makes one call
that takes small chunks with an atomic add, and the calling thread returns once every element is
done, not once every thread is back in Python; the next run first waits for that (settle), so no
thread of one run can take from the next run's queue or use a store the next run arms. The Python
queue of pieces it replaced (Schedule.PIECES: a GIL round trip per piece) stays for the bench that
compares them (bench/cpu_threads.py) and for modules without the queue.
"""
from __future__ import annotations

import enum
import os
import threading
import time
from functools import partial
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import wasmtime

from ..abi.accessor import KERNEL_DONE_OFFSET, KERNEL_NEXT_OFFSET, KERNEL_STOP_OFFSET
from ..config import Config
from ._wasmtime import export_call
from .context import RuntimeContext
from .engine import first_line

PIECES_PER_THREAD = 4
MIN_PIECE = 32768  # elements per thread below which another thread costs more than it saves (a wake is ~10-50 us)
CHUNKS_PER_THREAD = 16  # the queue's chunks: small enough to even out uneven work, large next to an atomic add
MIN_CHUNK = 4096
JOIN_WAIT_NS = 1_000_000  # join's wait between looks at the stop word (a trap is noticed within this)
SHARED_PAGES = 65536  # the shared accessor memory's maximum (4 GiB of address space, reserved not used)

Run = Callable[..., object]


class Schedule(enum.Enum):
    QUEUE = "queue"  # one call per thread, chunks taken in Wasm (cpuwork.py)
    PIECES = "pieces"  # a Python queue of PIECES_PER_THREAD pieces per thread, one call each


#: What threaded runs use; bench/cpu_threads.py sets PIECES to measure the two side by side.
SCHEDULE = Schedule.QUEUE


@dataclass
class Trace:
    """perf_counter_ns() of a run's phases, for bench/cpu_threads.py's breakdown: (event, worker,
    ns, elements). Off (TRACE None) in normal runs; appends are atomic under the GIL."""

    events: list[tuple[str, int, int, int]] = field(default_factory=list)

    def mark(self, event: str, worker: int = 0, elements: int = 0) -> None:
        self.events.append((event, worker, time.perf_counter_ns(), elements))


TRACE: Trace | None = None


def mark(event: str, worker: int = 0, elements: int = 0) -> None:
    trace = TRACE
    if trace is not None:
        trace.mark(event, worker, elements)


def cpu_thread_count(threads: int) -> int:
    """Config.cpu_threads resolved: 0 is one per core this process may use."""
    if threads:
        return threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def threaded(config: Config) -> bool:
    """Whether CPU kernels may run on several threads (and the accessor memory is shared)."""
    return config.cpu_kernels and cpu_thread_count(config.cpu_threads) > 1


def host_pool(ctx: RuntimeContext) -> WorkerPool:
    if ctx.cpu_pool is None:
        ctx.cpu_pool = WorkerPool(cpu_thread_count(ctx.config.cpu_threads))
    pool: WorkerPool = ctx.cpu_pool
    return pool


def thread_count(count: int, threads: int) -> int:
    """Threads worth using for count elements: at least MIN_PIECE each."""
    return max(1, min(threads, count // MIN_PIECE))


def chunk_size(count: int, threads: int) -> int:
    return max(MIN_CHUNK, count // (threads * CHUNKS_PER_THREAD))


def pieces(count: int, threads: int) -> list[tuple[int, int]]:
    """[start, end) of each piece of [0, count) for Schedule.PIECES: PIECES_PER_THREAD per thread
    (uneven work, such as Mandelbrot's rows, evens out as threads take the next piece), none below
    MIN_PIECE but one."""
    k = max(1, min(threads * PIECES_PER_THREAD, count // MIN_PIECE))
    bounds = [count * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


@dataclass(frozen=True)
class QueueCalls:
    """A kernel's calls in one store: run(start, end), and the queue's work(end, chunk), join(end, ns)."""

    run: Run
    work: Run | None
    join: Run | None


class _Worker:
    """One pool thread: runs the job it is handed, then says so. Handing a job over is a lock
    release (a futex wake, about a microsecond of this thread's time), where an executor's
    submit costs this thread several microseconds of Python per job, before its own share starts."""

    def __init__(self, name: str) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._idle = threading.Lock()
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self.busy = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def start(self, job: Callable[[], None]) -> None:
        self.wait()
        self._idle.acquire()
        self.busy = True
        self._job = job
        self._go.release()

    def wait(self) -> None:
        """Until the job handed over last has ended (its exception, if any, raised here)."""
        if not self.busy:
            return
        with self._idle:
            self.busy = False
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        try:
            self.wait()
        except BaseException:  # noqa: BLE001 - a job's error is its run's; the stopping Host has no run left
            pass
        self._job = None
        self._go.release()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            job, self._job = self._job, None
            if job is None:
                return
            try:
                job()
            except BaseException as exc:  # handed to wait(), on the thread that waits
                self._error = exc
            self._idle.release()


class WorkerPool:
    """One Host's CPU-kernel threads (made on the first threaded run, stopped with the Host). One
    run at a time (a lock): the threads are the Host's, whichever instance dispatches."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._workers = [_Worker(f"wagogpu-cpu-{i + 1}") for i in range(threads - 1)]
        self.lock = threading.Lock()

    def settle(self) -> None:
        """Wait until every thread of the last run is back (its elements were done already)."""
        for w in self._workers:
            w.wait()

    def run(self, runs: list[Run], work: list[tuple[int, int]]) -> str:
        """Schedule.PIECES: the pieces of `work`, taken in turn by one thread per run (runs[0] on
        this thread, each other run on a pool thread); the first line of the first trap, "" when
        every piece finished (after a trap no thread takes another piece)."""
        self.settle()
        queue = iter(work)  # next() on a list iterator is atomic under the GIL
        traps: list[str] = []
        for i, (run, worker) in enumerate(zip(runs[1:], self._workers)):
            worker.start(partial(_drain, run, queue, traps, i + 1))
        mark("launched")
        _drain(runs[0], queue, traps, 0)
        mark("main_done")
        self.settle()
        return traps[0] if traps else ""

    def run_queue(self, calls: list[QueueCalls], memory: np.ndarray, count: int, chunk: int) -> str:
        """Schedule.QUEUE: every store's work(count, chunk) at once (calls[0] on this thread), then
        join on this thread; the first line of the first trap, "" when every element was done.
        `memory` is the shared accessor memory (its queue words are reset here). The other threads
        may still be on their way back to Python when this returns: the next run settles them."""
        self.settle()
        memory[KERNEL_NEXT_OFFSET:KERNEL_NEXT_OFFSET + 8].view(np.uint64)[0] = 0
        done = memory[KERNEL_DONE_OFFSET:KERNEL_DONE_OFFSET + 4].view(np.uint32)
        stop = memory[KERNEL_STOP_OFFSET:KERNEL_STOP_OFFSET + 4].view(np.uint32)
        done[0] = stop[0] = 0
        traps: list[str] = []
        for i, (c, worker) in enumerate(zip(calls[1:], self._workers)):
            worker.start(partial(_work, c.work, count, chunk, stop, traps, i + 1))
        mark("launched")
        _work(calls[0].work, count, chunk, stop, traps, 0)
        mark("main_done")
        if not traps:
            join = calls[0].join
            assert join is not None
            try:
                finished = join(count, JOIN_WAIT_NS)
            except wasmtime.Trap as exc:  # a limit (call_timeout, fuel) interrupted the wait
                traps.append(first_line(exc) or "trap")
                stop[0] = 1
                finished = 0
            if finished:
                return ""
        self.settle()
        return traps[0] if traps else "stopped"

    def close(self) -> None:
        for w in self._workers:
            w.stop()


def _drain(run: Run, queue: Iterator[tuple[int, int]], traps: list[str], worker: int) -> None:
    mark("wake", worker)
    for start, end in queue:
        if traps:
            break
        trapped = run_piece(run, start, end)
        mark("piece", worker, end - start)
        if trapped:
            traps.append(trapped)
    mark("finish", worker)


def _work(work: Run | None, count: int, chunk: int, stop: np.ndarray, traps: list[str], worker: int) -> None:
    """One thread's share of a Schedule.QUEUE run; a trap sets the stop word, since the trapped
    call cannot (the other threads then take no more chunks and join returns)."""
    assert work is not None
    mark("wake", worker)
    elements = 0
    try:
        elements = int(work(count, chunk))  # type: ignore[call-overload]
    except wasmtime.Trap as exc:
        traps.append(first_line(exc) or "trap")
        stop[0] = 1
    except BaseException:
        stop[0] = 1
        raise
    mark("finish", worker, elements)


def run_piece(run: Run, start: int, end: int) -> str:
    try:
        run(start, end)
    except wasmtime.Trap as exc:
        return first_line(exc) or "trap"
    return ""


def queue_calls(inst: wasmtime.Instance, store: wasmtime.Store, run_export: str, work_export: str,
                join_export: str) -> QueueCalls:
    exports = inst.exports(store)
    calls: list[Run | None] = []
    for name in (run_export, work_export, join_export):
        func = exports.get(name)
        calls.append(export_call(func, store, name) if isinstance(func, wasmtime.Func) else None)
    run = calls[0]
    assert run is not None
    return QueueCalls(run, calls[1], calls[2])


class WorkerStores:
    """One guest instance's worker Stores: store i runs piece i + 1; each holds an instance of
    every kernel's CPU module that ran threaded, over the shared accessor memory."""

    def __init__(self, engine: wasmtime.Engine, memory: wasmtime.SharedMemory) -> None:
        self._engine = engine
        self._memory = memory
        self._stores: list[wasmtime.Store] = []
        self._calls: list[dict[int, QueueCalls]] = []

    def calls(self, kernel_id: int, compiled: wasmtime.Module, exports: tuple[str, str, str], n: int,
              arm: Callable[[wasmtime.Store], object] | None = None) -> list[QueueCalls]:
        """The kernel's calls in each of the first n worker stores (made on first use); `arm`
        sets each store's limits for this run (the guest's call_timeout and fuel, when configured).
        The pool must be settled (no thread of an earlier run in these stores)."""
        while len(self._stores) < n:
            self._stores.append(wasmtime.Store(self._engine))
            self._calls.append({})
        out = []
        for store, calls in zip(self._stores[:n], self._calls):
            if arm is not None:
                arm(store)
            found = calls.get(kernel_id)
            if found is None:
                inst = wasmtime.Instance(store, compiled, [self._memory])
                found = calls[kernel_id] = queue_calls(inst, store, *exports)
            out.append(found)
        return out

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()
        self._calls.clear()
