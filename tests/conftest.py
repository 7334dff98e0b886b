"""Shared fixtures: kernel configs and a host factory that always closes what it made."""
from __future__ import annotations

import pytest

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.diagnostics import COUNTER_NAMES
from wagogpu.host.context import OperationLog


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


@pytest.fixture(autouse=True)
def counters_named_right(monkeypatch):
    """Every record added to Totals by a named counter group (OperationLog.record's ``counters``)
    holds no counter outside it: a group that missed one would leave Totals short, silently."""
    real = OperationLog.record

    def record(self, op, counters=None):
        if counters is not None:
            held = {name for name in COUNTER_NAMES if getattr(op, name)}  # (no __dict__: it would make one)
            assert held <= set(counters.names), \
                f"{op.import_name} holds {sorted(held - set(counters.names))} outside {counters}"
        return real(self, op, counters)

    monkeypatch.setattr(OperationLog, "record", record)
