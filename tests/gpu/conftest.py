"""Fixtures for the GPU backend tests.

These run on any adapter, lavapipe included (CI has no GPU).  They FAIL, not
skip, when no adapter opens even with software adapters allowed: a CI image
that lost its Vulkan driver must not go green.  With WAGO_GPU_TEST=1 a test
that uses ``hardware_required`` fails unless a hardware adapter opens.

``device`` and ``make_device`` run each test that uses them on both backends: the raw
wgpu-native path and the public wgpu-py fallback (the same results are owed by both).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from wagogpu.gpu import DeviceTuning, FaultInjector, GpuDevice, GpuUnavailable

APIS = ["raw", "public"]


def open_device(faults: FaultInjector | None = None, allow_software: bool = True, api: str | None = None,
                tuning: DeviceTuning | None = None) -> GpuDevice:
    """Open a device or fail the test with the reason (never skip)."""
    try:
        return GpuDevice.open(allow_software_adapter=allow_software, faults=faults, api=api, tuning=tuning)
    except GpuUnavailable as exc:
        pytest.fail(f"no GPU adapter opened (allow_software_adapter={allow_software}, api={api}): {exc.reason}; "
                    "CI needs mesa-vulkan-drivers (lavapipe)")


@pytest.fixture(scope="module", params=APIS)
def device(request: pytest.FixtureRequest) -> Iterator[GpuDevice]:
    """One device per test module and backend, software adapters allowed."""
    dev = open_device(api=request.param)
    assert dev.api == request.param
    yield dev
    dev.close()


@pytest.fixture(params=APIS)
def make_device(request: pytest.FixtureRequest) -> Iterator:
    """Factory for per-test devices of one backend (e.g. with a FaultInjector or a tuning);
    all closed at teardown."""
    opened: list[GpuDevice] = []

    def make(faults: FaultInjector | None = None, tuning: DeviceTuning | None = None) -> GpuDevice:
        dev = open_device(faults, api=request.param, tuning=tuning)
        opened.append(dev)
        return dev

    yield make
    for dev in opened:
        dev.close()


@pytest.fixture
def hardware_required() -> Iterator[GpuDevice]:
    """A device for tests that mean a real GPU: with WAGO_GPU_TEST=1 a software adapter fails the test."""
    strict = os.environ.get("WAGO_GPU_TEST") == "1"
    if strict:
        try:
            dev = GpuDevice.open(allow_software_adapter=False)
        except GpuUnavailable as exc:
            pytest.fail(f"WAGO_GPU_TEST=1 needs a hardware adapter: {exc.reason}")
    else:
        dev = open_device()
    if strict and dev.info.is_software:  # open() refuses software when not allowed; belt and braces
        dev.close()
        pytest.fail(f"WAGO_GPU_TEST=1 needs a hardware adapter, got {dev.info.summary()}")
    yield dev
    dev.close()
