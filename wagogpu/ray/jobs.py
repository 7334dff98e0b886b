"""The records a pool job travels in: what the caller asks for, what comes back, and how it fails.

A Job is checked where it is made (in the driver), so a bad argument fails at submit with a
one-line error instead of inside an actor. Results and errors are plain picklable objects: Ray
hands a JobError raised in an actor to ``ray.get`` as an exception that is still a JobError (with
its kind and status), wrapped in Ray's RayTaskError.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

from wagogpu import Instance, Status

#: reads: {name: (offset, size)} in guest memory 0, or a function of the instance that returns
#: {name: bytes} (it runs in the actor, so it must be picklable by Ray: a module-level function
#: or a lambda).
ReadSpec = Union[Mapping[str, tuple[int, int]], Callable[[Instance], Mapping[str, bytes]]]


class FailureKind(enum.Enum):
    """Why a job failed; the closed set a caller can branch on."""

    TRAP = "trap"  # the guest trapped (its own trap, or a wago_gpu_v1 status trap)
    STATUS = "status"  # check_status=True and the export returned a non-zero status
    MODULE = "module"  # the module does not compile or instantiate
    USAGE = "usage"  # no such export, wrong arguments, a read or write outside guest memory
    QUARANTINED = "quarantined"  # the actor's GPU was quarantined while the job ran (every attempt)
    HOST = "host"  # the actor has no Host (Host(config) failed, e.g. require_gpu without a GPU)
    LIMIT = "limit"  # the guest ran past Config.call_timeout or out of Config.fuel (wagogpu.LimitTrap)


class JobError(RuntimeError):
    """A job that did not produce a result; ``message`` is one line that says why."""

    def __init__(self, kind: FailureKind, message: str, status: Status | None = None, trap: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status  # the wago_gpu_v1 status involved, when there is one
        self.trap = trap  # the full trap text (wasmtime's backtrace included) for TRAP

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.kind, self.message, self.status, self.trap)


def status_label(value: int) -> str:
    """'7 (DEVICE_ERROR)' for an ABI status, 'code 100' for a guest's own result code."""
    try:
        return f"{value} ({Status(value).name})"
    except ValueError:
        return f"code {value}"


@dataclass(frozen=True)
class Job:
    """One guest call: instantiate ``wasm``, write ``writes``, call ``export(*args)``, read ``reads``.

    ``wasm`` is Wasm bytes or WAT text; ``check_status=True`` says the export returns a
    wago_gpu_v1 status, so that a non-zero return is a JobError(STATUS) naming it.
    """

    wasm: bytes | str
    export: str
    args: tuple[int | float, ...] = ()
    writes: Mapping[int, bytes] | None = None
    reads: ReadSpec | None = None
    check_status: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.wasm, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"wasm: expected Wasm bytes or WAT text, got {type(self.wasm).__name__}")
        if not isinstance(self.export, str) or not self.export:
            raise TypeError(f"export: expected an export name, got {self.export!r}")
        object.__setattr__(self, "args", tuple(self.args))
        for arg in self.args:
            if isinstance(arg, bool) or not isinstance(arg, (int, float)):
                raise TypeError(f"args: expected numbers, got {arg!r}")
        if self.writes is not None:
            _check_writes(self.writes)
        if self.reads is not None and not callable(self.reads):
            _check_reads(self.reads)


def _check_writes(writes: Mapping[int, bytes]) -> None:
    if not isinstance(writes, Mapping):
        raise TypeError(f"writes: expected {{offset: bytes}}, got {type(writes).__name__}")
    for offset, data in writes.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"writes: offset {offset!r} is not a non-negative integer")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"writes[{offset}]: expected bytes, got {type(data).__name__}")


def _check_reads(reads: Mapping[str, tuple[int, int]]) -> None:
    if not isinstance(reads, Mapping):
        raise TypeError(f"reads: expected {{name: (offset, size)}} or a callable, got {type(reads).__name__}")
    for name, span in reads.items():
        ok = (isinstance(span, tuple) and len(span) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in span))
        if not isinstance(name, str) or not ok:
            raise ValueError(f"reads[{name!r}]: expected (offset, size) as non-negative integers, got {span!r}")


@dataclass(frozen=True)
class WireJob:
    """A Job as it travels to an actor: the module by content hash, its bytes behind an ObjectRef.

    ``source`` is a 1-tuple so that Ray passes the ObjectRef through unresolved: an actor that has
    the module compiled already never fetches the bytes.
    """

    digest: str
    source: tuple[Any]
    export: str
    args: tuple[int | float, ...]
    writes: tuple[tuple[int, bytes], ...]
    reads: ReadSpec | None
    check_status: bool
    retry_safe: bool


@dataclass(frozen=True)
class JobResult:
    """What a job returns: the export's return value, the bytes read back, which actor ran it, and
    the actor's own time for it (instantiate to the last read, in seconds: the rest of the job's
    latency is the pool's and Ray's)."""

    value: Any
    reads: dict[str, bytes] = field(default_factory=dict)
    actor: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class ActorSlot:
    """Where an actor runs, handed to a config function ``config(slot) -> Config``.

    ``gpu_ids`` are the GPUs Ray gave the actor (as Ray numbers them); ``hosts_opened`` counts the
    Hosts this actor process opened before (1 after its first GPU quarantine), so a config function
    can, say, fall back to a CPU-only Host once a GPU has failed.
    """

    index: int
    gpu_ids: tuple[str, ...]
    node_id: str
    hosts_opened: int


@dataclass(frozen=True)
class ActorInfo:
    """One actor as it reports itself (``HostPool.actors()``)."""

    index: int
    pid: int
    node_id: str
    gpu_ids: tuple[str, ...]
    device: str  # the adapter name of its Host, "" when it runs CPU-only
    state: str  # its Host's buffer_snapshot().state, or "NO_HOST"
    hosts_opened: int
    jobs: int
    compiles: int  # modules compiled (once per module and Host)
    last_quarantine: str  # the reason of the last quarantine that replaced its Host, "" if none
    adapter_note: str = ""  # how the adapter of Ray's GPU was chosen, or why it could not be (gpu_match.py)
