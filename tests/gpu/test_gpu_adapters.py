"""Adapter discovery, ranking and the software-adapter policy."""

from __future__ import annotations

import pytest

from wagogpu.gpu import AdapterInfo, GpuDevice, GpuUnavailable, list_adapters
from wagogpu.gpu import adapters as adapters_mod
from wagogpu.gpu.adapters import rank_adapters


def info(name: str, adapter_type: str = "DiscreteGPU", backend: str = "Vulkan", software: bool = False) -> AdapterInfo:
    return AdapterInfo(name=name, vendor="v", backend=backend, adapter_type=adapter_type, driver="d",
                       is_software=software)


def test_list_adapters_describes_every_adapter() -> None:
    found = list_adapters()
    assert found, "wgpu sees no adapter at all (CI needs mesa-vulkan-drivers)"
    for a in found:
        assert isinstance(a, AdapterInfo)
        assert a.name and a.backend and a.adapter_type
        assert isinstance(a.is_software, bool)
        assert isinstance(a.features, tuple) and all(isinstance(f, str) for f in a.features)
        assert isinstance(a.limits, dict) and a.limits.get("max-buffer-size", 0) > 0
        assert a.name in a.summary()


def test_list_adapters_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list:
        raise RuntimeError("no Vulkan loader")

    monkeypatch.setattr(adapters_mod, "_enumerate", boom)
    assert list_adapters() == []


def test_lavapipe_is_recognised_as_software() -> None:
    assert adapters_mod._is_software("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU")
    assert adapters_mod._is_software("SwiftShader Device", "unknown")
    assert not adapters_mod._is_software("NVIDIA H200", "DiscreteGPU")


def test_software_adapter_refused_unless_allowed() -> None:
    found = list_adapters()
    if all(a.is_software for a in found):
        # CI (lavapipe only): refused with a reason that says why and what would allow it.
        with pytest.raises(GpuUnavailable) as err:
            GpuDevice.open(allow_software_adapter=False)
        assert "software" in err.value.reason and "allow_software_adapter" in err.value.reason
        assert found[0].name in err.value.reason
    else:
        with GpuDevice.open(allow_software_adapter=False) as dev:
            assert not dev.info.is_software
    with GpuDevice.open(allow_software_adapter=True) as dev:
        assert dev.info.name


def test_ranking_prefers_hardware_kind_and_backend() -> None:
    items = [(None, info("lavapipe", "CPU", software=True)), (None, info("igpu", "IntegratedGPU")),
             (None, info("dgpu-gl", "DiscreteGPU", "OpenGL")), (None, info("dgpu", "DiscreteGPU"))]
    ranked, why = rank_adapters(items, "high-performance", allow_software=True)
    assert [i.name for _, i in ranked] == ["dgpu", "dgpu-gl", "igpu", "lavapipe"] and why == ""
    ranked, _ = rank_adapters(items, "low-power", allow_software=False)
    assert [i.name for _, i in ranked] == ["igpu", "dgpu", "dgpu-gl"]


def test_ranking_explains_empty_results() -> None:
    assert rank_adapters([], "high-performance", True) == ([], "no GPU adapter found (wgpu enumerated none)")
    ranked, why = rank_adapters([(None, info("llvmpipe", "CPU", software=True))], "high-performance", False)
    assert ranked == [] and "only software adapters" in why and "llvmpipe" in why
    with pytest.raises(ValueError):
        rank_adapters([], "fastest", True)


def test_device_uses_the_adapters_real_limits(device: GpuDevice) -> None:
    assert device.open_seconds > 0
    assert isinstance(device.has_timestamps, bool)
    assert device.has_timestamps == ("timestamp-query" in device.info.features and device.api == "raw")
    for name in ("max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroups-per-dimension"):
        assert device.limits[name] == device.info.limits[name], name


def test_hardware_fixture(hardware_required: GpuDevice) -> None:
    """With WAGO_GPU_TEST=1 this fails on a software adapter; by default any adapter will do."""
    assert hardware_required.info.name
