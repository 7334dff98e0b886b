"""Host, Module and Instance: the runtime a Python program drives (DESIGN.md public surface).

Ownership: a Host owns the wasmtime Engine, the optional GPU device, the runtime byte budget and
every Module and Instance it made; Host.close() releases all of them. Each Instance owns a Store
holding the guest and its accessor module (so Wasm->Wasm scalar calls stay inside one store) and
the InstanceBuffers charged to it; Instance.close() frees those.
"""
from __future__ import annotations

import atexit
import functools
import itertools
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import wasmtime

from .abi.accessor import accessor_wat
from .abi.table import ABI_MODULE, IMPORTS, LEGACY_IMPORTS, LEGACY_MODULE, SCALAR_IMPORTS, GC_IMPORTS
from .compiler.contract import KernelClass, KernelPlan, ModuleContract
from .config import Config, ConfigError, KernelConfig
from .diagnostics import (BufferOperation, BufferSnapshot, KernelDiagnostic, LegacyTiming, Snapshot,
                          TransferCounters)
from .fastcall import FastCall, host_func
from .errors import GpuRequiredError
from .engine import VALTYPES, ModuleError, first_line, new_engine, to_wasm
from .buffers import InstanceBuffers, RuntimeBudget, memory_view
from .imports import InstanceImports
from .legacy import LegacyRunner
from .memexports import add_memory_exports, count_defined_memories, memory_export_name
from .residency import DispatchPlan, Residency

_ids = itertools.count(1)
_LIVE_HOSTS: "weakref.WeakSet[Host]" = weakref.WeakSet()


@atexit.register
def _close_live_hosts() -> None:
    """Close what programs left open while the interpreter is still whole (see _release_store)."""
    for host in list(_LIVE_HOSTS):
        host.close()


def _functype(params: Sequence[str], results: Sequence[str]) -> wasmtime.FuncType:
    return wasmtime.FuncType([VALTYPES[p]() for p in params], [VALTYPES[r]() for r in results])


@dataclass(eq=False)
class Module:
    """A compiled guest module and what the compiler proved about it."""

    host: "Host"
    id: int
    wasm: bytes
    compiled: wasmtime.Module
    contract: ModuleContract | None
    memory_count: int
    dispatch_plans: dict[int, DispatchPlan] = field(default_factory=dict)
    pipeline_failures: dict[int, str] = field(default_factory=dict)
    pipeline_seconds: dict[int, float] = field(default_factory=dict)
    legacy_pipeline: Any = None
    legacy_reason: str = ""
    closed: bool = False

    def close(self) -> None:
        """Modules hold no device memory of their own; live instances keep working."""
        with self.host._lock:
            self.closed = True
            if self in self.host._modules:
                self.host._modules.remove(self)


