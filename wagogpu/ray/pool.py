"""HostPool: the driver's side of the pool (placement, module shipping, back-pressure, shutdown).

Each job is one Ray actor task, and ``submit`` returns that task's ObjectRef, so a job costs one
round trip to its actor and nothing else: no scheduler of our own sits between the caller and the
actors. What would otherwise need one is left to Ray:

* a GPU quarantine is the actor's own business: it replaces its Host and reruns a retry-safe job
  there, up to ``retries`` times (actor.py);
* a dead actor process (a crash, a killed worker): Ray restarts the actor (``max_restarts=-1``)
  and resubmits its retry-safe jobs (``max_task_retries=resubmits``: Ray counts every delivery that
  fails while the actor restarts, two or three per death, ray-project/ray#44719). A job that is not
  retry-safe is never resubmitted; its ObjectRef raises Ray's RayActorError instead.

Retry-safe means the module imports only wago_gpu_v1 / wago_gpu (safety.py says why that makes a
failed attempt invisible). Back-pressure: at most ``max_in_flight`` jobs are queued on one actor;
``submit`` waits (``ray.wait``) for a slot, giving the job to the least-loaded actor.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

import ray

from wagogpu import Config

from .actor import ConfigSource, JobRunner
from .jobs import ActorInfo, Job, JobResult, ReadSpec, WireJob
from .safety import retry_safe
from .signals import wasm_trap_handlers

#: module sources remembered by identity (bytes and str objects only: they cannot change)
_IDENTITY_CACHE = 64
#: modules kept in the object store; an evicted one is put again when it comes back
_DIGEST_CACHE = 256


@dataclass(frozen=True)
class Placement:
    """How many actors and what each asks Ray for."""

    actors: int
    num_cpus: float
    num_gpus: float


def plan_placement(resources: Mapping[str, float], actors: int | None, num_cpus: float | None) -> Placement:
    """One actor per GPU (num_gpus=1); without GPUs one CPU-only actor per CPU. More actors than
    GPUs share them (fractional num_gpus); a request the cluster cannot hold fails here instead
    of waiting forever for resources."""
    gpus, cpus = float(resources.get("GPU", 0.0)), float(resources.get("CPU", 0.0))
    if actors is None:
        actors = int(gpus) if gpus >= 1 else max(1, int(cpus))
    if isinstance(actors, bool) or not isinstance(actors, int) or actors < 1:
        raise ValueError(f"actors: expected a positive integer, got {actors!r}")
    num_gpus = min(1.0, gpus / actors) if gpus >= 1 else 0.0
    if num_cpus is None:
        num_cpus = min(1.0, cpus / actors) if cpus else 0.0
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
        raise ValueError(f"num_cpus: expected a non-negative number, got {num_cpus!r}")
    if actors * num_cpus > cpus + 1e-9:
        raise ValueError(f"{actors} actors x {num_cpus:g} CPU exceed the cluster's {cpus:g} CPUs; "
                         "ask for fewer actors or a smaller num_cpus")
    return Placement(actors, float(num_cpus), num_gpus)


class _ModuleRegistry:
    """Module sources by content hash, each put into the object store once."""

    def __init__(self) -> None:
        self._by_identity: OrderedDict[int, tuple[object, str]] = OrderedDict()
        self._by_digest: OrderedDict[str, tuple[tuple[Any], bool]] = OrderedDict()

    def _digest(self, source: bytes | bytearray | memoryview | str) -> tuple[str, bytes | str]:
        """sha256 of the source; bytes and str objects seen before are not hashed again."""
        immutable = type(source) in (bytes, str)
        data = source if isinstance(source, str) else bytes(source)  # bytes(b) is b for bytes
        hit = self._by_identity.get(id(source)) if immutable else None
        if hit is not None and hit[0] is source:
            return hit[1], data
        raw = data.encode("utf-8") if isinstance(data, str) else data
        digest = hashlib.sha256(raw).hexdigest()
        if immutable:
            self._by_identity[id(source)] = (source, digest)
            if len(self._by_identity) > _IDENTITY_CACHE:
                self._by_identity.popitem(last=False)
        return digest, data

    def ticket(self, source: bytes | bytearray | memoryview | str) -> tuple[str, tuple[Any], bool]:
        """(digest, (ObjectRef of the source,), retry_safe) for a module source."""
        digest, data = self._digest(source)
        entry = self._by_digest.get(digest)
        if entry is None:
            entry = self._by_digest[digest] = ((ray.put(data),), retry_safe(data))
            if len(self._by_digest) > _DIGEST_CACHE:
                self._by_digest.popitem(last=False)
        else:
            self._by_digest.move_to_end(digest)
        return digest, entry[0], entry[1]

    def clear(self) -> None:
        self._by_identity.clear()
        self._by_digest.clear()


def _check_options(config: Any, **counts: Any) -> None:
    if not isinstance(config, Config) and not callable(config):
        raise TypeError(f"config: expected a wagogpu.Config or a function of ActorSlot, got {type(config).__name__}")
    for name, value in counts.items():
        least = 1 if name == "max_in_flight" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")


class HostPool:
    """Ray actors, each owning one wagogpu Host made from ``config`` (a Config, or a function of
    the actor's ActorSlot returning one, e.g. to pick each actor's adapter)."""

    def __init__(self, config: ConfigSource, actors: int | None = None, *, max_in_flight: int = 4,
                 retries: int = 2, resubmits: int = 10, num_cpus: float | None = None,
                 start_timeout: float = 120.0):
        _check_options(config, max_in_flight=max_in_flight, retries=retries, resubmits=resubmits)
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            with wasm_trap_handlers():  # Ray's driver would take the signals wasmtime's traps use
                ray.init()
        self._closed = False
        self._handles: list[Any] = []
        try:
            self.placement = plan_placement(ray.cluster_resources(), actors, num_cpus)
        except ValueError:
            self._release_ray()
            raise
        self._max_in_flight = max_in_flight
        self._modules = _ModuleRegistry()
        self._start(config, retries, resubmits, start_timeout)

    def _start(self, config: ConfigSource, retries: int, resubmits: int, start_timeout: float) -> None:
        p = self.placement
        options: dict[str, Any] = {"num_cpus": p.num_cpus, "max_restarts": -1}
        if p.num_gpus:
            options["num_gpus"] = p.num_gpus
        actor_class = ray.remote(JobRunner).options(**options)
        self._handles = [actor_class.remote(config, i, retries) for i in range(p.actors)]
        self._safe_run = [h.run.options(max_task_retries=resubmits) for h in self._handles]
        self._pending: list[list[Any]] = [[] for _ in self._handles]
        try:
            ray.get([h.info.remote() for h in self._handles], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            self.close(timeout=5.0)
            raise RuntimeError(f"HostPool: {p.actors} actors were not placed within {start_timeout:g} s "
                               f"(each asks for {p.num_cpus:g} CPU, {p.num_gpus:g} GPU)") from None

    # -- jobs ---------------------------------------------------------------------------------------
    def submit(self, wasm: bytes | str, export: str, *args: int | float, writes: Mapping[int, bytes] | None = None,
               reads: ReadSpec | None = None, check_status: bool = False) -> Any:
        """Run one job; returns a ray.ObjectRef to its JobResult (``ray.get`` raises its JobError)."""
        return self.submit_job(Job(wasm, export, args, writes, reads, check_status))

    def submit_job(self, job: Job) -> Any:
        if self._closed:
            raise RuntimeError("HostPool is closed")
        digest, source, safe = self._modules.ticket(job.wasm)
        writes = tuple((offset, bytes(data)) for offset, data in (job.writes or {}).items())
        wire = WireJob(digest, source, job.export, job.args, writes, job.reads, job.check_status, safe)
        index = self._choose_actor()
        method = self._safe_run[index] if safe else self._handles[index].run
        ref = method.remote(wire)
        self._pending[index].append(ref)
        return ref

    def map(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        """Results of many jobs in submission order; a failed job raises its error at its place.
        Jobs are submitted as results are consumed, so at most every actor's queue is in flight."""
        window: deque[Any] = deque()
        capacity = len(self._handles) * self._max_in_flight
        for job in jobs:
            window.append(self.submit_job(job))
            while len(window) > capacity:
                yield ray.get(window.popleft())
        while window:
            yield ray.get(window.popleft())

    def _prune(self) -> None:
        refs = [ref for queue in self._pending for ref in queue]
        if refs:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
            done = set(ready)
            self._pending = [[ref for ref in queue if ref not in done] for queue in self._pending]

    def _choose_actor(self) -> int:
        """The least-loaded actor, waiting for a finished job while every queue is full. Queues are
        pruned only when the emptiest looks full: a stale count errs high for every actor alike."""
        pruned = False
        while True:
            loads = [len(queue) for queue in self._pending]
            index = min(range(len(loads)), key=loads.__getitem__)
            if loads[index] < self._max_in_flight:
                return index
            if pruned:
                ray.wait([ref for queue in self._pending for ref in queue], num_returns=1, fetch_local=False)
            self._prune()
            pruned = True

    def in_flight(self) -> int:
        """Jobs submitted and not yet finished."""
        self._prune()
        return sum(len(queue) for queue in self._pending)

    def actors(self) -> list[ActorInfo]:
        """Each actor's process, GPU, Host state and counters (answered after its queued jobs)."""
        return list(ray.get([h.info.remote() for h in self._handles]))

    # -- lifetime -----------------------------------------------------------------------------------
    def close(self, timeout: float = 30.0) -> None:
        """Let queued jobs finish (up to ``timeout``), close every Host, end the actor processes, and
        shut Ray down if this pool started it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        done = [h.shutdown.remote() for h in self._handles]
        if done:
            ray.wait(done, num_returns=len(done), timeout=timeout, fetch_local=False)
        for handle in self._handles:
            ray.kill(handle, no_restart=True)
        for handle in self._handles:  # returns once Ray has marked the actor dead
            try:
                ray.get(handle.info.remote(), timeout=timeout)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
        self._pending = [[] for _ in self._handles]
        self._modules.clear()
        self._release_ray()

    def _release_ray(self) -> None:
        if self._owns_ray and ray.is_initialized():
            with wasm_trap_handlers():
                ray.shutdown()

    def __enter__(self) -> "HostPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
