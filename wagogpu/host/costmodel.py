"""The measured placement's cost model (Config(placement="measured")): per kernel and device, a
dispatch's wall time as fixed µs + ns per element, fitted online from the dispatches that ran
there, plus the copies residency implies.

Why this shape: a dispatch's cost is a fixed part (validation, submission, the thread hop or
pipeline launch) and a part that grows with the elements; both are device- and kernel-specific,
so each (kernel, device) pair keeps its own least-squares line over its recent dispatches
(exponentially weighted, so a device that got slower or faster is followed). A buffer whose only
current copy is on the other device must move first: that is priced per byte at each direction's
rate, learned from the copies the residency layer made (TransferCounters) and started at a
conservative default. A device's first dispatch of a kernel is not a sample (it compiles the CPU
module or meets a cold pipeline). Exploration is bounded: each device is tried until it has
MIN_SAMPLES samples and once in every size band (a factor of 4 in elements) it has none in, so a
line fitted at small counts is not stretched to large ones unseen; beyond that the other device
only every EXPLORE_EVERY dispatches, and only while its prediction is within EXPLORE_RATIO.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

DECAY = 0.9  # weight kept by older dispatches at each new one (about the last 10 count)
MIN_SAMPLES = 2
EXPLORE_EVERY = 32
EXPLORE_RATIO = 4.0
DEFAULT_NS_PER_BYTE = 1.0  # a copy between device and host before any was measured


class Device(enum.StrEnum):
    GPU = "GPU"
    CPU = "CPU"


def band(elements: int) -> int:
    return max(elements, 1).bit_length() // 2


@dataclass
class LinearCost:
    """Weighted least squares of seconds over elements: the sums of its normal equations."""

    samples: int = 0
    seen_first: bool = False  # the cold first dispatch went by
    bands: set[int] = field(default_factory=set)  # size bands (factors of 4) it has samples in
    w: float = 0.0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0

    def add(self, elements: int, seconds: float) -> None:
        if not self.seen_first:
            self.seen_first = True
            return
        self.samples += 1
        self.bands.add(band(elements))
        x = float(elements)
        self.w = self.w * DECAY + 1.0
        self.sx = self.sx * DECAY + x
        self.sy = self.sy * DECAY + seconds
        self.sxx = self.sxx * DECAY + x * x
        self.sxy = self.sxy * DECAY + x * seconds

    def line(self) -> tuple[float, float]:
        """(fixed seconds, seconds per element); a single size gives a line through the origin."""
        if not self.w:
            return 0.0, 0.0
        det = self.w * self.sxx - self.sx * self.sx
        if det <= 1e-9 * self.w * self.sxx:  # one distinct size so far
            return 0.0, (self.sy / self.sx if self.sx else 0.0)
        slope = (self.w * self.sxy - self.sx * self.sy) / det
        slope = max(slope, 0.0)
        fixed = max((self.sy - slope * self.sx) / self.w, 0.0)
        return fixed, slope

    def predict(self, elements: int) -> float:
        fixed, slope = self.line()
        return fixed + slope * elements


@dataclass
class KernelModel:
    """One kernel's lines per device, its last decisions and how many it made."""

    lines: dict[Device, LinearCost] = field(default_factory=lambda: {d: LinearCost() for d in Device})
    decisions: int = 0
    # (count, device, predicted seconds there, predicted on the other; -1: exploring), newest last
    last: list[tuple[int, Device, float, float]] = field(default_factory=list)

    def choose(self, elements: int, copy_gpu: float, copy_cpu: float) -> Device:
        """The device predicted faster (copies to it included), or the one to explore."""
        self.decisions += 1
        gpu, cpu = self.lines[Device.GPU], self.lines[Device.CPU]
        b = band(elements)
        for device, line in ((Device.GPU, gpu), (Device.CPU, cpu)):
            if line.samples < MIN_SAMPLES or b not in line.bands:
                return self._note(elements, device, -1.0, -1.0)
        on_gpu, on_cpu = gpu.predict(elements) + copy_gpu, cpu.predict(elements) + copy_cpu
        best, other = (Device.GPU, Device.CPU) if on_gpu <= on_cpu else (Device.CPU, Device.GPU)
        low, high = min(on_gpu, on_cpu), max(on_gpu, on_cpu)
        if self.decisions % EXPLORE_EVERY == 0 and high <= EXPLORE_RATIO * low:
            return self._note(elements, other, -1.0, -1.0)
        return self._note(elements, best, low, high)

    def _note(self, elements: int, device: Device, there: float, other: float) -> Device:
        last = self.last
        last.append((elements, device, there, other))
        if len(last) > 16:
            del last[:-8]
        return device

    def report(self) -> dict[str, object]:
        """The model as the snapshot shows it: each device's line and the last decisions."""
        out: dict[str, object] = {}
        for device, line in self.lines.items():
            fixed, slope = line.line()
            out[str(device)] = {"samples": line.samples, "fixed_us": fixed * 1e6, "ns_per_element": slope * 1e9}
        out["decisions"] = self.decisions
        out["last"] = [{"elements": n, "device": str(d), "why": "exploring" if t < 0 else
                        f"predicted {t * 1e6:.1f} us against {o * 1e6:.1f} us"} for n, d, t, o in self.last[-8:]]
        return out


@dataclass
class CostModels:
    """One Host's models: per (module, kernel), and the copy rate of each direction."""

    kernels: dict[tuple[int, int], KernelModel] = field(default_factory=dict)
    ns_per_byte: dict[Device, float] = field(default_factory=lambda: {d: DEFAULT_NS_PER_BYTE for d in Device})

    def model(self, module_id: int, kernel_id: int) -> KernelModel:
        found = self.kernels.get((module_id, kernel_id))
        if found is None:
            found = self.kernels[(module_id, kernel_id)] = KernelModel()
        return found

    def copy_seconds(self, to_device: Device, nbytes: int) -> float:
        return nbytes * self.ns_per_byte[to_device] * 1e-9

    def note_copy(self, to_device: Device, nbytes: int, seconds: float) -> None:
        """A measured copy toward `to_device` (host -> GPU upload, GPU -> host readback)."""
        if nbytes >= 4096 and seconds > 0:
            rate = seconds * 1e9 / nbytes
            self.ns_per_byte[to_device] = DECAY * self.ns_per_byte[to_device] + (1 - DECAY) * rate
