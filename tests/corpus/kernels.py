"""The corpus kernels: their buffer contracts, input domains and plain-numpy answers.

One row per kernel; its position in KERNELS is its kernel ID (1-based), the same ID every language's
driver (src/*/) uses to find the CPU runner. A kernel's sources in C, Zig, AssemblyScript and Go must
compute exactly the function written here in `reference` (integers bit-exact; floats up to the
kernel's `reference_bound`, which is loose only where a libm routine is involved, since musl, Zig's
std.math, AssemblyScript's Mathf and Go's math each round a little differently).
"""
from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from wagogpu import Access, BindingConfig, ElementType, KernelConfig
from wagogpu.abi.table import TYPE_INFO, NumberKind

from .languages import ALL, NOT_GO, Language

Arrays = dict[int, np.ndarray]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
U32_MAX = 2**32 - 1
INF, NAN = float("inf"), float("nan")

# From the ABI table's element rows (numpy dtype name, number kind).
DTYPES: dict[ElementType, type] = {t: np.dtype(info.numpy).type for t, info in TYPE_INFO.items()}
FLOAT_TYPES = frozenset(t for t, info in TYPE_INFO.items() if info.kind is NumberKind.FLOAT)


GO_TOO = ALL  # the kernels the Go cell has too


@dataclass(frozen=True)
class Domain:
    """Where a slot's inputs come from: the `edges` first (in order), then uniform draws from
    [lo, hi]; with `small`, every other draw comes from that narrower range instead (so division,
    gcd and the like see small operands, not only huge ones)."""

    lo: float
    hi: float
    edges: tuple[float, ...] = ()
    small: tuple[float, float] | None = None

    def _draw(self, rng: np.random.Generator, lo: float, hi: float, n: int, floats: bool) -> np.ndarray:
        if floats:
            return rng.uniform(lo, hi, n)
        return rng.integers(int(lo), int(hi), n, endpoint=True, dtype=np.int64)

    def sample(self, rng: np.random.Generator, n: int, etype: ElementType) -> np.ndarray:
        floats = etype in FLOAT_TYPES
        draws = self._draw(rng, self.lo, self.hi, n, floats)
        if self.small is not None:
            draws[1::2] = self._draw(rng, *self.small, draws[1::2].size, floats)
        draws[:len(self.edges[:n])] = self.edges[:n]
        return draws.astype(DTYPES[etype])


@dataclass(frozen=True)
class Bound:
    """How close two answers must be. Floats: |a - b| <= rel * max(floor, |b|), so Bound(0, 0) is
    exact (equal values: +0 and -0 are equal; NaN only matches NaN). Integers: |a - b| <= slack."""

    rel: float
    floor: float
    slack: int = 0


EXACT = Bound(0.0, 0.0)
LIBM = Bound(2.0**-18, 1.0)  # CPU guest vs numpy where libm is involved: 32 ulps, absolute below 1 (cancellation)
RELAXED_REL = 2.0**-19  # GPU vs CPU under relaxed_float: 16 f32 ulps of max(|cpu|, the kernel's scale)


@dataclass(frozen=True)
class Slot:
    """One binding of the kernel's contract, with the inputs it gets when it is read."""

    slot: int
    type: ElementType
    access: Access
    domain: Domain | None = None  # None for a slot that is only written


@dataclass(frozen=True)
class Kernel:
    """A corpus kernel: `reference` maps the input arrays (by slot) to the expected contents of
    every written slot."""

    name: str
    slots: tuple[Slot, ...]
    reference: Callable[[Arrays], Arrays]
    what: str
    languages: frozenset[Language] = NOT_GO
    reference_bound: Bound = EXACT
    scale: float = 1.0  # the magnitude of the kernel's intermediate values, for the GPU bound

    @property
    def is_float(self) -> bool:
        """Float kernels need relaxed_float consent for the GPU path (docs/design/abi.md §5.5)."""
        return any(s.type in FLOAT_TYPES for s in self.slots)

    @property
    def layout(self) -> int:
        """The driver's slot layout word: slot s's element type in bits 4s..4s+3 (0 = unused)."""
        return sum(int(s.type) << (4 * s.slot) for s in self.slots)

    def written(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.slots if s.access != Access.READ)

    def config(self, kernel_id: int) -> KernelConfig:
        return KernelConfig(kernel_id, f"wago_gpu.kernel.{self.name}", f"wago_gpu.cpu.{self.name}",
                            tuple(BindingConfig(s.slot, s.type, s.access) for s in self.slots),
                            relaxed_float=self.is_float)

    def inputs(self, n: int) -> Arrays:
        """Fixed pseudo-random inputs: the seed is the kernel's name, so every run sees the same."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        return {s.slot: s.domain.sample(rng, n, s.type) for s in self.slots if s.domain is not None}
