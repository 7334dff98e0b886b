"""Host: the runtime a Python program drives (DESIGN.md public surface).

Ownership: a Host owns the wasmtime Engine, the optional GPU device, the runtime byte budget and
every Module and Instance it made, all reachable through its RuntimeContext; Host.close() releases
all of them. The device is opened only when a GPU path may need it (buffer kernels, or a legacy
kernel with relaxed_float) and never when the config disables the GPU.
"""
from __future__ import annotations

import atexit
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

import wasmtime

from ..abi.accessor import accessor_wat
from ..buffers import HostTuning, Residency, RuntimeBudget, TransferTuning
from ..config import Config
from ..diagnostics import BufferSnapshot, LegacyTiming, RuntimeState, Snapshot
from ..errors import ConfigError, GpuRequiredError
from .context import RuntimeContext
from .cputhreads import SHARED_PAGES, threaded
from .engine import compile_in_background, first_line, new_engine
from .guest_limits import TICKER
from .instance import Instance, next_id
from .module import Module, build_module
from .placement import MEASURED
from .source import Source
from .snapshot import buffer_snapshot, legacy_snapshot, runtime_state, settle_pending

if TYPE_CHECKING:  # pragma: no cover
    from ..gpu import DeviceTuning
    from ..gpu.device import GpuDevice

_LIVE_HOSTS: weakref.WeakSet[Host] = weakref.WeakSet()
#: Host.close waits at most this long for pipelined dispatches still pending.
CLOSE_SETTLE_SECONDS = 1.0


@atexit.register
def _close_live_hosts() -> None:
    """Close what programs left open while the interpreter is still whole (see Instance.close)."""
    for host in list(_LIVE_HOSTS):
        host.close()


def open_device(config: Config, tuning: DeviceTuning | None = None) -> tuple[GpuDevice | None, str, float]:
    """(device or None, why there is none, seconds opening took); GpuRequiredError under
    require_gpu, ConfigError when Config.adapter or .backend matches no adapter."""
    reason = ""
    if config.disabled:
        reason = "GPU disabled"
    elif not config.kernels and not config.relaxed_float:
        reason = "legacy kernel without relaxed_float: the device is never opened"
    else:
        t0 = time.perf_counter()
        try:
            from ..gpu import AdapterNotFound, GpuDevice  # loads wgpu and its native library: only here
            from ..gpu.driver_noise import silence_wayland_log

            silence_wayland_log()
        except Exception as exc:  # wgpu failing to load at all
            reason = first_line(exc)
        else:
            try:
                device = GpuDevice.open(power_preference=config.power_preference,
                                        allow_software_adapter=config.allow_software_adapter,
                                        adapter=config.adapter, backend=config.backend, tuning=tuning)
            except AdapterNotFound as exc:
                raise ConfigError("adapter" if config.adapter is not None else "backend", first_line(exc)) from None
            except Exception as exc:  # GpuUnavailable
                reason = first_line(exc)
            else:
                if not (config.require_gpu and device.info.is_software):
                    return device, "", time.perf_counter() - t0
                device.close()
                reason = f"software adapter {device.info.name} is not a GPU"
    if config.require_gpu:
        raise GpuRequiredError(f"require_gpu: no hardware GPU adapter opened ({reason})")
    return None, reason, 0.0


