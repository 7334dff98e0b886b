"""The measured placement's cost model (Config(placement="measured")): per kernel, device and
size band, the recent wall times of the dispatches that ran there, plus the copies residency implies.

Why this shape: an earlier least-squares line (fixed µs + ns per element over all sizes) was
fitted mostly on one-off samples (a band's first dispatch allocates and uploads its buffers) and
on clustered sizes, and went far wrong on the H200 (a GPU that takes 0.24 ms at 8M elements
predicted at 45 ms), after which the bounded exploration never corrected it. Here a prediction
rests only on what was observed near that size: each (device, band) keeps the median of its last
BAND_SAMPLES dispatches (a band is a factor of 2 in elements), with the band's first dispatch
dropped (buffer allocation, pipeline warm-up) and the copies a dispatch made taken out of its time
(they are priced separately: a buffer current only on the other device must move first, per byte
at DEFAULT_NS_PER_BYTE or the rate the copies were measured at, spread over COPY_AMORTIZED
dispatches since the buffer then stays on the device it moved to). A device with fewer than
MIN_SAMPLES samples in a dispatch's band is tried there (exploration is forced, whatever the other
device's prediction), and a device not chosen is re-probed once its band's newest sample is
REPROBE_EVERY decisions old, so a device that got faster is found again at bounded cost.
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

BAND_SAMPLES = 5  # recent dispatches kept per (device, band); the prediction is their median
MIN_SAMPLES = 2  # samples a device needs in a band before its prediction there is trusted
REPROBE_EVERY = 64  # decisions after which the device not chosen is tried again in that band
COPY_AMORTIZED = 8  # dispatches a move is spread over (the buffers stay where they moved); priced
# whole, the first device to hold a buffer would keep every kernel that touches it
DECAY = 0.9  # weight kept by the old copy rate at each measured copy
DEFAULT_NS_PER_BYTE = 1.0  # a copy between device and host before any was measured


class Device(enum.StrEnum):
    GPU = "GPU"
    CPU = "CPU"


def band(elements: int) -> int:
    """The size band of a count: a factor of 2 in elements."""
    return max(elements, 1).bit_length()


@dataclass
class BandCost:
    """One (device, band)'s recent dispatch times."""

    seconds: deque[float] = field(default_factory=lambda: deque(maxlen=BAND_SAMPLES))
    newest: int = 0  # the kernel's decision count at the newest sample
    median: float = 0.0  # (upper) median of `seconds`, kept at each sample (a decision reads it, cheaply)

    def add(self, seconds: float, decision: int) -> None:
        self.seconds.append(max(seconds, 0.0))
        ordered = sorted(self.seconds)
        self.median = ordered[len(ordered) // 2]  # the upper median: statistics.median costs µs here
        self.newest = decision


@dataclass
class DeviceCost:
    """One device's bands for one kernel."""

    samples: int = 0
    bands: dict[int, BandCost] = field(default_factory=dict)

    def add(self, elements: int, seconds: float, decision: int) -> None:
        cost = self.bands.get(band(elements))
        if cost is None:  # the band's first (cold) dispatch: not a sample
            self.bands[band(elements)] = BandCost()
            return
        self.samples += 1
        cost.add(seconds, decision)

    def known(self, elements: int) -> BandCost | None:
        """The band's costs when they rest on enough samples to predict from."""
        cost = self.bands.get(band(elements))
        return cost if cost is not None and len(cost.seconds) >= MIN_SAMPLES else None


@dataclass
class KernelModel:
    """One kernel's costs per device, its last decisions and how many it made."""

    lines: dict[Device, DeviceCost] = field(default_factory=lambda: {d: DeviceCost() for d in Device})
    decisions: int = 0
    # (count, device, predicted seconds there, predicted on the other; -1: exploring), newest last
    last: list[tuple[int, Device, float, float]] = field(default_factory=list)

    def choose(self, elements: int, copy_gpu: float, copy_cpu: float) -> Device:
        """The device predicted faster (copies to it included), or the one to explore."""
        self.decisions += 1
        gpu, cpu = self.lines[Device.GPU].known(elements), self.lines[Device.CPU].known(elements)
        if gpu is None or cpu is None:  # too few samples near this size: try the device lacking them
            return self._note(elements, Device.GPU if gpu is None else Device.CPU, -1.0, -1.0)
        on_gpu, on_cpu = gpu.median + copy_gpu / COPY_AMORTIZED, cpu.median + copy_cpu / COPY_AMORTIZED
        best, other, stale = (Device.GPU, Device.CPU, cpu) if on_gpu <= on_cpu else (Device.CPU, Device.GPU, gpu)
        if self.decisions - stale.newest >= REPROBE_EVERY:
            stale.newest = self.decisions  # one re-probe per REPROBE_EVERY, whatever it measures
            return self._note(elements, other, -1.0, -1.0)
        return self._note(elements, best, min(on_gpu, on_cpu), max(on_gpu, on_cpu))

    def observe(self, device: Device, elements: int, seconds: float) -> None:
        self.lines[device].add(elements, seconds, self.decisions)

    def _note(self, elements: int, device: Device, there: float, other: float) -> Device:
        last = self.last
        last.append((elements, device, there, other))
        if len(last) > 16:
            del last[:-8]
        return device

    def report(self) -> dict[str, object]:
        """The model as the snapshot shows it: each device's median µs per band (keyed by the
        band's smallest count) and the last decisions."""
        out: dict[str, object] = {}
        for device, cost in self.lines.items():
            medians = {str(1 << (b - 1)): round(c.median * 1e6, 1) for b, c in sorted(cost.bands.items()) if c.seconds}
            out[str(device)] = {"samples": cost.samples, "median_us_from_elements": medians}
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
