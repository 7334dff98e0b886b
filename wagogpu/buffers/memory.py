"""How the buffer layer reaches a linear memory without knowing wasmtime.

The host hands each InstanceBuffers an AccessorMemory: two callables over the instance's accessor
memory (where it is now, and grow it). Views are numpy arrays over that address, valid until the
memory grows; only the buffer layer grows an accessor memory, so it knows when to view it anew.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Callable

import numpy as np

PAGE = 65536


@dataclass(frozen=True)
class AccessorMemory:
    """span() -> (address, byte length) of the memory now; grow(pages) adds whole Wasm pages."""

    span: Callable[[], tuple[int, int]]
    grow: Callable[[int], object]

    def grow_to(self, nbytes: int) -> bool:
        """Make the memory at least nbytes long; True when it grew (old views are invalid then)."""
        _address, have = self.span()
        if nbytes <= have:
            return False
        self.grow(-(-(nbytes - have) // PAGE))
        return True


def view_at(address: int, size: int) -> np.ndarray:
    """size bytes at address as a writable uint8 numpy view (no copy); empty for size 0."""
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * size).from_address(address))