class Instance:
    """One instantiated guest with its buffers; not safe to call from two threads at once."""

    def __init__(self, host: "Host", module: Module):
        self.host = host
        self.module = module
        self.id = next(_ids)
        self._store = wasmtime.Store(host._engine)
        self._calls: dict[str, FastCall] = {}
        self._exports: Any = {}
        self.imports = InstanceImports(host, module, None)  # type: ignore[arg-type]
        hooks = {
            "trap": ((["i32"], []), self.imports.trap),
            "acquire": ((["i32"], ["i32"]), self.imports.acquire),
            "gc_begin": ((["i32"] * 8, ["i32", "i32"]), self.imports.gc_begin),
            "gc_end": ((["i32"] * 4, ["i32"]), self.imports.gc_end),
        }
        accessor_imports = [
            host_func(self._store, _functype(*sig), fn if name == "trap" else self.imports.guarded(name, fn))
            for name, (sig, fn) in hooks.items()]
        self._accessor = wasmtime.Instance(self._store, host._accessor_module, accessor_imports)
        acc_exports = self._accessor.exports(self._store)
        memory = acc_exports["memory"]
        self.buffers = InstanceBuffers(self.id, self._store, memory, host._budget,
                                       host.config.max_buffers_per_instance,
                                       host.config.max_instance_buffer_bytes, host.config.max_elements)
        self.buffers.release_device = host._residency.release_device_buffer
        self.buffers.drop_held = host._residency.drop_held
        self.imports.buffers = self.buffers
        linker = wasmtime.Linker(host._engine)
        for spec in IMPORTS:
            if spec.name in SCALAR_IMPORTS or spec.name in GC_IMPORTS:
                linker.define(self._store, ABI_MODULE, spec.name, acc_exports[spec.name])
            else:
                # Bulk memory transfers find guest memory through the caller; the rest are named methods.
                takes_caller = spec.name.startswith(("setBuffer", "copyBuffer"))
                fn = functools.partial(self.imports.transfer, spec) if takes_caller else getattr(self.imports, spec.name)
                linker.define(self._store, ABI_MODULE, spec.name, host_func(
                    self._store, _functype(spec.params, spec.results),
                    self.imports.guarded(spec.name, fn), access_caller=takes_caller))
        legacy = LegacyRunner(host, module, self)
        for spec in LEGACY_IMPORTS:
            linker.define(self._store, LEGACY_MODULE, spec.name, host_func(
                self._store, _functype(spec.params, spec.results),
                self.imports.guarded(spec.name, getattr(legacy, spec.name)), access_caller=True))
        if any(imp.module.startswith("wasi") for imp in module.compiled.imports):
            wasi = wasmtime.WasiConfig()
            wasi.inherit_stdout()
            wasi.inherit_stderr()
            self._store.set_wasi(wasi)
            linker.define_wasi()
        with host._lock:
            host._instances[self.id] = self
        try:
            self._guest = linker.instantiate(self._store, module.compiled)
        except wasmtime.Trap:
            self.close()
            raise
        except wasmtime.WasmtimeError as exc:
            self.close()
            if "wasm backtrace" in str(exc):
                raise  # the start function failed: keep wasmtime's own error
            raise ModuleError(f"cannot instantiate: {first_line(exc)}") from exc
        except BaseException:
            self.close()
            raise
        self._exports = self._guest.exports(self._store)

    def call(self, name: str, *args: Any) -> Any:
        """Call an exported function: None, one scalar, or a list of results."""
        fast = self._calls.get(name)
        if fast is None:
            if self.id not in self.host._instances:
                raise KeyError("instance is closed")
            func = self._exports.get(name)
            if not isinstance(func, wasmtime.Func):
                raise KeyError(f"no exported function {name!r}")
            fast = self._calls[name] = FastCall(func, self._store)
        return fast(*args)

    def _memory(self, index: int) -> wasmtime.Memory | wasmtime.SharedMemory:
        if self.id not in self.host._instances:
            raise ValueError("instance is closed")
        mem = self._exports.get(memory_export_name(index)) if 0 <= index < self.module.memory_count else None
        if not isinstance(mem, (wasmtime.Memory, wasmtime.SharedMemory)):
            raise IndexError(f"module has no memory {index}")
        return mem

    def read_memory(self, offset: int, size: int, memory: int = 0) -> bytes:
        view = memory_view(self._memory(memory), self._store)
        if offset < 0 or size < 0 or offset + size > view.size:
            raise IndexError(f"range [{offset}, {offset + size}) outside memory {memory}")
        return view[offset:offset + size].tobytes()

    def write_memory(self, offset: int, data: bytes, memory: int = 0) -> None:
        view = memory_view(self._memory(memory), self._store)
        data = bytes(data)
        if offset < 0 or offset + len(data) > view.size:
            raise IndexError(f"range [{offset}, {offset + len(data)}) outside memory {memory}")
        view[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def memory_view(self, memory: int = 0) -> np.ndarray:
        """Zero-copy uint8 view of a guest memory; invalid after the memory grows."""
        return memory_view(self._memory(memory), self._store)

    def close(self) -> None:
        """Free the buffers and the wasmtime Store; idempotent."""
        with self.host._lock:
            self.buffers.close()
            self.host._instances.pop(self.id, None)
            self._release_store()

    def _release_store(self) -> None:
        """Delete the Store now rather than at interpreter shutdown, where wasmtime-py's finalizers
        may already be gone."""
        self._calls = {}
        self._exports = {}
        self._store.close()

    def __enter__(self) -> "Instance":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Host:
    """One runtime: engine, optional GPU device, budgets, modules and instances."""

    def __init__(self, config: Config):
        if not isinstance(config, Config):
            raise ConfigError("config", f"expected wagogpu.Config, got {type(config).__name__}")
        self.config = config
        self._lock = threading.RLock()
        self._engine = new_engine()
        self._accessor_module = wasmtime.Module(self._engine, accessor_wat())
        self._budget = RuntimeBudget(config.max_runtime_buffer_bytes)
        self._instances: dict[int, Instance] = {}
        self._modules: list[Module] = []
        self._stopped = False
        self._sequence = 0
        self._last = BufferOperation()
        self._last_dispatch = BufferOperation()
        self._totals = TransferCounters()
        self.legacy_stats = LegacyTiming()
        self.legacy_successes = 0
        self.legacy_fallbacks = 0
        self.device_reason = ""
        self.device_init = 0.0
        device = self._open_device()
        self._residency = Residency(device, lambda: list(self._budget.instances), config.profile_stages)
        _LIVE_HOSTS.add(self)

    def _open_device(self) -> Any:
        cfg = self.config
        if cfg.disabled:
            self.device_reason = "GPU disabled"
        elif not cfg.kernels and not cfg.relaxed_float:
            self.device_reason = "legacy kernel without relaxed_float: the device is never opened"
        else:
            t0 = time.perf_counter()
            try:
                from .gpu import GpuDevice
                device = GpuDevice.open(power_preference=cfg.power_preference,
                                        allow_software_adapter=cfg.allow_software_adapter)
            except Exception as exc:  # GpuUnavailable, or wgpu failing to load at all
                self.device_reason = first_line(exc)
            else:
                self.device_init = time.perf_counter() - t0
                if cfg.require_gpu and device.info.is_software:
                    device.close()
                    self.device_reason = f"software adapter {device.info.name} is not a GPU"
                else:
                    return device
        if cfg.require_gpu:
            raise GpuRequiredError(f"require_gpu: no hardware GPU adapter opened ({self.device_reason})")
        return None

    @property
    def device(self) -> Any:
        return self._residency.device

    @property
    def gpu_active(self) -> bool:
        """True when dispatches can run on a device now."""
        return self._residency.usable

    # -- modules -------------------------------------------------------------------------------
    def compile(self, source: bytes | str) -> Module:
        """Compile Wasm bytes or WAT text; ModuleError (a ValueError) with wasmtime's message if bad."""
        self._check_open()
        wasm = to_wasm(source)
        from .compiler import inspect_module

        cfg = self.config
        contract: ModuleContract | None
        if cfg.kernels:
            contract = inspect_module(wasm, cfg.kernels, cfg.kernel_export)
        else:
            contract = ModuleContract(verified=False, reason="no buffer kernels configured")
        if contract.verified:
            memory_count = len(contract.memories)
        else:
            memory_count = self._count_memories(wasm)
        try:
            rewritten = add_memory_exports(wasm, memory_count)
            compiled = wasmtime.Module(self._engine, rewritten)
        except ValueError:
            compiled = self._compile_plain(wasm)
        except wasmtime.WasmtimeError as exc:
            raise ModuleError(f"invalid module: {first_line(exc)}") from exc
        module = Module(self, next(_ids), wasm, compiled, contract, memory_count)
        self._build_pipelines(module)
        self._build_legacy(module, wasm)
        with self._lock:
            self._modules.append(module)
        return module

    def _compile_plain(self, wasm: bytes) -> wasmtime.Module:
        try:
            return wasmtime.Module(self._engine, wasm)
        except wasmtime.WasmtimeError as exc:
            raise ModuleError(f"invalid module: {first_line(exc)}") from exc

    def _count_memories(self, wasm: bytes) -> int:
        plain = self._compile_plain(wasm)
        imported = sum(isinstance(i.type, wasmtime.MemoryType) for i in plain.imports)
        try:
            return imported + count_defined_memories(wasm)
        except ValueError:
            return imported

    def _build_pipelines(self, module: Module) -> None:
        contract = module.contract
        if contract is None or not contract.verified or not self._residency.usable or self.config.disabled:
            return
        for kernel in self.config.kernels:
            plan = contract.kernels.get(kernel.id)
            if plan is None or plan.cls is not KernelClass.ELIGIBLE or plan.wgsl is None:
                continue
            if plan.is_float and not kernel.relaxed_float:
                continue
            t0 = time.perf_counter()
            try:
                read_only = [slot not in plan.write_slots for slot in plan.used_slots] + (
                    [False] if plan.error_word else [])
                pipeline = self.device.pipeline(plan.wgsl, read_only)
            except Exception as exc:  # PipelineError or a device failure while building
                module.pipeline_failures[kernel.id] = first_line(exc)
                continue
            finally:
                module.pipeline_seconds[kernel.id] = time.perf_counter() - t0
            module.dispatch_plans[kernel.id] = DispatchPlan(
                pipeline, plan.used_slots, plan.write_slots, plan.read_before_write, plan.error_word)

    def _build_legacy(self, module: Module, wasm: bytes) -> None:
        if not self.config.kernel_export:
            return
        from .compiler import CompileError, compile_wgsl

        try:
            wgsl = compile_wgsl(wasm, self.config.kernel_export)
        except CompileError as exc:
            module.legacy_reason = exc.message
            return
        if not self._residency.usable or self.config.disabled or not self.config.relaxed_float:
            module.legacy_reason = self.device_reason or "no device"
            return
        # The device's layouts put the 16-byte count uniform at binding 0; the legacy shader
        # needs none, so its one storage array moves to binding 1 and binding 0 stays unused.
        wgsl = wgsl.replace("@group(0) @binding(0) var<storage", "@group(0) @binding(1) var<storage")
        try:
            module.legacy_pipeline = self.device.pipeline(wgsl, [False])
        except Exception as exc:
            module.legacy_reason = first_line(exc)

    def _gpu_decision(self, module: Module, kernel: KernelConfig, plan: KernelPlan, count: int) -> tuple[str, str]:
        """Why a valid dispatch does not go to the GPU (abi.md §2.6 step 8), or ("NONE", "")."""
        if self.config.disabled:
            return "DISABLED", "GPU disabled"
        if plan.cls is KernelClass.REJECTED:
            return "UNSUPPORTED_KERNEL", plan.reason
        if plan.is_float and not kernel.relaxed_float:
            return "FLOAT_MODE", "float kernel without relaxed_float consent"
        if count < kernel.min_elements:
            return "BELOW_THRESHOLD", f"count {count} below min_elements {kernel.min_elements}"
        if kernel.id in module.pipeline_failures:
            return "PIPELINE_FAILURE", module.pipeline_failures[kernel.id]
        if not self._residency.usable or kernel.id not in module.dispatch_plans:
            return "NO_DEVICE", self._residency.quarantine_reason or self.device_reason or "no device"
        return "NONE", ""

    def instantiate(self, module: Module) -> Instance:
        """Instantiate with buffer state installed before the start function runs."""
        self._check_open()
        if not isinstance(module, Module) or module.host is not self:
            raise ValueError("module belongs to a different host")
        return Instance(self, module)

    def _check_open(self) -> None:
        if self._stopped:
            raise RuntimeError("host is closed")

    # -- diagnostics ---------------------------------------------------------------------------
    def _record(self, op: BufferOperation) -> None:
        self._sequence += 1
        op.sequence = self._sequence
        self._last = op
        if op.import_name == "dispatch":
            self._last_dispatch = op
        self._totals.add(op)

    @property
    def state(self) -> str:
        if self._stopped:
            return "STOPPED"
        if self.config.disabled:
            return "DISABLED"
        if self._residency.quarantined:
            return "FAILED"
        return "READY" if self._residency.device is not None else "UNAVAILABLE"

    def buffer_snapshot(self) -> BufferSnapshot:
        with self._lock:
            self._residency.check_loss()
            res = self._residency
            device_state = ("QUARANTINED" if res.quarantined else
                            "USABLE" if res.device is not None else "UNAVAILABLE")
            reason = {"READY": "", "FAILED": res.quarantine_reason, "DISABLED": "GPU disabled"}.get(
                self.state, self.device_reason)
            kernels = []
            for module in self._modules:
                for k in self.config.kernels:
                    kernels.append(self._kernel_diagnostic(module, k))
            kernels.sort(key=lambda d: d.kernel_id)
            stats = getattr(res.device, "stats", None)
            return BufferSnapshot(
                state=self.state, device_state=device_state, reason=reason,
                last=BufferOperation(**vars(self._last)), last_dispatch=BufferOperation(**vars(self._last_dispatch)),
                totals=self._totals.counters(),
                totals_complete=res.totals_complete, kernels=kernels,
                instances=[i.buffers.diagnostic() for i in self._instances.values() if not i.buffers.closed],
                pipeline_hits=getattr(stats, "pipeline_hits", 0), pipeline_misses=getattr(stats, "pipeline_misses", 0),
                runtime_buffer_bytes=self._budget.total,
                runtime_pool_bytes=sum(i.idle_bytes() for i in self._budget.instances),
                legacy_buffer_bytes=self._budget.legacy_bytes,
                peak_runtime_buffer_bytes=self._budget.peak_bytes,
                device=res.device.info.name if res.device is not None else "",
                device_init=self.device_init,
                timestamps_supported=bool(getattr(res.device, "has_timestamps", False)))

    def _kernel_diagnostic(self, module: Module, k: KernelConfig) -> KernelDiagnostic:
        contract = module.contract
        plan = contract.kernels.get(k.id) if contract is not None and contract.verified else None
        d = KernelDiagnostic(module=module.id, kernel_id=k.id, state="UNVERIFIED_CONTRACT",
                             contract_verified=plan is not None,
                             translate=plan.translate_seconds if plan else 0.0,
                             pipeline=module.pipeline_seconds.get(k.id, 0.0))
        if plan is None:
            d.reason = contract.reason if contract is not None else ""
        elif plan.cls is KernelClass.INVALID:
            d.state, d.reason = "INVALID_CONTRACT", plan.reason
        elif k.id in module.pipeline_failures:
            d.state, d.reason = "PIPELINE_FAILED", module.pipeline_failures[k.id]
        elif k.id in module.dispatch_plans:
            d.state = "PIPELINE_READY"
        else:
            d.state = "CPU_ONLY"
            d.reason = plan.reason or self._gpu_decision(module, k, plan, 1 << 32)[1]
        return d

    def snapshot(self) -> Snapshot:
        with self._lock:
            res = self._residency
            return Snapshot(
                device=res.device.info.name if res.device is not None else "",
                reason=res.quarantine_reason or self.device_reason, gpu_failed=res.quarantined,
                device_init=self.device_init, translate=0.0, pipeline=0.0,
                last=LegacyTiming(**vars(self.legacy_stats)), successes=self.legacy_successes,
                fallbacks=self.legacy_fallbacks, modules=len(self._modules), instances=len(self._instances),
                pipelines=sum(1 for m in self._modules if m.legacy_pipeline is not None),
                buffer_bytes=self._budget.legacy_bytes)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release everything; idempotent, and safe while another thread is blocked in a dispatch."""
        if self._stopped:
            return
        self._stopped = True
        device = self._residency.device
        if device is not None:
            device.close()  # unblocks a dispatch waiting on the device
        with self._lock:
            for inst in list(self._instances.values()):
                inst.buffers.close()
                inst._release_store()
            self._instances.clear()
            self._modules.clear()
            for inst in list(self._budget.instances):
                inst.close()
            self._budget.v1_bytes = 0
            self._budget.legacy_bytes = 0

    def __enter__(self) -> "Host":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
