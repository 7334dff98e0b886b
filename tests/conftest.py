"""Shared fixtures: kernel configs and a host factory that always closes what it made."""
from __future__ import annotations

import pytest

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig


def kernel(kernel_id: int = 1, name: str = "double", bindings=None, relaxed_float: bool = True,
           min_elements: int = 0) -> KernelConfig:
    bindings = bindings or [(0, ElementType.F32, Access.READ), (1, ElementType.F32, Access.WRITE)]
    return KernelConfig(kernel_id, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(*b) for b in bindings], relaxed_float=relaxed_float,
                        min_elements=min_elements)


@pytest.fixture
def make_host():
    hosts: list[Host] = []

    def make(**overrides) -> Host:
        overrides.setdefault("kernels", [kernel()])
        overrides.setdefault("disabled", True)
        host = Host(Config(**overrides))
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.close()
