"""Fixtures for the example guests' tests: real wagogpu Hosts on the CPU path and on the GPU path.

A GPU host uses any adapter, lavapipe included (CI has no GPU); WAGO_GPU_TEST=1 requires a hardware
adapter. A GPU host whose device did not open fails the test: it never skips.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from wagogpu import Config, Host, KernelConfig

HARDWARE_REQUIRED = os.environ.get("WAGO_GPU_TEST") == "1"
OpenHost = Callable[..., Host]


@pytest.fixture(scope="module")
def open_host() -> Iterator[OpenHost]:
    """open_host(kernels, gpu, **config) -> Host, closed at the end of the test module.

    gpu=False gives Config(disabled=True): every dispatch that passes its checks answers 1.
    Hosts are shared within a module because opening lavapipe takes about a second.
    """
    hosts: list[Host] = []

    def open_(kernels: Iterable[KernelConfig], gpu: bool, **config: Any) -> Host:
        if gpu:
            config.setdefault("allow_software_adapter", not HARDWARE_REQUIRED)
            config.setdefault("require_gpu", HARDWARE_REQUIRED)
        else:
            config["disabled"] = True
        host = Host(Config(kernels=tuple(kernels), **config))
        hosts.append(host)
        snap = host.buffer_snapshot()
        if gpu and snap.state != "READY":
            pytest.fail(f"no GPU adapter opened: {snap.state} {snap.reason}")
        return host

    yield open_
    for host in hosts:
        host.close()
