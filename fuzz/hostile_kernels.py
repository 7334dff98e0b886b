"""The kernels of the hostile-guest fuzzer: their configuration, their WAT body and the same body
as the model runs it (one scalar call after another, in the order Wasm evaluates the body's calls,
so a trap stops the model exactly where it stops the guest).

Chosen so that every dispatch rule has a kernel that meets it: an integer copy and an in-place
U8 increment (GPU-eligible), a float copy without float consent (always falls back) and with it
(exact on the GPU: a copy), a 64-bit copy (CPU only), a gather that may read out of range (the
GPU raises its error word, the runner traps 3), a threshold (min_elements 5), a configured kernel
the module does not export (INVALID_KERNEL even for count 0), and a kernel whose declared
bindings come in the order 7, 1, 0 with slot 7 unused (aliasing and first-failing-binding order).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from wagogpu import Access, BindingConfig, ElementType, KernelConfig

if TYPE_CHECKING:
    from hostile_model import Model

E, A = ElementType, Access


class ScalarTrap(Exception):
    """A scalar import trapped with this status (`wago_gpu_v1 scalar access: status N`)."""

    def __init__(self, status: int) -> None:
        super().__init__(int(status))
        self.status = int(status)


def _rd(slot: int, t: str, element: str = "(local.get $i)") -> str:
    return f"(call $readBuffer{t} (call $getBuffer (i32.const {slot})) {element})"


def _wr(slot: int, t: str, value: str) -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


def _copy_step(src: int, dst: int, t: str) -> Callable[["Model", int], None]:
    """write<t>(get(dst), i, read<t>(get(src), i)): getBuffer(dst) is evaluated first."""
    def step(m: "Model", i: int) -> None:
        out = m.get(dst)
        m.write(t, out, i, m.read(t, m.get(src), i))
    return step


def _inc_step(m: "Model", i: int) -> None:
    out = m.get(2)
    m.write("U8", out, i, (m.read("U8", m.get(2), i) + 1) & 0xFFFFFFFF)


def _gather_step(m: "Model", i: int) -> None:
    out = m.get(1)
    src = m.get(0)
    inner = m.read("I32", m.get(0), i)
    m.write("I32", out, i, m.read("I32", src, inner))


def _gather_in_range(m: "Model", count: int) -> bool:
    """The GPU commits the gather only if no element reads out of range (else its error word)."""
    buf = m.buffers[m.slots[0]]
    return all(buf.word(i) < buf.length for i in range(count))


@dataclass(frozen=True)
class ModelKernel:
    id: int
    name: str
    bindings: tuple[tuple[int, int, int], ...]  # (slot, element type, access) in configuration order
    body: str
    step: Callable[["Model", int], None]
    relaxed_float: bool = False
    min_elements: int = 0
    exported: bool = True
    gpu: bool = True  # inside the GPU subset with the consent it needs
    in_range: Callable[["Model", int], bool] | None = None

    def config(self) -> KernelConfig:
        return KernelConfig(self.id, f"wago_gpu.kernel.{self.name}", f"wago_gpu.cpu.{self.name}",
                            [BindingConfig(s, ElementType(t), Access(a)) for s, t, a in self.bindings],
                            relaxed_float=self.relaxed_float, min_elements=self.min_elements)

    def gpu_runs(self, m: "Model", count: int) -> bool:
        """Whether a GPU host answers 0 (the kernel ran there and committed)."""
        if not self.gpu or count < self.min_elements:
            return False
        return self.in_range is None or self.in_range(m, count)


_COPY = ((0, E.I32, A.READ), (1, E.I32, A.WRITE))
_FCOPY = ((3, E.F32, A.READ), (4, E.F32, A.WRITE))
_LIST = (
    ModelKernel(1, "copy", _COPY, _wr(1, "I32", _rd(0, "I32")), _copy_step(0, 1, "I32")),
    ModelKernel(2, "inc", ((2, E.U8, A.READ_WRITE),), _wr(2, "U8", f"(i32.add {_rd(2, 'U8')} (i32.const 1))"),
                _inc_step),
    ModelKernel(3, "fcopy", _FCOPY, _wr(4, "F32", _rd(3, "F32")), _copy_step(3, 4, "F32"), gpu=False),
    ModelKernel(4, "fcopyok", _FCOPY, _wr(4, "F32", _rd(3, "F32")), _copy_step(3, 4, "F32"), relaxed_float=True),
    # 64-bit buffers run on the GPU as two words per element (the reference keeps them on the CPU).
    ModelKernel(5, "wide", ((5, E.I64, A.READ), (6, E.I64, A.WRITE)), _wr(6, "I64", _rd(5, "I64")),
                _copy_step(5, 6, "I64")),
    ModelKernel(6, "gather", _COPY, _wr(1, "I32", _rd(0, "I32", _rd(0, "I32"))), _gather_step,
                in_range=_gather_in_range),
    ModelKernel(7, "thresh", _COPY, _wr(1, "I32", _rd(0, "I32")), _copy_step(0, 1, "I32"), min_elements=5),
    ModelKernel(8, "missing", _COPY, "", _copy_step(0, 1, "I32"), exported=False),
    ModelKernel(9, "alias", ((7, E.I32, A.READ), (1, E.I32, A.WRITE), (0, E.I32, A.READ)),
                _wr(1, "I32", _rd(0, "I32")), _copy_step(0, 1, "I32")),
)
KERNELS: dict[int, ModelKernel] = {k.id: k for k in _LIST}
