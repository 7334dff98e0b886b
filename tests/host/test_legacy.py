"""Legacy wago_gpu.run / run_batch on the CPU path (docs/design/abi.md §2.16, §9.5)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from wagogpu import Config, Host
from wagogpu.config import ConfigError

WAT = (Path(__file__).parent.parent / "fixtures" / "legacy_twice.wat").read_text()


def legacy_host(**overrides) -> Host:
    overrides.setdefault("kernel_export", "kernel")
    overrides.setdefault("relaxed_float", True)
    return Host(Config(**overrides))


@pytest.mark.parametrize("overrides", [
    {"disabled": True}, {"relaxed_float": False}, {"kernel_export": "wrong"}])
def test_fallback_modes(overrides):
    with legacy_host(**overrides) as host:
        inst = host.instantiate(host.compile(WAT))
        assert inst.module.legacy_pipeline is None  # whatever the device, this kernel cannot run there
        mem = inst.memory_view()
        mem[:128].view(np.float32)[:] = np.arange(32, dtype=np.float32)
        mem[256:260] = [0xAB, 0xCD, 0xEF, 0x01]
        assert inst.call("gpu", 0, 256, 32) == 1
        assert inst.read_memory(256, 4) == bytes([0xAB, 0xCD, 0xEF, 0x01])
        assert inst.call("run", 0, 256, 32) == 1
        out = np.frombuffer(inst.read_memory(256, 128), dtype=np.float32)
        assert np.array_equal(out, 2 * np.arange(32, dtype=np.float32))
        assert host.snapshot().fallbacks == 2


def test_ranges_are_never_hidden_by_fallback():
    with legacy_host(max_elements=32, disabled=True) as host:
        inst = host.instantiate(host.compile(WAT.replace("(memory (export \"memory\") 1 2048)",
                                                         "(memory (export \"memory\") 1 1)")))
        for args in [(65535, 0, 1), (0, 65535, 1), (0, 0, -1), (-1, 0, 1), (0, -1, 0)]:
            assert inst.call("gpu", *args) == 2, args
        assert inst.call("gpu", 0, 256, 33) == 1
        snap = host.snapshot()
        assert (snap.successes, snap.fallbacks) == (0, 1)  # status 2 is not counted


def test_overlap_falls_back_with_cpu_result():
    with legacy_host(disabled=True) as host:
        inst = host.instantiate(host.compile(WAT))
        inst.write_memory(0, struct.pack("<2f", 1, 3))
        assert inst.call("run", 0, 4, 2) == 1
        assert struct.unpack("<3f", inst.read_memory(0, 12)) == (1, 2, 4)


@pytest.mark.parametrize("passes", [0, 65, -1])
def test_invalid_batch(passes):
    with legacy_host(disabled=True) as host:
        inst = host.instantiate(host.compile(WAT))
        assert inst.call("gpu_batch", 0, 16, 1, passes) == 3
        assert host.snapshot().fallbacks == 0


def test_batch_cpu_results_when_disabled():
    with legacy_host(disabled=True) as host:
        inst = host.instantiate(host.compile(WAT))
        assert inst.call("gpu_batch", 65535, 16, 1, 2) == 2
        inst.write_memory(0, struct.pack("<f", 3.0))
        assert inst.call("run_batch", 0, 16, 1, 8) == 1
        assert struct.unpack("<f", inst.read_memory(16, 4)) == (768.0,)


def test_config_rejections():
    with pytest.raises(ConfigError, match="run_timeout"):
        Config(kernel_export="kernel", run_timeout=-1)
    with pytest.raises(ConfigError, match="min_elements"):
        Config(kernel_export="kernel", min_elements=33, max_elements=32)
    with pytest.raises(ConfigError, match="kernels"):
        Config()


def gpu_legacy_host(**overrides) -> Host:
    from ..gpu_support import gpu_host

    overrides.setdefault("kernel_export", "kernel")
    overrides.setdefault("relaxed_float", True)
    return gpu_host(**overrides)


def test_gpu_run_in_place_and_overlap():
    with gpu_legacy_host() as host:
        inst = host.instantiate(host.compile(WAT))
        inst.write_memory(0, struct.pack("<3f", 1, 3, 0))
        assert inst.call("run", 0, 4, 2) == 1  # partial overlap: CPU loop ran
        assert struct.unpack("<3f", inst.read_memory(0, 12)) == (1, 2, 4)
        assert inst.call("run", 4, 4, 2) == 0  # exact in-place is allowed
        assert struct.unpack("<2f", inst.read_memory(4, 8)) == (4, 8)
        assert inst.call("gpu", 65536, 65536, 0) == 0
        snap = host.snapshot()
        assert (snap.successes, snap.fallbacks, snap.gpu_failed) == (2, 1, False)
        assert snap.device


@pytest.mark.parametrize("passes", [1, 2, 8, 64])
def test_gpu_batch_matches_cpu(passes):
    with gpu_legacy_host() as host:
        inst = host.instantiate(host.compile(WAT))
        n = 257
        x = np.linspace(-2, 2, n).astype(np.float32)
        inst.write_memory(0, x.tobytes())
        assert inst.call("gpu_batch", 0, 4096, n, passes) == 0
        inst.call("cpu_batch", 0, 8192, n, passes)
        assert inst.read_memory(4096, 4 * n) == inst.read_memory(8192, 4 * n)
        inst.write_memory(0, struct.pack("<f", 1.0))
        assert inst.call("gpu_batch", 0, 0, 1, passes) == 0
        assert struct.unpack("<f", inst.read_memory(0, 4)) == (2.0 ** passes,)


def test_gpu_min_elements_threshold():
    with gpu_legacy_host(min_elements=32) as host:
        inst = host.instantiate(host.compile(WAT))
        assert inst.call("gpu", 0, 256, 31) == 1
        assert inst.call("gpu", 0, 256, 32) == 0


def test_injected_failure_latches_quarantine_for_every_module():
    from wagogpu.gpu import FaultInjector

    with gpu_legacy_host() as host:
        module = host.compile(WAT)
        inst = host.instantiate(module)
        other = host.instantiate(host.compile(WAT))
        host.device._faults = FaultInjector(fail={"submit": 1})
        inst.write_memory(16, b"\x11\x22\x33\x44")
        inst.write_memory(0, struct.pack("<f", 3.0))
        assert inst.call("gpu_batch", 0, 16, 1, 8) == 1
        assert inst.read_memory(16, 4) == b"\x11\x22\x33\x44"
        assert host.snapshot().gpu_failed
        assert other.call("gpu", 0, 16, 1) == 1
        assert inst.call("run_batch", 0, 16, 1, 8) == 1
        assert struct.unpack("<f", inst.read_memory(16, 4)) == (768.0,)


def test_gpu_timeout_falls_back_and_latches():
    from wagogpu.gpu import FaultInjector

    with gpu_legacy_host(run_timeout=0.002) as host:
        inst = host.instantiate(host.compile(WAT))
        host.device._faults = FaultInjector(fail_always=["timeout"])
        inst.write_memory(0, struct.pack("<f", 3.0))
        assert inst.call("run_batch", 0, 16, 1, 8) == 1
        assert struct.unpack("<f", inst.read_memory(16, 4)) == (768.0,)
        assert host.snapshot().gpu_failed
        reached = host.device._faults.counts["timeout"]
        assert inst.call("gpu", 0, 16, 1) == 1
        assert host.device._faults.counts["timeout"] == reached  # the backend is not reached again
