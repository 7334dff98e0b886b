"""Adapter discovery, ranking and the software-adapter policy."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from wagogpu.gpu import (AdapterChoice, AdapterInfo, AdapterNotFound, BackendName, ExecutePlan, GpuDevice,
                         GpuUnavailable, list_adapters)
from wagogpu.gpu import adapters as adapters_mod
from wagogpu.gpu.adapters import PRIMARY_BACKENDS, rank_adapters, select_adapters

from ..gpu_support import openable_adapters
from .kernels import WGSL_X2, grid, params

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


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


# ---------------------------------------------------------------- choosing an adapter

_BACKEND_OF = {"Vulkan": "vulkan", "Metal": "metal", "D3D12": "dx12", "OpenGL": "gl", "OpenGLES": "gl"}


def _x2_round_trip(dev: GpuDevice, n: int = 1000, offset: int = 0) -> bool:
    pipe = dev.pipeline(WGSL_X2, [True, False])
    a, b, u, st = dev.create_storage(n * 4), dev.create_storage(n * 4), dev.create_uniform(), dev.create_staging(n * 4)
    x = np.arange(n, dtype=np.uint32) + offset
    dev.execute(ExecutePlan(pipe, u, params(n), [a, b], uploads=[(a, 0, x)], workgroups=grid(n)), 30.0)
    ok = bool(np.array_equal(dev.read(b, st, n * 4, 30.0), 2 * x))
    for h in (a, b, u, st):
        dev.release(h)
    return ok


@pytest.mark.parametrize("api", ["raw", "public"])
def test_each_adapter_by_index_and_by_name(api: str) -> None:
    """On this machine lavapipe (Vulkan) and llvmpipe (GL): both chosen by index, by name on
    their backend, and each runs a kernel."""
    found = list_adapters()
    opening = dict(openable_adapters())
    assert opening, f"no listed adapter opens: {found}"
    for index, want in enumerate(found):
        backend = _BACKEND_OF[want.backend]
        if index not in opening:  # listed but unusable here (the H200 machine's GL adapter)
            with pytest.raises(GpuUnavailable, match=re.escape(want.name)):
                GpuDevice.open(allow_software_adapter=True, api=api, adapter=index)
            continue
        for choice in ({"adapter": index}, {"adapter": want.name.upper(), "backend": backend.upper()},
                       {"backend": backend}):
            with GpuDevice.open(allow_software_adapter=True, api=api, **choice) as dev:
                assert (dev.info.name, dev.info.backend) == (want.name, want.backend), choice
                assert _x2_round_trip(dev), choice


def test_a_name_without_a_backend_takes_the_best_ranked_match() -> None:
    found = list_adapters()
    piece = found[0].name.split()[0].lower()
    matching = [(i, a) for i, a in enumerate(found) if piece in a.name.lower()]
    best = rank_adapters(matching, "high-performance", True)[0][0][1]
    with GpuDevice.open(allow_software_adapter=True, adapter=piece) as dev:
        assert (dev.info.name, dev.info.backend) == (best.name, best.backend)


def test_an_adapter_that_matches_nothing_names_what_exists() -> None:
    found = list_adapters()
    absent = next(b for b in ("metal", "dx12", "vulkan", "gl") if not any(_BACKEND_OF[a.backend] == b for a in found))
    other = next(b for b in ("vulkan", "gl", "metal", "dx12") if b != _BACKEND_OF[found[0].backend])
    cases = [({"adapter": len(found)}, f"adapter index {len(found)} matches no adapter"),
             ({"adapter": "no-such-gpu"}, "adapter name 'no-such-gpu' matches no adapter"),
             ({"adapter": 0, "backend": other}, f"adapter index 0 is not on backend {other}"),
             ({"backend": absent}, f"no adapter on backend {absent}")]
    for choice, start in cases:
        with pytest.raises(AdapterNotFound) as err:
            GpuDevice.open(allow_software_adapter=True, **choice)
        assert isinstance(err.value, GpuUnavailable)
        assert err.value.reason.startswith(start + "; adapters: "), err.value.reason
        for index, info in enumerate(found):
            assert f"{index}: {info.summary()}" in err.value.reason


def test_a_chosen_software_adapter_is_still_refused_unless_allowed() -> None:
    found = list_adapters()
    index = next((i for i, a in enumerate(found) if a.is_software), None)
    if index is None:  # a host without software adapters: the refusal has nothing to act on
        with GpuDevice.open(adapter=0) as dev:
            assert not dev.info.is_software
        return
    with pytest.raises(GpuUnavailable) as err:
        GpuDevice.open(adapter=index)
    assert not isinstance(err.value, AdapterNotFound) and "allow_software_adapter" in err.value.reason


@pytest.mark.parametrize("choice,message", [({"adapter": True}, "adapter must be"), ({"adapter": 1.5}, "adapter must be"),
                                            ({"adapter": " "}, "must not be empty"),
                                            ({"backend": "directx"}, "backend must be None or one of"),
                                            ({"power_preference": "fastest"}, "power_preference")])
def test_malformed_choices_are_value_errors(choice: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GpuDevice.open(allow_software_adapter=True, **choice)


def test_two_devices_run_kernels_at_once_in_threads() -> None:
    """One device per adapter (the same adapter twice where there is only one), each driven by a
    thread of its own, every result checked."""
    opening = [index for index, _backend in openable_adapters()]
    devices = [GpuDevice.open(allow_software_adapter=True, adapter=opening[i % len(opening)]) for i in range(2)]
    results: dict[int, list[bool]] = {0: [], 1: []}
    errors: list[BaseException] = []

    def drive(k: int) -> None:
        try:
            for round_ in range(8):
                results[k].append(_x2_round_trip(devices[k], 4096 + 64 * k, offset=1000 * k + round_))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120.0)
    try:
        assert not errors and results == {0: [True] * 8, 1: [True] * 8}
        found = list_adapters()
        want = {(found[i].name, found[i].backend) for i in opening[:2]}
        assert {(d.info.name, d.info.backend) for d in devices} == want
    finally:
        for d in devices:
            d.close()


# ---------------------------------------------------------------- what the default open enumerates

def _fake(name: str, backend: str, software: bool) -> tuple[None, AdapterInfo]:
    return None, info(name, "CPU" if software else "DiscreteGPU", backend, software)


def _recording(adapters: list[tuple[None, AdapterInfo]]):
    calls: list[frozenset[BackendName] | None] = []

    def enumerate_adapters(backends: frozenset[BackendName] | None) -> list[tuple[None, AdapterInfo]]:
        calls.append(backends)
        types = None if backends is None else {t for b in backends for t in b.backend_types}
        return [a for a in adapters if types is None or a[1].backend in types]

    return enumerate_adapters, calls


def test_the_default_open_enumerates_gl_only_without_a_first_tier_hardware_adapter() -> None:
    vulkan_gpu, gl_gpu = _fake("gpu", "Vulkan", False), _fake("gpu-gl", "OpenGL", False)
    lavapipe, llvmpipe = _fake("lavapipe", "Vulkan", True), _fake("llvmpipe", "OpenGL", True)
    enum, calls = _recording([vulkan_gpu, gl_gpu])
    assert [i.name for _, i in select_adapters(enum, AdapterChoice())] == ["gpu"]
    assert calls == [PRIMARY_BACKENDS]  # GL never started
    enum, calls = _recording([lavapipe, gl_gpu])
    assert [i.name for _, i in select_adapters(enum, AdapterChoice(allow_software=True))] == ["gpu-gl", "lavapipe"]
    assert calls == [PRIMARY_BACKENDS, None]
    enum, calls = _recording([lavapipe, llvmpipe])
    with pytest.raises(GpuUnavailable, match="only software adapters"):
        select_adapters(enum, AdapterChoice())
    enum, calls = _recording([lavapipe, llvmpipe])
    select_adapters(enum, AdapterChoice(adapter="pipe", backend=BackendName.GL, allow_software=True))
    assert calls == [frozenset({BackendName.GL})]
    enum, calls = _recording([lavapipe, llvmpipe])
    assert select_adapters(enum, AdapterChoice(adapter=1, allow_software=True))[0][1].name == "llvmpipe"
    assert calls == [None]  # an index counts in the full list
