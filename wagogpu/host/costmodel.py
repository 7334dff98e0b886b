"""The measured placement's cost model (Config(placement="measured")): per kernel and device, a
dispatch's wall time as fixed µs + ns per element, fitted online from the dispatches that ran
there, plus the copies residency implies.

Why this shape: a dispatch's cost is a fixed part (validation, submission, the thread hop or
pipeline launch) and a part that grows with the elements; both are device- and kernel-specific,
so each (kernel, device) pair keeps its own least-squares line over its recent dispatches
(exponentially weighted, so a device that got slower or faster is followed). A buffer whose only
current copy is on the other device must move first: that is priced per byte at each direction's
rate, learned from the copies the residency layer made (TransferCounters) and started at a
conservative default. Exploration is bounded: each device is tried until it has MIN_SAMPLES
dispatches, then the other device only every EXPLORE_EVERY dispatches, and only while its
prediction is within EXPLORE_RATIO of the chosen one's.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

DECAY = 0.9  # weight kept by older dispatches at each new one (about the last 10 count)
MIN_SAMPLES = 3
EXPLORE_EVERY = 32
EXPLORE_RATIO = 4.0
DEFAULT_NS_PER_BYTE = 1.0  # a copy between device and host before any was measured


class Device(enum.StrEnum):
    GPU = "GPU"
    CPU = "CPU"


@dataclass
class LinearCost:
    """Weighted least squares of seconds over elements: the sums of its normal equations."""

    samples: int = 0
    w: float = 0.0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0

    def add(self, elements: int, seconds: float) -> None:
        self.samples += 1
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
    last: list[tuple[int, str, str]] = field(default_factory=list)  # (count, device, why), newest last

    def choose(self, elements: int, copy_seconds: dict[Device, float]) -> tuple[Device, str]:
        """The device predicted faster (copies included), or the one to explore, and why."""
        self.decisions += 1
        for device in Device:
            if self.lines[device].samples < MIN_SAMPLES:
                return self._note(elements, device, "exploring")
        cost = {d: self.lines[d].predict(elements) + copy_seconds.get(d, 0.0) for d in Device}
        best = min(cost, key=lambda d: cost[d])
        other = Device.CPU if best is Device.GPU else Device.GPU
        if self.decisions % EXPLORE_EVERY == 0 and cost[other] <= EXPLORE_RATIO * cost[best]:
            return self._note(elements, other, "exploring")
        return self._note(elements, best, f"predicted {cost[best] * 1e6:.1f} us against {cost[other] * 1e6:.1f} us")

    def _note(self, elements: int, device: Device, why: str) -> tuple[Device, str]:
        self.last.append((elements, str(device), why))
        del self.last[:-8]
        return device, why

    def report(self) -> dict[str, object]:
        """The model as the snapshot shows it: each device's line and the last decisions."""
        out: dict[str, object] = {}
        for device, line in self.lines.items():
            fixed, slope = line.line()
            out[str(device)] = {"samples": line.samples, "fixed_us": fixed * 1e6, "ns_per_element": slope * 1e9}
        out["decisions"] = self.decisions
        out["last"] = list(self.last)
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
