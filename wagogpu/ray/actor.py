"""The pool's actor: one process, one Host, jobs run one at a time on fresh instances.

JobRunner is a plain class (the pool makes it a Ray actor with ``ray.remote``), so its job logic
also runs in-process. It uses wagogpu's public API only: Host, Config, compile, instantiate,
write_memory, call, read_memory, snapshot and buffer_snapshot.

Quarantine: a GPU failure latches the whole Host (docs/design/abi.md §4.7: the runtime stays CPU-only, and a new
runtime is the only way back to the GPU). A job during which the Host became quarantined may have
seen the failure (a dispatch status 7 or 9, a CONTENTS_LOST trap), so its outcome is discarded and
the actor replaces the Host: it closes it and opens a new one (from the config, which is told how
many Hosts came before). A retry-safe job (see safety.py) then runs again on the new Host, up to
``retries`` more times; JobError(QUARANTINED) says what happened when no attempt is left.
"""
from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from typing import Any, Callable

import ray
import wasmtime

from wagogpu import Config, Host, Instance, LimitTrap, Module, Status
from wagogpu.errors import ConfigError, GpuRequiredError, ModuleError

from .gpu_match import match_gpu
from .jobs import ActorInfo, ActorSlot, FailureKind, JobError, JobResult, WireJob, status_label

ConfigSource = Config | Callable[[ActorSlot], Config]
_STATUS_TRAP = re.compile(r"wago_gpu_v1 .*status (\d+)")
#: compiled modules kept per actor; the least recently used one is dropped beyond this
MODULE_CACHE = 64


def trap_error(export: str, exc: Exception) -> JobError:
    """JobError(TRAP) with wasmtime's cause as the one-line message and the ABI status, if any;
    JobError(LIMIT) for a call stopped by call_timeout or fuel (the actor and its next jobs go on:
    the trap left the Host as it was)."""
    if isinstance(exc, LimitTrap):
        return JobError(FailureKind.LIMIT, f"{export}: {exc}", None, str(exc))
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = lines[-1] if "Caused by:" in text else (lines[0] if lines else type(exc).__name__)
    found = _STATUS_TRAP.search(cause)
    status = as_status(int(found.group(1))) if found else None
    if status is not None:
        cause = f"{cause} ({status.name})"
    return JobError(FailureKind.TRAP, f"{export}: trap: {cause}", status, text)


def as_status(value: Any) -> Status | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    try:
        return Status(value)
    except ValueError:
        return None


def read_back(inst: Instance, reads: Any) -> dict[str, bytes]:
    if reads is None:
        return {}
    if callable(reads):
        out = reads(inst)
        if not isinstance(out, dict) or not all(isinstance(v, (bytes, bytearray)) for v in out.values()):
            raise JobError(FailureKind.USAGE, f"reads: the callable returned {type(out).__name__}, "
                                              "expected {name: bytes}")
        return {str(k): bytes(v) for k, v in out.items()}
    return {name: inst.read_memory(offset, size) for name, (offset, size) in reads.items()}


