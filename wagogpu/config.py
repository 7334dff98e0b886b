"""Host configuration records and their validation (abi.md §7.1-7.2).

KernelConfig and BindingConfig only record what the user wrote, so that compile_buffer_wgsl can
report a bad kernel as CompileError(INVALID_CONTRACT). Config validates everything at construction
and raises ConfigError (a ValueError) naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .abi.kernel import (CPU_PREFIX, KERNEL_PREFIX, MAX_EXPORT_NAME_BYTES, BindingConfig, KernelConfig,
                         kernel_contract_problem)
from .errors import ConfigError

__all__ = ["Config", "KernelConfig", "BindingConfig", "ConfigError", "CONFIG_FIELDS", "LIMITS",
           "KERNEL_PREFIX", "CPU_PREFIX", "MAX_EXPORT_NAME_BYTES", "kernel_contract_problem"]


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
POWER_PREFERENCES = ("high-performance", "low-power")


@dataclass(frozen=True)
class Config:
    """One per Host; copied and immutable. A 0 limit selects its default, as in the reference."""

    kernels: tuple[KernelConfig, ...] = ()
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

    def __post_init__(self) -> None:
        kernels = self.kernels
        if isinstance(kernels, KernelConfig) or not isinstance(kernels, (list, tuple)):
            raise ConfigError("kernels", "expected a list of KernelConfig")
        object.__setattr__(self, "kernels", tuple(kernels))
        for name in ("relaxed_float", "disabled", "profile_stages", "allow_software_adapter", "require_gpu"):
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
        if self.run_timeout < 0:
            raise ConfigError("run_timeout", f"must not be negative, got {self.run_timeout}")
        if self.run_timeout == 0:
            object.__setattr__(self, "run_timeout", DEFAULT_RUN_TIMEOUT)
        if self.power_preference not in POWER_PREFERENCES:
            raise ConfigError("power_preference", f"expected one of {POWER_PREFERENCES}, got {self.power_preference!r}")
        if not self.kernels and not self.kernel_export:
            raise ConfigError("kernels", "configure buffer kernels or a legacy kernel_export")
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
        object.__setattr__(self, "_by_id", {k.id: k for k in self.kernels})

    def kernel(self, kernel_id: int) -> KernelConfig | None:
        return self._by_id.get(kernel_id)

    def with_changes(self, **changes) -> "Config":
        return replace(self, **changes)


CONFIG_FIELDS = tuple(f.name for f in fields(Config))
