"""The measured placement's cost model (Config(placement="measured")): per kernel and size band,
what a dispatch costs on each device without moving data, and per direction what a move costs.

Why this shape. A prediction rests only on what was observed near that size: each (device, band)
keeps its last BAND_SAMPLES dispatch times (a band is a factor of 2 in elements) and predicts their
lower median. The first SETTLE dispatches of a run on a device are transients, not samples: the
band's first (buffer allocation, pipeline warm-up), the GPU's second (its second output buffer),
and after a change of device the moves and the read-ahead copies a readback leaves asked for
(two GPU dispatches carry one each; on the H200 about 0.4 ms a time). Other one-off costs only
ever add time, which the lower median ignores while most samples are plain ones.
The copies a dispatch made (uploads, readbacks: their measured seconds) are taken out of its
sample and feed the copy lines instead, one per direction: seconds = fixed + per byte, fitted by
least squares over the recent copies of every import (docs/cpu-kernels.md). A dispatch is
predicted at its band's estimate plus the copies that residency implies there now (buffers current
only on the other device), priced on those lines.

Choosing. A device with fewer than MIN_SAMPLES samples in the band is tried (forced exploration).
Otherwise the device predicted cheaper, moves included, runs, except where the other device has
the faster kernel and only the move keeps the kernel away: then staying adds the kernels'
difference to the band's deficit, and once that sum reaches what the move costs beyond staying the
kernel moves (the ski-rental rule: at most twice the best schedule's cost, whether the data then
stays or has to move again each time). The device not chosen is probed again, SETTLE + 1
dispatches there so that the last is a sample, once the band has spent PROBE_RATIO times what the
last probe cost (its dispatches, and the moves and transients of the SETTLE dispatches back, which
the kernels' estimates alone decide), so probes take about 1/PROBE_RATIO of the time whatever the
devices' ratio; a probe that
comes out well below the device's estimate, and below the other device's, is followed at once by
another, until the estimate (a median) follows, so a device that got faster is found again within a
bounded time.

Cost. This runs on every dispatch, in Python: a settled decision (nothing to move, no probe due,
the device's newest sample near its estimate) repeats for STREAK dispatches without being asked
again, the streak's last dispatch the one sampled, and any move ends the streak.
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

BAND_SAMPLES = 5  # recent dispatches kept per (device, band); the estimate is their lower median
MIN_SAMPLES = 2  # samples a device needs in a band before its estimate there is trusted
PROBE_RATIO = 32.0  # the band spends this many times a probe's predicted cost between probes
RECHECK_BELOW = 0.75  # a sample under this share of the estimate (and the other's) asks for another probe at once
STREAK = 8  # a settled decision (no move, no probe due) holds this many dispatches, one of them sampled
SETTLE = 2  # dispatches after a change of device that are transients (a move, read-aheads, allocations), not samples
COPY_DECAY = 0.8  # weight an older copy keeps at each newer one of the same direction
DEFAULT_COPY_FIXED = 20e-6  # seconds per copy before one was measured
DEFAULT_NS_PER_BYTE = 1.0  # ... and per byte (1 GB/s)


class TransferTimes(Protocol):
    """What the copy lines read of an import's record (diagnostics.BufferOperation)."""

    gpu_download_bytes: int
    download_count: int
    download: float
    conversion: float


class Device(enum.StrEnum):
    GPU = "GPU"
    CPU = "CPU"


class Why(enum.StrEnum):
    """Why a decision went where it did (the snapshot's `last`)."""

    EXPLORING = "exploring"  # too few samples in the band
    PREDICTED = "predicted"  # cheaper, moves included
    MOVED = "moved"  # the faster kernel's move paid for by the band's deficit
    PROBE = "probe"  # the device not chosen, tried again


def band(elements: int) -> int:
    """The size band of a count: a factor of 2 in elements."""
    return max(elements, 1).bit_length()