class Host:
    """One runtime: engine, optional GPU device, budgets, modules and instances.

    ``tuning``: one wagogpu.buffers.HostTuning (the device's, the pipelined work's and the
    large-transfer paths' tuning; None: the defaults); a TransferTuning alone stands for
    HostTuning(transfer=it).
    """

    def __init__(self, config: Config, tuning: HostTuning | TransferTuning | None = None):
        if not isinstance(config, Config):
            raise ConfigError("config", f"expected wagogpu.Config, got {type(config).__name__}")
        if isinstance(tuning, TransferTuning):
            tuning = HostTuning(transfer=tuning)
        elif tuning is None:
            tuning = HostTuning()
        elif not isinstance(tuning, HostTuning):
            raise ConfigError("tuning", f"expected wagogpu.buffers.HostTuning (or a TransferTuning), got "
                                        f"{type(tuning).__name__}")
        self.config = config
        self.tuning = tuning
        engine = new_engine(epoch=config.call_timeout is not None, fuel=config.fuel is not None)
        shared = SHARED_PAGES if threaded(config) else 0  # CPU kernels on threads share the accessor memory
        accessor = compile_in_background(engine, accessor_wat(shared))  # while the device opens
        device, reason, seconds = open_device(config, tuning.device)
        budget = RuntimeBudget(config.max_runtime_buffer_bytes)
        residency = Residency(device, budget, config.profile_stages, tuning.transfer, tuning.pipeline,
                              stage_times=config.profile_stages or config.placement == MEASURED)
        self.context = RuntimeContext(config, engine, accessor(), budget, residency, reason, seconds)
        if config.call_timeout is not None:
            TICKER.watch(engine)  # (unwatched by close)
        _LIVE_HOSTS.add(self)

    # -- what the runtime has ------------------------------------------------------------------
    @property
    def device(self) -> GpuDevice | None:
        return self.context.residency.device

    @property
    def gpu_active(self) -> bool:
        """True when dispatches can run on a device now."""
        return self.context.residency.usable

    @property
    def device_reason(self) -> str:
        return self.context.device_reason

    @property
    def device_init(self) -> float:
        return self.context.device_init

    @property
    def state(self) -> RuntimeState:
        return runtime_state(self.context)

    @property
    def legacy_stats(self) -> LegacyTiming:
        return self.context.log.legacy

    # -- modules and instances -----------------------------------------------------------------
    def compile(self, source: Source) -> Module:
        """Compile Wasm bytes, WAT text, or the file at a path (os.PathLike: a .wasm file holds Wasm
        bytes, a .wat file WAT text); ModuleError (a ValueError, one line) if it is not a module."""
        self._check_open()
        module = build_module(self.context, next_id(), source)
        with self.context.lock:
            self.context.modules.append(module)
        return module

    def define_func(self, module: str, name: str, ty: wasmtime.FuncType, func: Callable[..., Any],
                    access_caller: bool = False) -> None:
        """Define the import module::name for the instances made after this call, as wasmtime-py's
        Linker.define_func does (func gets a wasmtime.Caller first when access_caller). The plugin's
        modules (wago_gpu_v1, wago_gpu, wagogpu) are refused with a ValueError."""
        self._check_open()
        with self.context.lock:
            self.context.definitions.add(module, name, ty, func, access_caller)

    def instantiate(self, module: Module, *, wasi: wasmtime.WasiConfig | None = None) -> Instance:
        """Instantiate with buffer state installed before the start function runs. ``wasi`` is the
        instance's WASI context (argv, env, preopens, where stdout goes); without one, a module that
        imports WASI gets stdout and stderr inherited."""
        self._check_open()
        if not isinstance(module, Module):
            raise TypeError(f"instantiate: expected a wagogpu Module (from Host.compile), got {type(module).__name__}")
        if module.ctx is not self.context:
            raise ValueError("instantiate: the module belongs to a different host")
        if module.closed:
            raise ValueError(f"instantiate: module {module.id} is closed")
        if wasi is not None and not isinstance(wasi, wasmtime.WasiConfig):
            raise TypeError(f"instantiate: wasi must be a wasmtime.WasiConfig, got {type(wasi).__name__}")
        return Instance(self.context, module, wasi)

    def _check_open(self) -> None:
        if self.context.stopped:
            raise ValueError("host is closed")

    # -- diagnostics ---------------------------------------------------------------------------
    def buffer_snapshot(self) -> BufferSnapshot:
        with self.context.lock:
            return buffer_snapshot(self.context)

    def snapshot(self) -> Snapshot:
        with self.context.lock:
            return legacy_snapshot(self.context)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release everything; idempotent, and safe while another thread is blocked in a dispatch."""
        ctx = self.context
        if ctx.stopped:
            return
        ctx.stopped = True
        TICKER.unwatch(ctx.engine)
        if ctx.residency.pending and ctx.lock.acquire(blocking=False):  # never wait for a blocked import
            try:
                settle_pending(ctx, min(ctx.config.run_timeout, CLOSE_SETTLE_SECONDS))
            finally:
                ctx.lock.release()
        device = ctx.residency.device
        if device is not None:
            device.close()  # unblocks a dispatch waiting on the device
        with ctx.lock:
            for inst in list(ctx.instances.values()):
                inst.close()
            ctx.instances.clear()
            ctx.modules.clear()
            for buffers in list(ctx.budget.instances):
                buffers.close()
            ctx.budget.v1_bytes = 0
            ctx.budget.legacy_bytes = 0
            if ctx.cpu_pool is not None:
                ctx.cpu_pool.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
