"""Keep wasmtime's trap handlers in the driver process across ray.init and ray.shutdown.

wasmtime turns a Wasm trap into an exception by catching the fault signal its generated code
raises (SIGILL for `unreachable` and other traps, SIGSEGV/SIGBUS for memory, SIGFPE for integer
division). Ray's driver replaces those process-wide handlers with its crash logger at ray.init
and resets them to the default at ray.shutdown (ray-project/ray#65749, open at Ray 2.60), so in
a driver that also runs guests, the next trap kills the process ("*** SIGILL received ...")
instead of raising wasmtime.Trap. Measured here with Ray 2.60: a trapping guest call after
ray.init, or after ray.shutdown, ends the interpreter with exit status 132.

The handlers are native (installed with sigaction by wasmtime's runtime), so Python's signal
module cannot see them: this module saves and restores the raw dispositions through libc. Ray's
crash logger is given up in the driver only (its workers keep it; there wasmtime installs its own
handlers after Ray's and chains to them).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

__all__ = ["FAULT_SIGNALS", "wasm_trap_handlers"]

Sigaction = Callable[[int, Any, Any], int]

#: The signals wasmtime's traps and memory guards arrive on.
FAULT_SIGNALS: tuple[int, ...] = tuple(
    int(getattr(signal, name)) for name in ("SIGILL", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGTRAP")
    if hasattr(signal, name))
# Room for one `struct sigaction` on every POSIX libc (152 bytes on glibc x86-64).
_SIGACTION_BYTES = 512


def _sigaction() -> Sigaction | None:
    if sys.platform == "win32":  # no sigaction; wasmtime uses vectored exception handlers there
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fn = libc.sigaction
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn


def _install_wasmtime_handlers() -> None:
    """wasmtime installs its handlers once per process, when the first Engine is made."""
    import wasmtime

    wasmtime.Engine()


def _save(sigaction: Sigaction) -> dict[int, ctypes.Array[ctypes.c_char]]:
    saved = {}
    for signum in FAULT_SIGNALS:
        old = ctypes.create_string_buffer(_SIGACTION_BYTES)
        if sigaction(signum, None, old) != 0:
            raise OSError(ctypes.get_errno(), f"sigaction({signum}) could not be read")
        saved[signum] = old
    return saved


def _restore(sigaction: Sigaction, saved: dict[int, ctypes.Array[ctypes.c_char]]) -> None:
    for signum, old in saved.items():
        if sigaction(signum, old, None) != 0:
            raise OSError(ctypes.get_errno(), f"sigaction({signum}) could not be restored")


@contextmanager
def wasm_trap_handlers() -> Iterator[None]:
    """Run the block (ray.init, ray.shutdown) and put the fault handlers back as they were before.

    Use it around a ray.init or ray.shutdown of your own in a process that runs guests; HostPool
    does so for the Ray it starts and stops itself.
    """
    sigaction = _sigaction()
    if sigaction is None:
        yield
        return
    _install_wasmtime_handlers()
    saved = _save(sigaction)
    try:
        yield
    finally:
        _restore(sigaction, saved)
