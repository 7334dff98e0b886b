"""Host configuration records, their validation (docs/design/abi.md §7.1-7.2) and their JSON form.

KernelConfig and BindingConfig only record what the user wrote, so that compile_buffer_wgsl can
report a bad kernel as CompileError(INVALID_CONTRACT). Config validates everything at construction
and raises ConfigError (a ValueError) naming the field.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

from .abi.kernel import (CPU_PREFIX, KERNEL_PREFIX, MAX_EXPORT_NAME_BYTES, BindingConfig, KernelConfig,
                         kernel_contract_problem)
from .errors import ConfigError
from .gpu.adapters import BackendName

__all__ = ["Config", "KernelConfig", "BindingConfig", "ConfigError", "CONFIG_FIELDS", "LIMITS",
           "KERNEL_PREFIX", "CPU_PREFIX", "MAX_EXPORT_NAME_BYTES", "kernel_contract_problem", "config_from_json",
           "kernel_from_json", "binding_from_json", "kernel_exports"]


MIB = 1 << 20

# Field -> (default when 0 is given, largest allowed value).
LIMITS: dict[str, tuple[int, int]] = {
    "max_buffers_per_instance": (64, 64),
    "max_kernels_per_module": (64, 64),
    "max_bindings_per_kernel": (8, 8),
    "max_instance_buffer_bytes": (256 * MIB, 256 * MIB),
    "max_runtime_buffer_bytes": (512 * MIB, 512 * MIB),
    "max_elements": (10_000_000, 10_000_000),
}
DEFAULT_RUN_TIMEOUT = 5.0
#: The longest run_timeout: deadlines past it overflow the platform's wait timestamps (time_t).
MAX_RUN_TIMEOUT = 1e6
POWER_PREFERENCES = ("high-performance", "low-power")
PLACEMENTS = ("threshold", "measured")
MAX_CPU_THREADS = 256
#: The guest limits' ranges (None turns each off): call_timeout in seconds, the counts' lowest value.
MAX_CALL_TIMEOUT = 1e6
MAX_GUEST_COUNT = (1 << 63) - 1
GUEST_COUNTS = {"fuel": 1, "max_memory_bytes": 0, "max_table_elements": 0}


@dataclass(frozen=True)
class Config:
    """One per Host; copied and immutable. A 0 limit selects its default, as in the reference."""

    kernels: Sequence[KernelConfig] = ()  # kept as a tuple
    kernel_export: str = ""
    relaxed_float: bool = False
    disabled: bool = False
    max_buffers_per_instance: int = 64
    max_kernels_per_module: int = 64
    max_bindings_per_kernel: int = 8
    max_instance_buffer_bytes: int = 256 * MIB
    max_runtime_buffer_bytes: int = 512 * MIB
    max_elements: int = 10_000_000
    min_elements: int = 0
    run_timeout: float = DEFAULT_RUN_TIMEOUT
    profile_stages: bool = False
    power_preference: str = "high-performance"
    allow_software_adapter: bool = False
    require_gpu: bool = False
    adapter: int | str | None = None  # an index as `wagogpu info` lists them, or a piece of the name
    backend: str | None = None  # "vulkan", "metal", "dx12" or "gl" (any case); None: any
    pipelined: bool = False  # non-trapping dispatches return once recorded; failures surface later
    cpu_kernels: bool = False  # eligible kernels off the GPU run as compiled Wasm (dispatch answers 0)
    cpu_threads: int = 0  # threads a CPU kernel's range is split across; 0: one per core
    placement: str = "threshold"  # "threshold" (min_elements) or "measured" (the predicted faster device)
    # An untrusted guest under the host's control (docs/untrusted.md); None: no limit.
    call_timeout: float | None = None  # seconds per guest call (epoch interruption)
    fuel: int | None = None  # wasmtime fuel each guest call starts with
    max_memory_bytes: int | None = None  # bytes of each guest linear memory
    max_table_elements: int | None = None  # elements of each guest table

    def __post_init__(self) -> None:
        kernels = self.kernels
        if isinstance(kernels, KernelConfig) or not isinstance(kernels, (list, tuple)):
            raise ConfigError("kernels", "expected a list of KernelConfig")
        object.__setattr__(self, "kernels", tuple(kernels))
        for name in ("relaxed_float", "disabled", "profile_stages", "allow_software_adapter", "require_gpu",
                     "pipelined", "cpu_kernels"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"expected a bool, got {getattr(self, name)!r}")
        if not isinstance(self.kernel_export, str):
            raise ConfigError("kernel_export", "expected a string")
        for name, (default, maximum) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"expected an integer, got {value!r}")
            if value < 0:
                raise ConfigError(name, f"must not be negative, got {value}")
            if value == 0:
                object.__setattr__(self, name, default)
            elif value > maximum:
                raise ConfigError(name, f"{value} is above the maximum {maximum}")
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise ConfigError("min_elements", f"expected a non-negative integer, got {self.min_elements!r}")
        if self.min_elements > self.max_elements:
            raise ConfigError("min_elements", f"{self.min_elements} is above max_elements {self.max_elements}")
        if isinstance(self.run_timeout, bool) or not isinstance(self.run_timeout, (int, float)):
            raise ConfigError("run_timeout", f"expected seconds as a number, got {self.run_timeout!r}")
        if not 0 <= self.run_timeout <= MAX_RUN_TIMEOUT:  # (NaN compares false both ways)
            raise ConfigError("run_timeout", f"expected seconds from 0 (the default) to {MAX_RUN_TIMEOUT:g}, "
                                             f"got {self.run_timeout}")
        if self.run_timeout == 0:
            object.__setattr__(self, "run_timeout", DEFAULT_RUN_TIMEOUT)
        if self.power_preference not in POWER_PREFERENCES:
            raise ConfigError("power_preference", f"expected one of {POWER_PREFERENCES}, got {self.power_preference!r}")
        self._check_adapter()
        self._check_cpu_kernels()
        self._check_guest_limits()
        if not self.kernels and not self.kernel_export and not self.disabled:
            raise ConfigError("kernels", "configure buffer kernels or a legacy kernel_export "
                                         "(or disabled=True for a CPU-only host)")
        if len(self.kernels) > self.max_kernels_per_module:
            raise ConfigError("kernels", f"{len(self.kernels)} kernels exceed max_kernels_per_module")
        ids: set[int] = set()
        names: set[str] = set()
        for i, k in enumerate(self.kernels):
            if not isinstance(k, KernelConfig):
                raise ConfigError(f"kernels[{i}]", f"expected KernelConfig, got {type(k).__name__}")
            problem = kernel_contract_problem(k, self.max_bindings_per_kernel)
            if problem:
                raise ConfigError(f"kernels[{i}].{problem[0]}", problem[1])
            if k.id in ids:
                raise ConfigError(f"kernels[{i}].id", f"duplicate kernel ID {k.id}")
            ids.add(k.id)
            for name in (k.export, k.cpu_export):
                if name in names:
                    raise ConfigError(f"kernels[{i}].export", f"duplicate export name {name!r}")
                names.add(name)
            if not 0 <= k.min_elements <= self.max_elements:
                raise ConfigError(f"kernels[{i}].min_elements", "must be between 0 and max_elements")

    def _check_adapter(self) -> None:
        """adapter: None, an index (int >= 0) or a non-empty name; backend: None or a BackendName."""
        adapter = self.adapter
        if isinstance(adapter, bool) or not isinstance(adapter, (int, str, type(None))):
            raise ConfigError("adapter", f"expected None, an adapter index or a piece of its name, got {adapter!r}")
        if isinstance(adapter, int) and adapter < 0:
            raise ConfigError("adapter", f"an index is 0 or more (as `wagogpu info` lists them), got {adapter}")
        if isinstance(adapter, str) and not adapter.strip():
            raise ConfigError("adapter", "a name must not be empty")
        if self.backend is not None:
            names = tuple(str(b) for b in BackendName)
            if not isinstance(self.backend, str) or self.backend.lower() not in names:
                raise ConfigError("backend", f"expected None or one of {', '.join(names)}, got {self.backend!r}")
            object.__setattr__(self, "backend", self.backend.lower())

    def _check_guest_limits(self) -> None:
        """call_timeout: None or positive finite seconds; the others None or a whole number in range."""
        timeout = self.call_timeout
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise ConfigError("call_timeout", f"expected None or seconds as a number, got {timeout!r}")
            if not 0 < timeout <= MAX_CALL_TIMEOUT:  # (also refuses NaN)
                raise ConfigError("call_timeout", f"expected seconds above 0 and at most {MAX_CALL_TIMEOUT:g}, "
                                                  f"got {timeout!r}")
            object.__setattr__(self, "call_timeout", float(timeout))
        for name, lowest in GUEST_COUNTS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"expected None or an integer, got {value!r}")
            if not lowest <= value <= MAX_GUEST_COUNT:
                raise ConfigError(name, f"expected {lowest} to {MAX_GUEST_COUNT}, got {value}")

    def _check_cpu_kernels(self) -> None:
        threads = self.cpu_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or not 0 <= threads <= MAX_CPU_THREADS:
            raise ConfigError("cpu_threads", f"expected 0 (one per core) to {MAX_CPU_THREADS} threads, got {threads!r}")
        if self.placement not in PLACEMENTS:
            raise ConfigError("placement", f"expected one of {', '.join(PLACEMENTS)}, got {self.placement!r}")

    @cached_property
    def _by_id(self) -> dict[int, KernelConfig]:
        return {k.id: k for k in self.kernels}

    def kernel(self, kernel_id: int) -> KernelConfig | None:
        return self._by_id.get(kernel_id)

    def with_changes(self, **changes: Any) -> Config:
        return replace(self, **changes)


CONFIG_FIELDS = tuple(f.name for f in fields(Config))


# -- JSON ------------------------------------------------------------------------------------------
# JSON spells kernels and bindings with the Python records' own rules (abi/kernel.py): an element
# type or access as its number or its name in any case (an access also r, w, rw), a slot, an ID or a
# count as a JSON integer, a flag as a JSON boolean. Every error names the field's path.
KERNEL_JSON_FIELDS = ("id", "name", "export", "cpu_export", "bindings", "relaxed_float", "min_elements",
                      "strict_float")


def _within(where: str, exc: ConfigError) -> ConfigError:
    """exc (naming a field of a record) as an error naming the field's path in the JSON."""
    return ConfigError(f"{where}.{exc.field}", exc.detail)


