"""Adapter discovery and choice.

Software adapters (lavapipe, llvmpipe, SwiftShader, WARP) run the GPU path
slower than the CPU path, so they are refused unless the caller allows them
(tests and CI do).  Among the rest we prefer the adapter kind the power
preference asks for and the Vulkan/Metal/D3D12 backends over GL.  A caller may
instead name one adapter: by its index in list_adapters() (the numbering `wagogpu
info` prints) or by a piece of its name, optionally on one backend.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import AdapterNotFound, GpuUnavailable

__all__ = ["AdapterInfo", "AdapterChoice", "BackendName", "PRIMARY_BACKENDS", "list_adapters", "rank_adapters",
           "select_adapters"]

_log = logging.getLogger("wagogpu.gpu")

_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x10005: "Mesa", 0x106B: "Apple",
            0x13B5: "ARM", 0x5143: "Qualcomm", 0x1414: "Microsoft"}
_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "microsoft basic render", "warp")
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 1, "OpenGL": 3, "OpenGLES": 3}
_POWER_PREFERENCES = ("high-performance", "low-power")


class BackendName(enum.StrEnum):
    """A graphics API an adapter choice may be restricted to (Config.backend)."""

    VULKAN = "vulkan"
    METAL = "metal"
    DX12 = "dx12"
    GL = "gl"

    @property
    def backend_types(self) -> tuple[str, ...]:
        """The names wgpu gives this API in an adapter's ``backend_type``."""
        return _BACKEND_TYPES[self]


_BACKEND_TYPES = {BackendName.VULKAN: ("Vulkan",), BackendName.METAL: ("Metal",), BackendName.DX12: ("D3D12",),
                  BackendName.GL: ("OpenGL", "OpenGLES")}
#: The first-tier backends: the default open looks at GL only when none of these offers a
#: hardware adapter (starting GL's driver costs hundreds of milliseconds on some hosts).
PRIMARY_BACKENDS = frozenset({BackendName.VULKAN, BackendName.METAL, BackendName.DX12})

#: Enumerates the adapters of some backends (None: all of them, in list_adapters() order).
Enumerator = Callable[[frozenset[BackendName] | None], list[tuple[Any, "AdapterInfo"]]]


# What a device needs for the kernels that compute in f64: WGSL's f64, and the u64 through which an
# f64's bit pattern enters and leaves it. Requested at open where the adapter offers both.
F64_FEATURES = ("shader-f64", "shader-int64")


@dataclass(frozen=True)
class AdapterInfo:
    """What `wagogpu info` and every benchmark record print about an adapter."""

    name: str
    vendor: str
    backend: str
    adapter_type: str
    driver: str
    is_software: bool
    features: tuple[str, ...] = ()
    limits: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def has_f64(self) -> bool:
        """The adapter can run f64 shaders as wagogpu writes them (F64_FEATURES)."""
        return all(f in self.features for f in F64_FEATURES)

    def summary(self) -> str:
        """One line naming the adapter, for logs and benchmark records."""
        kind = "software" if self.is_software else self.adapter_type
        return f"{self.name} ({self.backend}, {kind}, driver {self.driver or '?'})"


@dataclass(frozen=True)
class AdapterChoice:
    """Which adapter GpuDevice.open() may take: ``adapter`` an index as list_adapters() numbers
    them or a case-insensitive piece of the name (None: the best ranked), ``backend`` one API."""

    adapter: int | str | None = None
    backend: BackendName | str | None = None  # any case; a BackendName once constructed
    power_preference: str = "high-performance"
    allow_software: bool = False

    def __post_init__(self) -> None:
        if self.power_preference not in _POWER_PREFERENCES:
            raise ValueError(f"power_preference must be 'high-performance' or 'low-power', "
                             f"not {self.power_preference!r}")
        if isinstance(self.adapter, bool) or not isinstance(self.adapter, (int, str, type(None))):
            raise ValueError(f"adapter must be None, an index or a name, not {self.adapter!r}")
        if isinstance(self.adapter, str) and not self.adapter.strip():
            raise ValueError("adapter name must not be empty")
        if self.backend is not None:
            try:
                object.__setattr__(self, "backend", BackendName(str(self.backend).lower()))
            except ValueError:
                raise ValueError(f"backend must be None or one of {', '.join(BackendName)}, "
                                 f"not {self.backend!r}") from None

    def matches_backend(self, info: AdapterInfo) -> bool:
        return self.backend is None or info.backend in BackendName(self.backend).backend_types


def _is_software(name: str, adapter_type: str) -> bool:
    low = name.lower()
    return adapter_type == "CPU" or any(s in low for s in _SOFTWARE_NAMES)


