"""Helpers for tests that drive the GPU path (on lavapipe in CI, on any adapter elsewhere)."""
from __future__ import annotations

import functools
import os
import struct

import numpy as np
import pytest

from wagogpu import Config, Host
from wagogpu.abi import unpack_result
from wagogpu.buffers import HostTuning, TransferTuning

from .guests import abi_module

HARDWARE_REQUIRED = os.environ.get("WAGO_GPU_TEST") == "1"


@functools.cache
def openable_adapters() -> tuple[tuple[int, str], ...]:
    """(index, backend) of each listed adapter whose device opens here, once per test session.
    An adapter can be listed and still fail to open (the H200 machine's GL adapter answers
    "Parent device is lost"); tests about choosing adapters run on the ones that open."""
    from wagogpu.gpu import GpuDevice, GpuUnavailable, list_adapters

    found = []
    for index, info in enumerate(list_adapters()):
        if HARDWARE_REQUIRED and info.is_software:
            continue
        try:
            GpuDevice.open(allow_software_adapter=True, adapter=index).close()
        except GpuUnavailable:
            continue
        found.append((index, info.backend))
    return tuple(found)


def gpu_host(tuning: HostTuning | TransferTuning | None = None, **overrides) -> Host:
    """A Host whose GPU path must be live: fails (never skips) when no adapter opens."""
    overrides.setdefault("allow_software_adapter", not HARDWARE_REQUIRED)
    overrides.setdefault("require_gpu", HARDWARE_REQUIRED)
    host = Host(Config(**overrides), tuning=tuning)
    if not host.gpu_active:
        host.close()
        pytest.fail(f"no GPU adapter opened: {host.device_reason}")
    return host


class Guest:
    """An instance of the all-imports test module with short names for the common calls."""

    def __init__(self, host: Host, kernels: str = "", extra: str = ""):
        self.host = host
        self.inst = host.instantiate(host.compile(abi_module(kernels=kernels, extra=extra)))

    def create(self, etype: int, count: int) -> int:
        status, handle = unpack_result(self.inst.call("createBufferPacked", etype, count))
        assert status == 0
        return handle

    def set_f32(self, handle: int, values, offset: int = 0, guest: int = 0) -> int:
        data = np.asarray(values, dtype=np.float32)
        self.inst.write_memory(guest, data.tobytes())
        return self.inst.call("setBuffer32", handle, offset, 0, guest, data.size)

    def set_raw(self, handle: int, data: bytes, count: int, offset: int = 0, guest: int = 0) -> int:
        self.inst.write_memory(guest, data)
        return self.inst.call("setBuffer32", handle, offset, 0, guest, count)

    def get_f32(self, handle: int, count: int, guest: int = 0) -> np.ndarray:
        status = self.inst.call("copyBuffer32", handle, 0, 0, guest, count)
        assert status == 0, status
        return np.frombuffer(self.inst.read_memory(guest, 4 * count), dtype=np.float32).copy()

    def bind(self, *handles: int, slots=None) -> None:
        for slot, h in zip(slots or range(len(handles)), handles):
            assert self.inst.call("bindBuffer", slot, h) == 0

    def dispatch(self, kernel_id: int, count: int) -> int:
        return self.inst.call("dispatch", kernel_id, count)

    def buf(self, handle: int):
        return self.inst.buffers.buffers[handle]

    def version(self, handle: int) -> int:
        return self.buf(handle).record.version

    def state(self, handle: int) -> str:
        return self.buf(handle).state

    @property
    def last(self):
        return self.host.buffer_snapshot().last


def f32_bits(values) -> list[int]:
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]
