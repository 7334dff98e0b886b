"""Threads for CPU kernels (Config.cpu_threads): the index range split across threads that run
Wasm with the GIL released.

Why this design: a wasmtime Store runs on one thread at a time, so each pool thread has a Store of
its own (per guest instance) with its own instance of the kernel's CPU module; they reach the same
bytes because the instance's accessor memory is then a shared memory (Wasm threads), made so when
the Host is configured for more than one thread. The dispatching thread works too, in the guest's
store. Calls go through wasmtime's unchecked C entry point via cffi, which releases the GIL for the
call. The GPU compiler proved that no written slot is read at another element, so any split gives
the bytes one thread gives. Kernels that load guest memory or convert F16 run on one thread: the
guest's own memory and the accessor's conversions are not shared.

Schedule.QUEUE (compiler/cpuwork.py): a pool thread calls its store's `serve` once and stays in
Wasm, waiting for each dispatch of the same kernel of the same instance (LINGER_NS at most between
two), so a dispatch costs the pool threads no Python at all: the dispatching thread's `lead` wakes
them through the shared memory and returns once every element is done. A thread serving something
else is recalled first (the other memory's `recall`); with a limit that can interrupt any run
(call_timeout, fuel: each run arms every store) a thread serves one dispatch and returns. A trap
sets the stop word; then every thread of that memory is recalled and back before anything is
restored. Schedule.PIECES is the Python queue of pieces it replaced (a GIL round trip per piece,
one thread woken at a time), kept for bench/cpu_threads.py, which measures the two side by side.
"""
from __future__ import annotations

import enum
import os
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterator

import numpy as np
import wasmtime

from ..abi.accessor import KERNEL_GEN_OFFSET, KERNEL_STOP_OFFSET
from ..compiler.cpuwork import DRIVER_WAT, RECALL_EXPORT, RECALL_WAT, SERVE_EXPORT
from ..config import Config
from ._wasmtime import export_call
from .context import RuntimeContext
from .engine import first_line

PIECES_PER_THREAD = 4
MIN_PIECE = 32768  # elements per thread below which another thread costs more than it saves (a wake is ~10-50 us)
CHUNKS_PER_THREAD = 16  # the queue's chunks: small enough to even out uneven work, large next to an atomic add
MIN_CHUNK = 4096
JOIN_WAIT_NS = 1_000_000  # lead's wait between looks at the stop word (a trap is noticed within this)
LINGER_NS = 50_000_000  # how long a pool thread waits in Wasm for the next dispatch before it returns
#: Looks at the generation word before a pool thread sleeps on it, to spare it the futex wake at
#: the next dispatch. 0: on the H200 20,000-400,000 looks changed hash at 1M on 16 threads by 3%
#: at most (0.730-0.758 ms), within that host's noise, for a core busy after every dispatch
#: (bench/results/h200/cpu_threads_spin.jsonl; bench/cpu_threads.py --spins compares values).
SPIN_LOOKS = 0
ONCE_WAIT_NS = 10_000_000  # with limits (one dispatch per start): how long it waits for that one to be published
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
        ctx.cpu_pool = WorkerPool(cpu_thread_count(ctx.config.cpu_threads), ctx.engine)
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
    """A kernel's calls in one store: its run(start, end), and the driver's serve (a pool thread's
    store) or lead (the guest's store) over it."""

    run: Run
    serve: Run | None = None
    lead: Run | None = None


