"""Adapter discovery and choice.

Software adapters (lavapipe, llvmpipe, SwiftShader, WARP) run the GPU path
slower than the CPU path, so they are refused unless the caller allows them
(tests and CI do).  Among the rest we prefer the adapter kind the power
preference asks for and the Vulkan/Metal/D3D12 backends over GL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AdapterInfo", "list_adapters", "rank_adapters"]

_log = logging.getLogger("wagogpu.gpu")

_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x10005: "Mesa", 0x106B: "Apple",
            0x13B5: "ARM", 0x5143: "Qualcomm", 0x1414: "Microsoft"}
_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "microsoft basic render", "warp")
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 1, "OpenGL": 3, "OpenGLES": 3}


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

    def summary(self) -> str:
        """One line naming the adapter, for logs and benchmark records."""
        kind = "software" if self.is_software else self.adapter_type
        return f"{self.name} ({self.backend}, {kind}, driver {self.driver or '?'})"


def _is_software(name: str, adapter_type: str) -> bool:
    low = name.lower()
    return adapter_type == "CPU" or any(s in low for s in _SOFTWARE_NAMES)


def info_from_wgpu(adapter: Any) -> AdapterInfo:
    """Build an AdapterInfo from a wgpu-py GPUAdapter."""
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
    import wgpu  # imported lazily: importing wgpu loads the native library

    out = []
    for adapter in wgpu.gpu.enumerate_adapters_sync():
        out.append((adapter, info_from_wgpu(adapter)))
    return out


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
    if power_preference not in ("high-performance", "low-power"):
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
