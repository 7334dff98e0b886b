"""Threads for CPU kernels (Config.cpu_threads): the index range split across threads that run
Wasm with the GIL released.

Why this design: a wasmtime Store runs on one thread at a time, so each thread has a Store of its
own with its own instance of the kernel's CPU module; they reach the same bytes because the
instance's accessor memory is then a shared memory (Wasm threads), made so when the Host is
configured for more than one thread. The calling thread runs the first piece itself in the guest's
store. Calls go through wasmtime's unchecked C entry point via cffi, which releases the GIL for
the call. The GPU compiler proved that no written slot is read at another element, so any split
gives the bytes one thread gives. Kernels that load guest memory run on one thread: the guest's
own memory is not shared.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import wasmtime

from ..config import Config
from ._wasmtime import export_call
from .context import RuntimeContext
from .engine import first_line

PIECES_PER_THREAD = 4
MIN_PIECE = 32768  # elements below which another thread costs more than it saves (a GIL hand-off is ~10-50 us)
SHARED_PAGES = 65536  # the shared accessor memory's maximum (4 GiB of address space, reserved not used)

Run = Callable[..., object]


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


def pieces(count: int, threads: int) -> list[tuple[int, int]]:
    """[start, end) of each piece of [0, count): PIECES_PER_THREAD per thread (uneven work, such as
    Mandelbrot's rows, evens out as threads take the next piece), none below MIN_PIECE but one."""
    k = max(1, min(threads * PIECES_PER_THREAD, count // MIN_PIECE))
    bounds = [count * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


class WorkerPool:
    """One Host's CPU-kernel threads (made on the first threaded run, stopped with the Host)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._executor = ThreadPoolExecutor(max(1, threads - 1), thread_name_prefix="wagogpu-cpu")

    def run(self, runs: list[Run], work: list[tuple[int, int]]) -> str:
        """The pieces of `work`, taken in turn by one thread per run (runs[0] on this thread, each
        other run on a pool thread); the first line of the first trap, "" when every piece finished
        (after a trap no thread takes another piece)."""
        queue = iter(work)  # next() on a list iterator is atomic under the GIL
        traps: list[str] = []
        futures = [self._executor.submit(_drain, run, queue, traps) for run in runs[1:]]
        _drain(runs[0], queue, traps)
        for f in futures:
            f.result()
        return traps[0] if traps else ""

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def _drain(run: Run, queue: Iterator[tuple[int, int]], traps: list[str]) -> None:
    for start, end in queue:
        if traps:
            return
        trapped = run_piece(run, start, end)
        if trapped:
            traps.append(trapped)


def run_piece(run: Run, start: int, end: int) -> str:
    try:
        run(start, end)
    except wasmtime.Trap as exc:
        return first_line(exc) or "trap"
    return ""


class WorkerStores:
    """One guest instance's worker Stores: store i runs piece i + 1; each holds an instance of
    every kernel's CPU module that ran threaded, over the shared accessor memory."""

    def __init__(self, engine: wasmtime.Engine, memory: wasmtime.SharedMemory) -> None:
        self._engine = engine
        self._memory = memory
        self._stores: list[wasmtime.Store] = []
        self._runs: list[dict[int, Run]] = []

    def runs(self, kernel_id: int, compiled: wasmtime.Module, export: str, n: int,
             arm: Callable[[wasmtime.Store], object] | None = None) -> list[Run]:
        """The kernel's run call in each of the first n worker stores (made on first use); `arm`
        sets each store's limits for this run (the guest's call_timeout and fuel, when configured)."""
        while len(self._stores) < n:
            self._stores.append(wasmtime.Store(self._engine))
            self._runs.append({})
        out = []
        for store, runs in zip(self._stores[:n], self._runs):
            if arm is not None:
                arm(store)
            found = runs.get(kernel_id)
            if found is None:
                inst = wasmtime.Instance(store, compiled, [self._memory])
                func = inst.exports(store)[export]
                assert isinstance(func, wasmtime.Func)
                found = runs[kernel_id] = export_call(func, store, export)
            out.append(found)
        return out

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()
        self._runs.clear()