def run_on_instance(host: Host, module: Module, job: WireJob) -> tuple[Any, dict[str, bytes]]:
    """instantiate -> writes -> call -> reads on a fresh instance, closed whatever happens."""
    try:
        inst = host.instantiate(module)
    except wasmtime.Trap as exc:
        raise trap_error("start function", exc) from None
    except (ModuleError, wasmtime.WasmtimeError) as exc:
        raise JobError(FailureKind.MODULE, f"cannot instantiate: {str(exc).splitlines()[0]}") from None
    try:
        for offset, data in job.writes:
            inst.write_memory(offset, data)
        value = inst.call(job.export, *job.args)
        if job.check_status and value != 0:
            label = status_label(value) if isinstance(value, int) else repr(value)
            raise JobError(FailureKind.STATUS, f"{job.export} returned status {label}", as_status(value))
        return value, read_back(inst, job.reads)
    except wasmtime.Trap as exc:
        raise trap_error(job.export, exc) from None
    except (KeyError, IndexError, TypeError, ValueError, wasmtime.WasmtimeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        named = message if message.startswith(f"{job.export}: ") else f"{job.export}: {message}"
        raise JobError(FailureKind.USAGE, named) from None
    finally:
        inst.close()


class JobRunner:
    """One Host and the modules compiled on it, keyed by content hash."""

    def __init__(self, config: ConfigSource, index: int = 0, retries: int = 2):
        self._config = config
        self._index = index
        self._retries = retries
        self._host: Host | None = None
        self._host_error = ""
        self._hosts_opened = 0
        self._jobs = 0
        self._compiles = 0
        self._last_quarantine = ""
        self._adapter_note = ""
        self._modules: OrderedDict[str, Module] = OrderedDict()
        self._open_host()

    def _slot(self) -> ActorSlot:
        gpu_ids: tuple[str, ...] = ()
        node = ""
        context = ray.get_runtime_context() if ray.is_initialized() else None
        if context is not None and context.get_actor_id() is not None:  # in an actor, not in-process
            gpu_ids = tuple(str(g) for g in context.get_accelerator_ids().get("GPU", []))
            node = context.get_node_id()
        return ActorSlot(self._index, gpu_ids, node, self._hosts_opened)

    def _open_host(self) -> None:
        """Open a Host; a failure is kept and reported by every job until a later open succeeds."""
        slot = self._slot()
        try:
            config = self._config(slot) if callable(self._config) else self._config
            config = self._with_ray_gpu(config, slot)
            self._host = Host(config)
            self._host_error = ""
        except (ConfigError, GpuRequiredError, TypeError, RuntimeError) as exc:
            self._host, self._host_error = None, f"{type(exc).__name__}: {exc}"
        self._hosts_opened += 1
        self._modules.clear()

    def _with_ray_gpu(self, config: Config, slot: ActorSlot) -> Config:
        """The adapter of the one GPU Ray gave this actor, where it can be matched (gpu_match.py)."""
        if not isinstance(config, Config) or config.adapter is not None or config.disabled or len(slot.gpu_ids) != 1:
            self._adapter_note = ""
            return config
        from wagogpu.gpu import list_adapters

        node_gpus = next((int(n.get("Resources", {}).get("GPU", 0)) for n in ray.nodes()
                          if n.get("NodeID") == slot.node_id), 0)
        match = match_gpu(config, slot.gpu_ids, list_adapters(), node_gpus)
        self._adapter_note = match.note
        return match.config

    def _ready_host(self) -> Host:
        if self._host is None:
            self._open_host()
        if self._host is None:
            raise JobError(FailureKind.HOST, f"actor {self._index} has no Host: {self._host_error}")
        return self._host

    def _module(self, host: Host, job: WireJob) -> Module:
        module = self._modules.get(job.digest)
        if module is not None:
            self._modules.move_to_end(job.digest)
            return module
        source = job.source[0]
        if not isinstance(source, (bytes, str)):
            source = ray.get(source)
        try:
            module = host.compile(source)
        except ModuleError as exc:
            raise JobError(FailureKind.MODULE, str(exc).splitlines()[0]) from None
        self._compiles += 1
        self._modules[job.digest] = module
        if len(self._modules) > MODULE_CACHE:
            self._modules.popitem(last=False)[1].close()
        return module

    def run(self, job: WireJob) -> JobResult:
        """Run one job; see the module docstring for what a quarantine during it means."""
        attempts = 1 + (self._retries if job.retry_safe else 0)
        for _ in range(attempts):
            host = self._ready_host()
            self._jobs += 1
            outcome: tuple[Any, dict[str, bytes]] | JobError
            started = time.perf_counter()
            try:
                outcome = run_on_instance(host, self._module(host, job), job)
            except JobError as exc:
                outcome = exc
            if not host.snapshot().gpu_failed:
                if isinstance(outcome, JobError):
                    raise outcome
                return JobResult(outcome[0], outcome[1], self._index, time.perf_counter() - started)
            self._replace_host(host)
        seen = outcome.message if isinstance(outcome, JobError) else f"returned {outcome[0]!r}"
        message = (f"{job.export}: the GPU was quarantined while the job ran ({self._last_quarantine}); "
                   f"the last attempt {seen}")
        if not job.retry_safe:
            message += "; not retried: its module imports more than wago_gpu_v1, so an attempt may have had visible effects"
        elif attempts > 1:
            message += f"; every one of {attempts} attempts, each on a new Host, was quarantined"
        raise JobError(FailureKind.QUARANTINED, message)

    def _replace_host(self, host: Host) -> None:
        """Close a quarantined Host and open a fresh one."""
        self._last_quarantine = host.buffer_snapshot().reason or "GPU quarantined"
        host.close()
        self._host = None
        self._open_host()

    def info(self) -> ActorInfo:
        slot = self._slot()
        host = self._host
        snap = host.buffer_snapshot() if host is not None else None
        return ActorInfo(self._index, os.getpid(), slot.node_id, slot.gpu_ids, snap.device if snap else "",
                         snap.state if snap else "NO_HOST", self._hosts_opened, self._jobs, self._compiles,
                         self._last_quarantine, self._adapter_note)

    def shutdown(self) -> int:
        """Close the Host (and with it every module and instance); returns the process id."""
        if self._host is not None:
            self._host.close()
            self._host = None
        self._modules.clear()
        return os.getpid()