def info_from_wgpu(adapter: Any) -> AdapterInfo:
    """Build an AdapterInfo from a wgpu-py GPUAdapter (public attributes only)."""
    raw = adapter.info
    name = str(raw.get("device") or raw.get("description") or "unknown adapter")
    vendor = str(raw.get("vendor") or "")
    vid = int(raw.get("vendor_id") or 0)
    if not vendor or vendor.lower() == "llvmpipe":
        vendor = _VENDORS.get(vid, vendor or f"0x{vid:04x}")
    adapter_type = str(raw.get("adapter_type") or "unknown")
    return AdapterInfo(
        name=name,
        vendor=vendor,
        backend=str(raw.get("backend_type") or "unknown"),
        adapter_type=adapter_type,
        driver=str(raw.get("description") or ""),
        is_software=_is_software(name, adapter_type),
        features=tuple(sorted(str(f) for f in adapter.features)),
        limits={str(k): int(v) for k, v in dict(adapter.limits).items() if isinstance(v, int)},
    )


def _enumerate() -> list[tuple[Any, AdapterInfo]]:
    """Every adapter of every backend, through wgpu-py's public API (the list_adapters() order)."""
    import wgpu  # imported lazily: importing wgpu's backend loads the native library

    return [(adapter, info_from_wgpu(adapter)) for adapter in wgpu.gpu.enumerate_adapters_sync()]


def list_adapters() -> list[AdapterInfo]:
    """Every adapter wgpu can see; never raises (an unusable wgpu gives [])."""
    try:
        return [info for _, info in _enumerate()]
    except Exception as exc:  # wgpu missing, no loader, driver crash in enumeration ...
        _log.debug("adapter enumeration failed: %s", exc)
        return []


def rank_adapters(
    found: list[tuple[Any, AdapterInfo]], power_preference: str, allow_software: bool
) -> tuple[list[tuple[Any, AdapterInfo]], str]:
    """Order usable adapters best first; the second value explains an empty result."""
    if power_preference not in _POWER_PREFERENCES:
        raise ValueError(f"power_preference must be 'high-performance' or 'low-power', not {power_preference!r}")
    if power_preference == "low-power":
        type_rank = {"IntegratedGPU": 0, "DiscreteGPU": 1, "VirtualGPU": 2}
    else:
        type_rank = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2}

    def key(item: tuple[Any, AdapterInfo]) -> tuple[int, int, int]:
        info = item[1]
        return (int(info.is_software), type_rank.get(info.adapter_type, 3), _BACKEND_RANK.get(info.backend, 2))

    usable = [a for a in found if allow_software or not a[1].is_software]
    usable.sort(key=key)
    if usable:
        return usable, ""
    if not found:
        return [], "no GPU adapter found (wgpu enumerated none)"
    names = "; ".join(info.summary() for _, info in found)
    return [], f"only software adapters found ({names}) and allow_software_adapter is False"


def describe(found: list[tuple[Any, AdapterInfo]]) -> str:
    """The adapters as `wagogpu info` numbers them, on one line."""
    return "; ".join(f"{i}: {info.summary()}" for i, (_, info) in enumerate(found)) or "none"


def select_adapters(enumerate_adapters: Enumerator, choice: AdapterChoice) -> list[tuple[Any, AdapterInfo]]:
    """The adapters ``choice`` allows, best first, enumerating only the backends it needs.

    The default choice looks at the first-tier backends first and at GL only when none of them
    offers a hardware adapter.  Raises AdapterNotFound when an index, name or backend matches
    nothing, GpuUnavailable when what matches is refused (software) or nothing was found.
    """
    if choice.adapter is None and choice.backend is None:
        primary = enumerate_adapters(PRIMARY_BACKENDS)
        found = primary if any(not info.is_software for _, info in primary) else enumerate_adapters(None)
        return _usable(found, choice)
    on = f" on backend {choice.backend}" if choice.backend is not None else ""
    if isinstance(choice.adapter, int):
        everything = enumerate_adapters(None)
        picked = everything[choice.adapter:choice.adapter + 1] if choice.adapter >= 0 else []
        what = f"adapter index {choice.adapter} matches no adapter"
        if picked and not choice.matches_backend(picked[0][1]):
            picked, what = [], f"adapter index {choice.adapter} is not{on}"
    else:
        found = enumerate_adapters(None if choice.backend is None else frozenset({BackendName(choice.backend)}))
        everything = found if choice.backend is None else []
        if choice.adapter is None:
            picked, what = found, f"no adapter{on}"
        else:
            needle = choice.adapter.lower()
            picked = [a for a in found if needle in a[1].name.lower()]
            what = f"adapter name {choice.adapter!r} matches no adapter{on}"
    if not picked:
        raise AdapterNotFound(f"{what}; adapters: {describe(everything or enumerate_adapters(None))}")
    return _usable(picked, choice)


def _usable(found: list[tuple[Any, AdapterInfo]], choice: AdapterChoice) -> list[tuple[Any, AdapterInfo]]:
    ranked, why = rank_adapters(found, choice.power_preference, choice.allow_software)
    if not ranked:
        raise GpuUnavailable(why)
    return ranked