class _Worker:
    """One pool thread: runs the job it is handed, then says so. Handing a job over is a lock
    release (a futex wake, about a microsecond of this thread's time), where an executor's
    submit costs this thread several microseconds of Python per job, before its own share starts.
    `serving` is what its Schedule.QUEUE job serves ((the instance's stores, kernel tag)) and
    `recall` what sends it back; `trap` the first line of the trap it ended with."""

    def __init__(self, name: str) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._idle = threading.Lock()
        self._job: Callable[[], None] | None = None
        self._error: BaseException | None = None
        self.busy = False
        self.serving: tuple[object, int] | None = None
        self.recall: Callable[[], object] | None = None
        self.trap = ""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def running(self) -> bool:
        """Whether its job is still under way (a serving thread waiting in Wasm is)."""
        return self.busy and self._idle.locked()

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
        self.serving = self.recall = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def send_back(self) -> None:
        """Recall a serving job (it returns within a futex wake), then wait for it."""
        try:
            if self.running() and self.recall is not None:
                self.recall()
        finally:
            self.wait()

    def stop(self) -> None:
        try:
            self.send_back()
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
    """One Host's CPU-kernel threads (made on the first threaded run, stopped with the Host), and
    the queue's driver modules, compiled once. One run at a time (the lock): the threads are the
    Host's, whichever instance dispatches."""

    def __init__(self, threads: int, engine: wasmtime.Engine) -> None:
        self.threads = threads
        self._workers = [_Worker(f"wagogpu-cpu-{i + 1}") for i in range(threads - 1)]
        self.lock = threading.Lock()
        self.driver = wasmtime.Module(engine, DRIVER_WAT)
        self.recaller = wasmtime.Module(engine, RECALL_WAT)

    def settle(self) -> None:
        """Every pool thread back in Python, serving nothing."""
        for w in self._workers:
            w.send_back()

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

    def run_queue(self, stores: WorkerStores, tag: int, lead: Run, n: int, count: int, chunk: int,
                  memory: np.ndarray, once: bool) -> str:
        """Schedule.QUEUE: one generation of `count` elements for kernel `tag` of `stores`'
        instance, led by this thread (calls[0]) with n - 1 pool threads serving it (those already
        serving it take part as they are; the rest are started). The first line of the first trap,
        "" when every element was done. `memory` is the shared accessor memory."""
        stop = memory[KERNEL_STOP_OFFSET:KERNEL_STOP_OFFSET + 4].view(np.uint32)
        mine = (stores, tag)
        starting = [i for i, w in enumerate(self._workers[:n - 1]) if once or not w.running() or w.serving != mine]
        for i in starting:
            self._workers[i].send_back()
        first = (int(memory[KERNEL_GEN_OFFSET:KERNEL_GEN_OFFSET + 4].view(np.uint32)[0]) + 1) & 0xFFFFFFFF
        for i in starting:
            w, calls = self._workers[i], stores.calls_at(i, tag)
            w.start(partial(_serve, calls.serve, tag, first, once, stop, w, i + 1))
            w.serving, w.recall = mine, stores.recall
        mark("launched", 0, len(starting))
        trapped = ""
        try:
            ran = int(lead(tag, count, chunk, JOIN_WAIT_NS))  # type: ignore[call-overload]
        except wasmtime.Trap as exc:  # its own chunk, or a limit (call_timeout, fuel) in its wait
            trapped, ran = first_line(exc) or "trap", -1
            stop[0] = 1
        mark("main_done", 0, max(ran, 0))
        if ran >= 0:
            return ""
        stores.recall()  # every thread of this memory back before the caller restores anything
        traps = [trapped] if trapped else []
        for w in self._workers:
            if w.serving is not None and w.serving[0] is stores:
                w.wait()
            if w.trap:
                traps.append(w.trap)
                w.trap = ""
        return traps[0] if traps else "stopped"

    def close(self) -> None:
        with self.lock:
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


def _serve(serve: Run | None, tag: int, first: int, once: bool, stop: np.ndarray, worker: _Worker,
           index: int) -> None:
    """A pool thread's Schedule.QUEUE job; a trap sets the stop word, since the trapped call
    cannot (the other threads then take no more chunks and lead returns)."""
    assert serve is not None
    mark("wake", index)
    try:
        serve(tag, first, ONCE_WAIT_NS if once else LINGER_NS, int(once), 0 if once else SPIN_LOOKS)
    except wasmtime.Trap as exc:
        worker.trap = first_line(exc) or "trap"
        stop[0] = 1
    except BaseException:
        stop[0] = 1
        raise
    mark("finish", index)


