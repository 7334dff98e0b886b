"""The device's tuning constants, as one frozen record passed at open.

Every figure here was chosen by measurement on the H200 host (README.md says which); tests
and benchmarks that want another value open a device with ``DeviceTuning(...)`` instead of
changing a module global, so two devices in one process may be tuned differently.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DeviceTuning"]


@dataclass(frozen=True, slots=True)
class DeviceTuning:
    """How a GpuDevice trades memory for time; ``GpuDevice.open(..., tuning=DeviceTuning())``."""

    #: Uploads up to this many bytes in one call go through the queue's own write (no map round
    #: trip); larger batches through a pooled mapped buffer and a parallel host copy.
    queue_write_max: int = 1 << 20
    #: Host copy threads into a mapped upload buffer (on the H200 it lives in VRAM behind the BAR,
    #: so the copy is the PCIe transfer and saturates with few threads) ...
    upload_copy_threads: int = 8
    #: ... and out of a mapped readback buffer (host-memory bound; likes more threads).
    read_copy_threads: int = 8
    #: Spin on the device this long before backing off with sleeps (a dispatch usually
    #: finishes in microseconds).
    spin_seconds: float = 0.005
    #: An output named in ExecutePlan.readahead of at most this many bytes is copied into a mapped
    #: read buffer inside the dispatch's own submission (one GPU round trip saved on the read
    #: that follows).  The host reads this to decide what to ask for.
    readahead_max_bytes: int = 1 << 20
    #: The buffer pool keeps at most this many idle buffers of each kind (upload, readback) ...
    pool_keep_buffers: int = 8
    #: ... and at most this many idle bytes in all; a buffer beyond either is freed.
    pool_keep_bytes: int = 256 << 20
    #: Bind groups kept per device (keyed by pipeline and buffer handles).
    bind_group_cache: int = 256
    #: close() waits this long for a thread that is inside a native call.
    close_lock_seconds: float = 2.0
    #: Send the 16-byte parameter block through the upload buffer when a dispatch uploads anyway
    #: (saves the queue write's own staging allocation).
    params_via_staging: bool = True
    #: Bytes of the ring a pending batch's parameter blocks and small uploads are copied from
    #: (batch.py); a batch that would overflow it is submitted and the next starts at its start.
    batch_ring_bytes: int = 1 << 20
    #: A new pipeline's warm-up run (warmup.py) may take this long before it counts as failed.
    warmup_seconds: float = 5.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            accepted = _TYPES[str(f.type)]
            if isinstance(value, bool) != (accepted is bool) or not isinstance(value, accepted) \
                    or getattr(self, f.name) < 0:
                wanted = "a bool" if accepted is bool else f"a non-negative {f.type}"
                raise ValueError(f"DeviceTuning.{f.name} must be {wanted}, not {value!r}")
        if self.upload_copy_threads < 1 or self.read_copy_threads < 1:
            raise ValueError("DeviceTuning copy threads must be at least 1")


#: What each field's annotation accepts (a bool is not an int here, an int is a float).
_TYPES: dict[str, type | tuple[type, ...]] = {"bool": bool, "int": int, "float": (int, float)}
