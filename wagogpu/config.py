"""Host configuration records and their validation (abi.md §7.1-7.2).

KernelConfig and BindingConfig only record what the user wrote, so that compile_buffer_wgsl can
report a bad kernel as CompileError(INVALID_CONTRACT). Config validates everything at construction
and raises ConfigError (a ValueError) naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from .abi.table import SLOT_COUNT, Access, ElementType

KERNEL_PREFIX = "wago_gpu.kernel."
CPU_PREFIX = "wago_gpu.cpu."
MAX_EXPORT_NAME_BYTES = 256
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


class ConfigError(ValueError):
    """A configuration value is invalid; the message starts with the field's name."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class BindingConfig:
    slot: int
    type: int
    access: int

    def __post_init__(self) -> None:
        for name in ("slot", "type", "access"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"expected an integer, got {value!r}")
        if self.type in ElementType.__members__.values():
            object.__setattr__(self, "type", ElementType(self.type))
        if self.access in Access.__members__.values():
            object.__setattr__(self, "access", Access(self.access))


@dataclass(frozen=True)
class KernelConfig:
    id: int
    export: str
    cpu_export: str
    bindings: tuple[BindingConfig, ...]
    relaxed_float: bool = False
    min_elements: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "bindings", tuple(self.bindings))
        for b in self.bindings:
            if not isinstance(b, BindingConfig):
                raise ConfigError("bindings", f"expected BindingConfig, got {type(b).__name__}")
        for name in ("export", "cpu_export"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(name, "expected a string")
        for name in ("id", "min_elements"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"expected an integer, got {value!r}")

    @property
    def suffix(self) -> str:
        return self.export[len(KERNEL_PREFIX):]


def kernel_contract_problem(kernel: KernelConfig, max_bindings: int = SLOT_COUNT) -> tuple[str, str] | None:
    """First reason (field, message) the kernel's declared contract is invalid, or None.

    Shared by Config validation and compile_buffer_wgsl (which reports it as INVALID_CONTRACT).
    """
    if not 0 < kernel.id <= 0xFFFFFFFF:
        return "id", "kernel ID must be a non-zero u32"
    if not kernel.export.startswith(KERNEL_PREFIX) or len(kernel.export) == len(KERNEL_PREFIX):
        return "export", f"kernel export must be {KERNEL_PREFIX!r} followed by a name"
    if kernel.cpu_export != CPU_PREFIX + kernel.suffix:
        return "cpu_export", f"CPU export must be {CPU_PREFIX + kernel.suffix!r}"
    for name in ("export", "cpu_export"):
        if len(getattr(kernel, name).encode()) > MAX_EXPORT_NAME_BYTES:
            return name, f"export name longer than {MAX_EXPORT_NAME_BYTES} bytes"
    if not 1 <= len(kernel.bindings) <= max_bindings:
        return "bindings", f"a kernel declares 1 to {max_bindings} bindings"
    seen: set[int] = set()
    for i, b in enumerate(kernel.bindings):
        if not 0 <= b.slot < SLOT_COUNT:
            return f"bindings[{i}].slot", f"slot must be below {SLOT_COUNT}"
        if b.slot in seen:
            return f"bindings[{i}].slot", f"slot {b.slot} declared twice"
        seen.add(b.slot)
        if b.type not in ElementType.__members__.values():
            return f"bindings[{i}].type", f"unknown element type {b.type}"
        if b.access not in Access.__members__.values():
            return f"bindings[{i}].access", f"unknown access {b.access}"
    return None


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
