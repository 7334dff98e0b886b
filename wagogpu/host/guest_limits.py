"""Time, fuel, memory and table limits on an untrusted guest (Config.call_timeout, .fuel,
.max_memory_bytes, .max_table_elements; docs/untrusted.md).

call_timeout uses wasmtime's epoch interruption: one process-wide ticker thread advances the epoch
of every Host's engine that asked for it every TICK_SECONDS, and each outermost guest call sets
its store's deadline that many ticks ahead. Compiled code checks the epoch at function entries and
loop headers only, so a host function (an import, Host.define_func) is never cut halfway: its own
time is not bounded, and the trap lands at the guest's next check after it returns. Fuel works
the same way per call. A re-entry from a host function into a call already under way shares that
call's deadline and fuel (a fresh budget per re-entry would let a guest that calls back into
itself run for ever).

The memory and table limits are wasmtime's store limits, which hold for every memory and table of
a store, and the store also holds the plugin's accessor memory (the buffers' bytes, bounded by
max_instance_buffer_bytes already). So the limit is lifted while the host grows the accessor
memory (AccessorMemory.grow runs as host code, while the guest waits in an import) and put back
right after.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

import wasmtime

from ..config import Config

__all__ = ["TICK_SECONDS", "GuestLimits", "LimitTrap", "EpochTicker", "TICKER"]

#: How often the epoch advances; an interrupt lands at most about one tick after call_timeout.
TICK_SECONDS = 0.01
#: What the store limit is lifted to while the host grows its own accessor memory.
_UNLIMITED = (1 << 62)


class LimitTrap(wasmtime.Trap):
    """The trap of a guest call stopped by a limit; ``limit`` is the Config field ("call_timeout"
    or "fuel"). A wasmtime.Trap, so code that catches traps catches it too."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class EpochTicker:
    """Advances the epoch of every watched engine every TICK_SECONDS, on one daemon thread that
    runs while any engine is watched."""

    def __init__(self, period: float = TICK_SECONDS) -> None:
        self.period = period
        self._engines: dict[int, wasmtime.Engine] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, engine: wasmtime.Engine) -> None:
        with self._lock:
            self._engines[id(engine)] = engine
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wagogpu-epoch", daemon=True)
                self._thread.start()

    def unwatch(self, engine: wasmtime.Engine) -> None:
        with self._lock:
            self._engines.pop(id(engine), None)

    def _run(self) -> None:
        """Tick k is due at start + k * period; ticks missed while this thread waited for the CPU or
        the GIL are made up at once, so the epoch keeps counting real time (a late tick delays
        an interrupt by its own lateness only; it never adds up over a long deadline)."""
        clock, period = time.perf_counter, self.period
        start, done = clock(), 0
        while True:
            delay = start + (done + 1) * period - clock()
            if delay > 0:
                time.sleep(delay)
            with self._lock:
                engines = list(self._engines.values())
                if not engines:
                    self._thread = None
                    return
            due = int((clock() - start) / period)
            for _ in range(max(1, due - done)):
                for engine in engines:
                    engine.increment_epoch()
            done = max(done + 1, due)


TICKER = EpochTicker()


@dataclass(frozen=True)
class GuestLimits:
    """One Host's guest limits, resolved once from its Config (None: that limit is off)."""

    call_timeout: float | None
    fuel: int | None
    max_memory_bytes: int | None
    max_table_elements: int | None

    @classmethod
    def from_config(cls, config: Config) -> GuestLimits:
        return cls(config.call_timeout, config.fuel, config.max_memory_bytes, config.max_table_elements)

    @property
    def per_call(self) -> bool:
        """Whether each guest call must arm its store (a deadline or fuel)."""
        return self.call_timeout is not None or self.fuel is not None

    @property
    def stores_limited(self) -> bool:
        return self.max_memory_bytes is not None or self.max_table_elements is not None

    @property
    def ticks(self) -> int:
        """Epoch ticks from now to the deadline: one more than the timeout holds, because the next
        tick may come at once; so the trap lands between call_timeout and one tick after it."""
        assert self.call_timeout is not None
        return math.ceil(self.call_timeout / TICK_SECONDS) + 1

    def arm(self, store: wasmtime.Store) -> None:
        """Start a guest call: a deadline call_timeout from now, and a full tank of fuel."""
        if self.call_timeout is not None:
            store.set_epoch_deadline(self.ticks)
        if self.fuel is not None:
            store.set_fuel(self.fuel)

    def restrict(self, store: wasmtime.Store) -> None:
        """The guest's limits on every memory and table made or grown in store from now on."""
        store.set_limits(memory_size=_or_unlimited(self.max_memory_bytes),
                         table_elements=_or_unlimited(self.max_table_elements))

    def host_grow(self, store: wasmtime.Store, grow: Callable[[int], object]) -> Callable[[int], object]:
        """grow(pages) for a memory of the host's own (the accessor memory), lifting the memory
        limit around it when there is one."""
        if self.max_memory_bytes is None:
            return grow

        def unlimited_grow(pages: int) -> object:
            store.set_limits(memory_size=_UNLIMITED, table_elements=_or_unlimited(self.max_table_elements))
            try:
                return grow(pages)
            finally:
                self.restrict(store)

        return unlimited_grow

    def translate(self, exc: wasmtime.Trap, what: str) -> wasmtime.Trap:
        """A LimitTrap naming the limit for wasmtime's interrupt or out-of-fuel trap; exc otherwise."""
        code = exc.trap_code
        if code is wasmtime.TrapCode.INTERRUPT and self.call_timeout is not None:
            return LimitTrap("call_timeout", f"call_timeout: {what} ran past its {self.call_timeout:g} s deadline "
                                             "(wasm trap: interrupt)")
        if code is wasmtime.TrapCode.OUT_OF_FUEL and self.fuel is not None:
            return LimitTrap("fuel", f"fuel: {what} used up its {self.fuel} units of fuel "
                                     "(wasm trap: all fuel consumed by WebAssembly)")
        return exc

    def refusal(self, text: str) -> str:
        """wasmtime's instantiation error for a memory or table that starts above a limit, naming it."""
        if "memory limits" in text and self.max_memory_bytes is not None:
            return f"{text} (max_memory_bytes={self.max_memory_bytes})"
        if "table limits" in text and self.max_table_elements is not None:
            return f"{text} (max_table_elements={self.max_table_elements})"
        return text


def _or_unlimited(value: int | None) -> int:
    return _UNLIMITED if value is None else value