def run_piece(run: Run, start: int, end: int) -> str:
    try:
        run(start, end)
    except wasmtime.Trap as exc:
        return first_line(exc) or "trap"
    return ""


def _call(inst: wasmtime.Instance, store: wasmtime.Store, name: str) -> Run:
    func = inst.exports(store)[name]
    assert isinstance(func, wasmtime.Func)
    return export_call(func, store, name)


def kernel_calls(store: wasmtime.Store, kernel: wasmtime.Instance, run_export: str, driver: wasmtime.Module | None,
                 memory: wasmtime.SharedMemory | None, export: str) -> QueueCalls:
    """A kernel instance's run call, and with a driver the driver's `export` (serve or lead) over it."""
    run = _call(kernel, store, run_export)
    if driver is None or memory is None:
        return QueueCalls(run)
    func = kernel.exports(store)[run_export]
    inst = wasmtime.Instance(store, driver, [memory, func])
    queued = _call(inst, store, export)
    return QueueCalls(run, serve=queued) if export == SERVE_EXPORT else QueueCalls(run, lead=queued)


class WorkerStores:
    """One guest instance's pool-thread Stores: store i is pool thread i's; each holds an instance
    of every kernel's CPU module that ran threaded (and the driver over it), over the shared
    accessor memory; a store of its own recalls the threads serving this memory."""

    def __init__(self, engine: wasmtime.Engine, memory: wasmtime.SharedMemory, run_export: str) -> None:
        self._engine = engine
        self._memory = memory
        self._run_export = run_export
        self._stores: list[wasmtime.Store] = []
        self._calls: list[dict[int, QueueCalls]] = []
        self._kernels: dict[int, wasmtime.Module] = {}
        self._arm: Callable[[wasmtime.Store], object] | None = None
        self._pool: WorkerPool | None = None
        self._recall: Run | None = None
        self._recall_store: wasmtime.Store | None = None

    def prepare(self, pool: WorkerPool, tag: int, compiled: wasmtime.Module,
                arm: Callable[[wasmtime.Store], object] | None) -> None:
        """What calls_at needs for this run: the kernel's module and the limits' arming, if any."""
        self._pool = pool
        self._kernels[tag] = compiled
        self._arm = arm
        if self._recall is None:
            store = wasmtime.Store(self._engine)
            self._recall = _call(wasmtime.Instance(store, pool.recaller, [self._memory]), store, RECALL_EXPORT)
            self._recall_store = store

    def recall(self) -> None:
        """Every thread serving this memory back to Python (their store's limits do not matter:
        the recall store's own are armed, so a fuel or epoch limit cannot stop this call)."""
        assert self._recall is not None and self._recall_store is not None
        if self._arm is not None:
            self._arm(self._recall_store)
        self._recall()

    def calls_at(self, i: int, tag: int) -> QueueCalls:
        """Kernel `tag`'s calls in store i (made on first use, armed for this run); the pool
        thread that uses store i must be back in Python."""
        while len(self._stores) <= i:
            self._stores.append(wasmtime.Store(self._engine))
            self._calls.append({})
        store = self._stores[i]
        if self._arm is not None:
            self._arm(store)
        found = self._calls[i].get(tag)
        if found is None:
            assert self._pool is not None
            inst = wasmtime.Instance(store, self._kernels[tag], [self._memory])
            found = self._calls[i][tag] = kernel_calls(store, inst, self._run_export, self._pool.driver, self._memory,
                                                       SERVE_EXPORT)
        return found

    def runs(self, n: int, tag: int) -> list[Run]:
        """Schedule.PIECES: the kernel's run in each of the first n stores (the pool settled)."""
        return [self.calls_at(i, tag).run for i in range(n)]