def kernel_exports(name: str) -> tuple[str, str]:
    """(kernel export, CPU export) of a kernel named "double" or "wago_gpu.kernel.double"."""
    suffix = name[len(KERNEL_PREFIX):] if name.startswith(KERNEL_PREFIX) else name
    return KERNEL_PREFIX + suffix, CPU_PREFIX + suffix


def binding_from_json(raw: object, where: str) -> BindingConfig:
    """[slot, "F32", "read"] or {"slot": ..., "type": ..., "access": ...}."""
    if isinstance(raw, (list, tuple)) and len(raw) == 3:
        slot, etype, access = raw
    elif isinstance(raw, dict):
        unknown = set(raw) - {"slot", "type", "access"}
        if unknown or len(raw) != 3:
            raise ConfigError(where, "a binding object has exactly slot, type and access"
                              + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
        slot, etype, access = raw["slot"], raw["type"], raw["access"]
    else:
        raise ConfigError(where, "a binding is [slot, \"F32\", \"read\"] or {\"slot\", \"type\", \"access\"}")
    try:
        return BindingConfig(slot, etype, access)
    except ConfigError as exc:
        raise _within(where, exc) from None


def kernel_from_json(raw: object, where: str) -> KernelConfig:
    """A kernel object: id, name (or export and cpu_export), bindings, relaxed_float, min_elements,
    strict_float."""
    if not isinstance(raw, dict):
        raise ConfigError(where, "a kernel is an object with id, name (or export) and bindings")
    unknown = sorted(set(raw) - set(KERNEL_JSON_FIELDS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", unknown_field_message("kernel", unknown[0], KERNEL_JSON_FIELDS))
    if "id" not in raw:
        raise ConfigError(f"{where}.id", "missing")
    export: Any  # JSON values: KernelConfig and Config check them, naming the field
    cpu_export: Any
    if "name" in raw:
        if "export" in raw or "cpu_export" in raw:
            raise ConfigError(where, "give name or export/cpu_export, not both")
        if not isinstance(raw["name"], str):
            raise ConfigError(f"{where}.name", "expected a string")
        export, cpu_export = kernel_exports(raw["name"])
    elif "export" in raw:
        export = raw["export"]
        cpu_export = raw.get("cpu_export", kernel_exports(export)[1] if isinstance(export, str) else None)
    else:
        raise ConfigError(where, "missing name (or export)")
    bindings = raw.get("bindings", [])
    if not isinstance(bindings, list):
        raise ConfigError(f"{where}.bindings", "expected a list")
    declared = tuple(binding_from_json(b, f"{where}.bindings[{i}]") for i, b in enumerate(bindings))
    try:
        return KernelConfig(raw["id"], export, cpu_export, declared, relaxed_float=raw.get("relaxed_float", False),
                            min_elements=raw.get("min_elements", 0), strict_float=raw.get("strict_float", False))
    except ConfigError as exc:
        raise _within(where, exc) from None


def unknown_field_message(kind: str, name: str, fields: Iterable[str]) -> str:
    """`unknown Config field (did you mean 'x'?; fields: a, b, ...)`: the closest name by difflib
    when one is close, then every field, so a typo can be fixed from the message alone."""
    known = sorted(fields)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {kind} field ({hint}fields: {', '.join(known)})"


def config_from_json(data: object) -> Config:
    """A Config from JSON text or an already parsed object: kernels as objects, bindings as [slot,
    type, access], other Config fields as they are. Raises ConfigError naming the field."""
    if isinstance(data, (str, bytes, bytearray)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ConfigError("config", f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config", "the config must be a JSON object")
    unknown = sorted(set(data) - set(CONFIG_FIELDS))
    if unknown:
        raise ConfigError(unknown[0], unknown_field_message("Config", unknown[0], CONFIG_FIELDS))
    given = dict(data)
    kernels = given.get("kernels", [])
    if not isinstance(kernels, list):
        raise ConfigError("kernels", "expected a list of kernel objects")
    given["kernels"] = [kernel_from_json(k, f"kernels[{i}]") for i, k in enumerate(kernels)]
    return Config(**given)
