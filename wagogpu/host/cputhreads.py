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
from typing import Callable

import wasmtime

from ..config import Config
from ._wasmtime import export_call
from .context import RuntimeContext
from .engine import first_line

MIN_PIECE = 16384  # elements below which another thread costs more than it saves (a thread hop is ~10-50 us)
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
    """[start, end) of each piece of [0, count): at most `threads`, none below MIN_PIECE but one."""
    k = max(1, min(threads, count // MIN_PIECE))
    bounds = [count * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


class WorkerPool:
    """One Host's CPU-kernel threads (made on the first threaded run, stopped with the Host)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._executor = ThreadPoolExecutor(max(1, threads - 1), thread_name_prefix="wagogpu-cpu")

    def run(self, calls: list[tuple[Run, int, int]]) -> list[str]:
        """Each (run, start, end) on a thread of its own but the first, which runs here; the first
        line of each piece's trap, "" for a piece that finished."""
        futures = [self._executor.submit(run_piece, run, s, e) for run, s, e in calls[1:]]
        first = run_piece(*calls[0])
        return [first] + [f.result() for f in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True)


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

    def runs(self, kernel_id: int, compiled: wasmtime.Module, export: str, n: int) -> list[Run]:
        """The kernel's run call in each of the first n worker stores (made on first use)."""
        while len(self._stores) < n:
            self._stores.append(wasmtime.Store(self._engine))
            self._runs.append({})
        out = []
        for store, runs in zip(self._stores[:n], self._runs):
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
