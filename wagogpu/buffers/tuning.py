"""The tuning records a Host takes at construction, in one HostTuning: the large-transfer paths'
switches and thresholds (TransferTuning), the bounds on pipelined work (PipelineTuning) and the
device's own (gpu.DeviceTuning).

Each default was measured on the H200 host (BENCHMARKS.md); tests and benchmarks pass their own
TransferTuning instead of changing module constants. The read-ahead size limit is the device's
own (it decides which outputs it copies out in the dispatch's submission); the host reads it
through device_readahead_max_bytes only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..gpu import DeviceTuning

if TYPE_CHECKING:  # pragma: no cover  (type-only: GpuDevice loads wgpu)
    from ..gpu.device import GpuDevice

MIB = 1 << 20


def device_readahead_max_bytes(device: GpuDevice) -> int:
    """The largest output the device copies to a mapped read buffer at the end of a dispatch."""
    return device.tuning.readahead_max_bytes


@dataclass(frozen=True)
class TransferTuning:
    """Switches of the large-transfer paths (extensions: answers, statuses and counters are those of
    the plain paths; only where the bytes wait differs).

    prestage_min_bytes: a full set of a buffer at least this big, whose last dispatch uploaded it
        whole, also writes the words into a device upload stage (a second copy of the guest bytes
        beside the one into the CPU copy: the PCIe write overlaps the host copy); the dispatch then
        uploads with a device-side copy. 32-bit types only. From 1 MiB: at 1M elements the round
        trip took 1.24 ms against 2.13 ms with the paths from 4 MiB.
    park_min_bytes: a copy-back that must read back a buffer at least this big leaves the words in
        the mapped readback staging ("parked") and copies them to the guest from there, skipping
        the copy into the CPU copy; scalar access, fallback, partial sets and quarantine copy them
        in when needed. None: just above the device's read-ahead limit, so the two never meet on
        one buffer.
    in_place_outputs: a dispatch that overwrites a whole output whose current contents are parked
        writes the committed copy itself instead of a scratch (the parking is the way back on
        failure), so a budget-bound round trip needs no scratch and evicts nothing.
    set_copy_threads: threads for a prestaged set's two copies (into the CPU copy, into the stage),
        each capped by the CPU count. On the H200 host at 40 MB through memcopy's crew
        (bench.fresh_path, two processes): 8 + 8 took 1.96-2.05 ms, 8 + 4 1.94-1.95, 4 + 4 2.24-2.34,
        4 + 8 2.71-2.76, 12 + 12 2.51-2.61; the host copy wants the threads, the stage's PCIe
        write does not. (Through the earlier thread pool, 4 + 4 had been the fastest.)
    readahead: ask the device for read-ahead copies of outputs the guest read back last time.
    readback_pieces: a readback of at least two readback_piece_min_bytes goes through a staging
        made of up to this many pieces, each copied and mapped in its own submission: a copy-back
        publishes piece k into guest memory (keeping the guest's earlier bytes until the read
        cannot fail any more, so a failure still publishes nothing) while piece k+1 crosses PCIe;
        a readback into the CPU copy fills it piece by piece the same way. Default 1 (one piece):
        on the H200 host each further piece cost 0.4-0.6 ms more than it overlapped, in plain
        wgpu-py as here (40 MB: 3.70 ms copy-back with one piece, 6.29 with 8): smaller mappings
        read out at a third of a 40 MB one's speed (BENCHMARKS.md).
    readback_piece_min_bytes: no piece is smaller than this (each costs a submission and a map).
    quarantine_readback_seconds: when the runtime is quarantined, how long it may wait for the work
        a timeout left on the device and then read every instance's committed GPU-only buffers back
        into their CPU copies; what cannot be read by then is CONTENTS_LOST (buffers/quarantine.py).
        The import that failed returns that much later at most.
    """

    prestage_min_bytes: int = MIB
    park_min_bytes: int | None = None
    in_place_outputs: bool = True
    set_copy_threads: tuple[int, int] = (8, 8)
    readahead: bool = True
    readback_pieces: int = 1
    readback_piece_min_bytes: int = 2 * MIB
    quarantine_readback_seconds: float = 1.0

    def __post_init__(self) -> None:
        for name in ("prestage_min_bytes", "park_min_bytes"):
            value = getattr(self, name)
            if value is not None and not _is_int(value, 0):
                raise ConfigError(f"TransferTuning.{name}", f"expected a non-negative integer, got {value!r}")
        for name, least in (("readback_pieces", 1), ("readback_piece_min_bytes", 4)):
            value = getattr(self, name)
            if not _is_int(value, least):
                raise ConfigError(f"TransferTuning.{name}", f"expected an integer of at least {least}, got {value!r}")
        for name in ("in_place_outputs", "readahead"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"TransferTuning.{name}", f"expected a bool, got {getattr(self, name)!r}")
        seconds = self.quarantine_readback_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise ConfigError("TransferTuning.quarantine_readback_seconds",
                              f"expected a non-negative number of seconds, got {seconds!r}")
        threads = self.set_copy_threads
        if not isinstance(threads, tuple) or len(threads) != 2 or not all(_is_int(t, 1) for t in threads):
            raise ConfigError("TransferTuning.set_copy_threads", f"expected two positive integers, got {threads!r}")


def _is_int(value: object, least: int) -> bool:
    """An int (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


@dataclass(frozen=True)
class ResolvedTuning:
    """A TransferTuning with the device's figures filled in: what the residency reads per call."""

    prestage_min_bytes: int
    park_min_bytes: int
    in_place_outputs: bool
    set_copy_threads: tuple[int, int]
    readahead_max_bytes: int  # 0: never ask for a read-ahead
    quarantine_readback_seconds: float
    readback_pieces: int
    readback_piece_min_bytes: int

    @classmethod
    def resolve(cls, tuning: TransferTuning, device: GpuDevice | None) -> ResolvedTuning:
        limit = device_readahead_max_bytes(device) if device is not None else 0
        park = tuning.park_min_bytes if tuning.park_min_bytes is not None else limit + 4
        return cls(tuning.prestage_min_bytes, park, tuning.in_place_outputs, tuning.set_copy_threads,
                   limit if tuning.readahead else 0, tuning.quarantine_readback_seconds,
                   tuning.readback_pieces, tuning.readback_piece_min_bytes)


@dataclass(frozen=True)
class PipelineTuning:
    """Bounds on pending work: past any of them the next pipelined dispatch first settles.

    max_dispatches: unconfirmed dispatches (each holds its record until confirmed).
    max_bytes: device bytes written by unconfirmed dispatches (what a late failure loses).
    max_seconds: age of the oldest unconfirmed dispatch (how late a failure may surface): checked
        at every import, so a guest that stops dispatching still learns of a failure soon.
    submit_every: recorded dispatches per submission; the batch is submitted without waiting so
        the device works while the guest records the next ones.
    """

    max_dispatches: int = 1024
    max_bytes: int = 256 * MIB
    max_seconds: float = 0.25
    submit_every: int = 64

    def __post_init__(self) -> None:
        for name in ("max_dispatches", "max_bytes", "submit_every"):
            value = getattr(self, name)
            if not _is_int(value, 1):
                raise ConfigError(f"PipelineTuning.{name}", f"expected a positive integer, got {value!r}")
        seconds = self.max_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ConfigError("PipelineTuning.max_seconds", f"expected positive seconds, got {seconds!r}")


@dataclass(frozen=True)
class HostTuning:
    """Everything a Host can be tuned by, in one record: Host(config, tuning=HostTuning(...)).
    ``device`` is handed to GpuDevice.open, ``pipeline`` to the residency's pending work,
    ``transfer`` to the residency's large-transfer paths."""

    transfer: TransferTuning = field(default_factory=TransferTuning)
    pipeline: PipelineTuning = field(default_factory=PipelineTuning)
    device: DeviceTuning = field(default_factory=DeviceTuning)

    def __post_init__(self) -> None:
        for name, kind in (("transfer", TransferTuning), ("pipeline", PipelineTuning), ("device", DeviceTuning)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise ConfigError(f"HostTuning.{name}", f"expected a {kind.__name__}, got {type(value).__name__}")
