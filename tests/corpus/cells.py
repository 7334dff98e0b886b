"""The corpus cells: one module per language and optimisation level, built by build.py into wasm/.

A cell's flags are everything that differs between levels; the flags common to a language live in
build.py next to the pinned toolchain that uses them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .languages import Language

if TYPE_CHECKING:
    from .kernels import Kernel

HERE = Path(__file__).resolve().parent
WASM_DIR = HERE / "wasm"


@dataclass(frozen=True)
class Cell:
    """One language x level: the module `wasm/<language>-<level>.wasm`."""

    language: Language
    level: str
    flags: tuple[str, ...]

    @property
    def file_name(self) -> str:
        return f"{self.language.value}-{self.level}.wasm"

    @property
    def label(self) -> str:
        return f"{self.language.value} {self.level}"

    def path(self, folder: Path = WASM_DIR) -> Path:
        return folder / self.file_name

    def kernels(self) -> list[tuple[int, Kernel]]:
        """(kernel ID, kernel) for every kernel this cell's language implements."""
        from .table import KERNELS  # numpy and wagogpu: not needed to build the modules

        return [(i, k) for i, k in enumerate(KERNELS, start=1) if self.language in k.languages]


CELLS: tuple[Cell, ...] = (
    # zig cc compiles -O1..-O3 all at clang -O2 (its ReleaseFast); -Xclang hands the level to clang
    # itself, so each C cell is what clang -On emits (libc is zig's optimised wasi-libc throughout).
    *(Cell(Language.C, level, (f"-{level}", "-Xclang", f"-{level}")) for level in ("O0", "O1", "O2", "O3", "Os")),
    *(Cell(Language.ZIG, level, ("-O", level)) for level in ("Debug", "ReleaseSafe", "ReleaseFast", "ReleaseSmall")),
    Cell(Language.AS, "default", ()),
    Cell(Language.AS, "O3", ("-O3",)),
    Cell(Language.AS, "Os", ("-Os",)),
    Cell(Language.GO, "default", ()),
    Cell(Language.GO, "N-l", ("-gcflags=-N -l",)),  # the main package unoptimised and not inlined
)