@dataclass(slots=True)
class DeviceBand:
    """One (device, band)'s recent dispatch times, moves taken out."""

    seconds: deque[float] = field(default_factory=lambda: deque(maxlen=BAND_SAMPLES))
    known: bool = False  # at least MIN_SAMPLES samples: the estimate is trusted
    estimate: float = 0.0  # lower median of `seconds`, kept at each sample (a decision reads it, cheaply)
    recheck: bool = False  # the newest sample fell well below the estimate: probe again at once
    settled: bool = False  # the newest sample was near the estimate: its decisions may repeat (STREAK)
    samples: int = 0  # samples taken in all

    def add(self, seconds: float) -> None:
        self.samples += 1
        samples = self.seconds
        samples.append(seconds)
        n = len(samples)
        estimate = self.estimate
        self.recheck = self.known and seconds < RECHECK_BELOW * estimate
        self.settled = self.known and RECHECK_BELOW * seconds <= estimate and not self.recheck
        self.estimate = sorted(samples)[(n - 1) // 2] if n > 1 else seconds
        self.known = n >= MIN_SAMPLES


class Probe(enum.IntEnum):
    """Where a band is in accounting for its last probe."""

    NONE = 0
    SENT = 1  # the probe's SETTLE + 1 dispatches on the other device are under way
    BACK = 2  # the probe ran: the next SETTLE dispatches back, moves and transients, are its cost too


@dataclass(slots=True)
class Band:
    """One size band of one kernel: each device's costs, the probe accounting and the deficit."""

    gpu: DeviceBand = field(default_factory=DeviceBand)
    cpu: DeviceBand = field(default_factory=DeviceBand)
    since: float = 0.0  # seconds the band's dispatches took since its last probe (probes' own cost apart)
    probe_cost: float = -1.0  # what the last probe cost, the moves back included (-1: none yet)
    probe: Probe = Probe.NONE
    probed: Device = Device.GPU  # the device of the probe being accounted for
    probe_left: int = 0  # dispatches of the probe (SENT) or of its way back (BACK) still to come
    last_device: Device | None = None  # the device of the band's previous dispatch
    run: int = 0  # consecutive dispatches of the band on last_device (the current one included)
    deficit: float = 0.0  # seconds lost by staying off the faster kernel since the last move
    streak: int = 0  # dispatches left that repeat the last settled decision without asking again
    streak_device: Device = Device.GPU


_GPU, _CPU = Device.GPU, Device.CPU
_EXPLORING, _PREDICTED, _MOVED, _PROBE = Why.EXPLORING, Why.PREDICTED, Why.MOVED, Why.PROBE
_NO_PROBE, _SENT, _BACK = Probe.NONE, Probe.SENT, Probe.BACK
# (count, device, why, predicted seconds there, predicted on the other; -1: not predicted)
Decision = tuple[int, Device, Why, float, float]


@dataclass
class KernelModel:
    """One kernel's bands, its last decisions and how many it made."""

    bands: dict[int, Band] = field(default_factory=dict)
    decisions: int = 0
    last: deque[Decision] = field(default_factory=lambda: deque(maxlen=8))

    def band_of(self, elements: int) -> Band:
        b = elements.bit_length() if elements > 0 else 1
        found = self.bands.get(b)
        if found is None:
            found = self.bands[b] = Band()
        return found

    def repeat(self, elements: int) -> Device | None:
        """The device of a settled decision that repeats without asking (STREAK), counted as a
        decision; None when the band has none running. Asked before choose(), before the moves
        are priced: a dispatch that moved data after all ends the streak when observed."""
        bd = self.bands.get(elements.bit_length())
        if bd is None or not bd.streak:
            return None
        bd.streak -= 1
        self.decisions += 1
        return bd.streak_device

    def choose(self, elements: int, move_gpu: float, move_cpu: float) -> Device:
        """Where a dispatch of `elements` runs, given what the moves to each device cost now (asked
        once repeat() found no streak running)."""
        self.decisions += 1
        bd = self.bands.get(elements.bit_length()) or self.band_of(elements)
        if bd.probe is _SENT:  # a probe runs until it has a settled sample
            return bd.probed
        gpu, cpu = bd.gpu, bd.cpu
        if not (gpu.known and cpu.known):
            device = _GPU if not gpu.known else _CPU
            self.last.append((elements, device, _EXPLORING, -1.0, -1.0))
            return device
        if bd.probe is _BACK:  # just after a probe: the kernels alone decide (the move back is the probe's cost)
            device = _GPU if gpu.estimate <= cpu.estimate else _CPU
            self.last.append((elements, device, _PREDICTED, min(gpu.estimate, cpu.estimate),
                              max(gpu.estimate, cpu.estimate)))
            return device
        on_gpu, on_cpu = gpu.estimate + move_gpu, cpu.estimate + move_cpu
        if on_gpu <= on_cpu:
            best, there, other, away, other_band, move = _GPU, on_gpu, _CPU, on_cpu, cpu, move_cpu
            gain = gpu.estimate - cpu.estimate
        else:
            best, there, other, away, other_band, move = _CPU, on_cpu, _GPU, on_gpu, gpu, move_gpu
            gain = cpu.estimate - gpu.estimate
        why = _PREDICTED
        if gain > 0:  # the other device's kernel is faster: only its move keeps the kernel here
            bd.deficit += gain
            if bd.deficit >= away - there:
                bd.deficit = 0.0
                best, there, away, why = other, away, there, _MOVED
        elif bd.deficit:
            bd.deficit = 0.0
        if why is _PREDICTED and bd.probe is _NO_PROBE:
            # A first probe is priced at its dispatches' prediction and, roughly, the move back.
            cost = bd.probe_cost if bd.probe_cost >= 0 else (SETTLE + 1) * away + move
            if other_band.recheck or bd.since >= PROBE_RATIO * cost:
                other_band.recheck = False
                bd.probe, bd.probed, bd.probe_cost, bd.probe_left = _SENT, other, 0.0, SETTLE + 1
                best, there, away, why = other, away, there, _PROBE
            elif gain <= 0 and not (move_gpu if best is _GPU else move_cpu) and (gpu if best is _GPU else cpu).settled:
                bd.streak, bd.streak_device = STREAK - 1, best  # settled: repeat it, sampling one in STREAK
        self.last.append((elements, best, why, there, away))
        return best

    def observe(self, device: Device, elements: int, seconds: float, moved: float = 0.0) -> None:
        """A finished dispatch: `seconds` of wall time, `moved` of them spent copying (not the kernel's)."""
        bd = self.bands.get(elements.bit_length()) or self.band_of(elements)
        if device is bd.last_device:
            bd.run += 1
        else:
            bd.last_device, bd.run = device, 1
        cost = bd.gpu if device is _GPU else bd.cpu
        if bd.probe is _NO_PROBE:
            bd.since += seconds
            if bd.streak:
                if not moved and device is bd.streak_device:
                    return  # a repeated decision's dispatch: the streak's last one is the sample
                bd.streak = 0  # something moved after all: the next decision asks again
        else:
            self._probe_seen(bd, device, cost, seconds, moved)
        if bd.run <= SETTLE:  # the band's first dispatches on this device, or just after a change: transients
            return
        sample = seconds - moved if seconds > moved else 0.0
        cost.add(sample)
        if cost.recheck:  # probe again at once only where this sample would win the band
            cost.recheck = sample < (bd.cpu if device is _GPU else bd.gpu).estimate

    @staticmethod
    def _probe_seen(bd: Band, device: Device, cost: DeviceBand, seconds: float, moved: float) -> None:
        """A probe's dispatch, or one of the SETTLE after it (whose moves and excess over the
        device's estimate belong to the probe)."""
        if bd.probe is _SENT:
            bd.probe_cost += seconds
            bd.probe_left -= 1
            if bd.probe_left <= 0 or device is not bd.probed:  # (or it did not run where it was sent)
                bd.probe, bd.probe_left, bd.since = _BACK, SETTLE, 0.0
            return
        extra = seconds - moved - cost.estimate if cost.known else 0.0
        bd.probe_cost += moved + (extra if extra > 0 else 0.0)
        bd.probe_left -= 1
        if bd.probe_left <= 0:
            bd.probe = _NO_PROBE

    def samples(self, device: Device) -> int:
        return sum((bd.gpu if device is _GPU else bd.cpu).samples for bd in self.bands.values())

    def estimate(self, device: Device, elements: int) -> float | None:
        """The band's estimate on `device`, if it rests on enough samples."""
        found = self.bands.get(band(elements))
        if found is None:
            return None
        cost = found.gpu if device is Device.GPU else found.cpu
        return cost.estimate if cost.known else None

    def report(self) -> dict[str, object]:
        """The model as the snapshot shows it: each device's estimate in µs per band (keyed by the
        band's smallest count) and the last decisions."""
        out: dict[str, object] = {}
        for device in Device:
            costs = {b: bd.gpu if device is Device.GPU else bd.cpu for b, bd in sorted(self.bands.items())}
            medians = {str(1 << (b - 1)): round(c.estimate * 1e6, 1) for b, c in costs.items() if c.seconds}
            out[str(device)] = {"samples": self.samples(device), "median_us_from_elements": medians}
        out["decisions"] = self.decisions
        out["last"] = [{"elements": n, "device": str(d), "why": str(why) if t < 0 else
                        f"{why} {t * 1e6:.1f} us against {o * 1e6:.1f} us"} for n, d, why, t, o in self.last]
        return out


@dataclass(slots=True)
class CopyLine:
    """What one direction's copies cost: seconds = fixed + per_byte * bytes, a least-squares line
    over the measured copies, each older one's weight decayed by COPY_DECAY. Until two sizes far
    enough apart were seen the fixed part stays at its default (or the copies' own time, if less)."""

    fixed: float = DEFAULT_COPY_FIXED
    per_byte: float = DEFAULT_NS_PER_BYTE * 1e-9
    copies: int = 0
    _w: float = 0.0
    _x: float = 0.0
    _y: float = 0.0
    _xx: float = 0.0
    _xy: float = 0.0

    def add(self, nbytes: int, seconds: float, copies: int = 1) -> None:
        """`copies` copies of `nbytes` bytes in all took `seconds`."""
        if copies <= 0 or nbytes <= 0 or seconds <= 0:
            return
        x, y, w = nbytes / copies, seconds / copies, float(copies)
        d = COPY_DECAY
        self._w = d * self._w + w
        self._x = d * self._x + w * x
        self._y = d * self._y + w * y
        self._xx = d * self._xx + w * x * x
        self._xy = d * self._xy + w * x * y
        self.copies += copies
        self._fit()

    def _fit(self) -> None:
        w, sx, sy, sxx, sxy = self._w, self._x, self._y, self._xx, self._xy
        spread = w * sxx - sx * sx
        if spread > 0.01 * w * sxx:  # sizes far enough apart to tell the fixed part from the rate
            slope = (w * sxy - sx * sy) / spread
            fixed = (sy - slope * sx) / w
            if slope > 0 and fixed >= 0:
                self.fixed, self.per_byte = fixed, slope
                return
        fixed = min(DEFAULT_COPY_FIXED, 0.5 * sy / w)
        self.fixed, self.per_byte = fixed, max(sy - fixed * w, 0.0) / sx

    def seconds(self, nbytes: int, copies: int) -> float:
        return copies * self.fixed + nbytes * self.per_byte if copies else 0.0


@dataclass
class CostModels:
    """One Host's models: per (module, kernel), and the copy line of each direction."""

    kernels: dict[tuple[int, int], KernelModel] = field(default_factory=dict)
    to_gpu: CopyLine = field(default_factory=CopyLine)  # host -> GPU uploads
    to_cpu: CopyLine = field(default_factory=CopyLine)  # GPU -> host readbacks

    def model(self, module_id: int, kernel_id: int) -> KernelModel:
        found = self.kernels.get((module_id, kernel_id))
        if found is None:
            found = self.kernels[(module_id, kernel_id)] = KernelModel()
        return found

    def line(self, to_device: Device) -> CopyLine:
        return self.to_gpu if to_device is _GPU else self.to_cpu

    def copy_seconds(self, to_device: Device, nbytes: int, copies: int = 1) -> float:
        return self.line(to_device).seconds(nbytes, copies)

    def note_copy(self, to_device: Device, nbytes: int, seconds: float, copies: int = 1) -> None:
        """Measured copies toward `to_device` (host -> GPU uploads, GPU -> host readbacks)."""
        self.line(to_device).add(nbytes, seconds, copies)

    def note_readbacks(self, op: TransferTimes) -> None:
        """An import that read buffers back (any import: a copy-back, a CPU dispatch's inputs):
        their measured time feeds the line toward the CPU."""
        self.to_cpu.add(op.gpu_download_bytes, op.download + op.conversion, op.download_count)

    def report(self) -> dict[str, dict[str, float]]:
        return {f"to_{d}": {"fixed_us": round(c.fixed * 1e6, 2), "ns_per_byte": round(c.per_byte * 1e9, 4),
                            "copies": c.copies} for d, c in ((_GPU, self.to_gpu), (_CPU, self.to_cpu))}
