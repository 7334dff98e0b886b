"""Shared fixtures: a wgpu device (software adapters allowed) that validates every WGSL string the
compiler produces during a test, and a small runner that executes buffer kernels on it.

No adapter is a failure, not a skip: CI runs on lavapipe (Debian mesa-vulkan-drivers).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

import wagogpu.compiler.buffer as buffer_mod  # noqa: E402
import wagogpu.compiler.legacy as legacy_mod  # noqa: E402
from wagogpu.compiler import parameter_block, workgroup_grid  # noqa: E402
from wagogpu.compiler import reader as lim  # noqa: E402

settings.register_profile("compiler", suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                              HealthCheck.too_slow], deadline=None)
settings.load_profile("compiler")


class GpuHelper:
    """Validates WGSL (shader module + compute pipeline) and runs buffer kernels."""

    def __init__(self, device) -> None:
        import wgpu

        self.wgpu = wgpu
        self.device = device
        self._validated: set[str] = set()
        self._pipelines: dict[str, object] = {}

    def pipeline(self, wgsl: str):
        p = self._pipelines.get(wgsl)
        if p is None:
            module = self.device.create_shader_module(code=wgsl)
            p = self.device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
            self._pipelines[wgsl] = p
            self._validated.add(wgsl)
        return p

    def validate(self, wgsl: str) -> None:
        if wgsl in self._validated:
            return
        try:
            self.pipeline(wgsl)
        except Exception as e:  # a compiler bug: the WGSL must always be valid
            raise AssertionError(f"wgpu rejected generated WGSL: {e}\n{wgsl}") from e
        if len(self._pipelines) > 256:
            self._pipelines.clear()

    def run_buffer_kernel(self, wgsl: str, count: int, slots: dict[int, np.ndarray],
                          writes: set[int]) -> dict[int, np.ndarray]:
        """Dispatch `wgsl` over `count` elements; slots maps each bound slot to its u32 words."""
        outputs, error = self.run_kernel(wgsl, count, slots, writes)
        assert error == 0, f"the kernel raised error word {error}"
        return outputs

    def run_kernel(self, wgsl: str, count: int, slots: dict[int, np.ndarray],
                   writes: set[int]) -> tuple[dict[int, np.ndarray], int]:
        """run_buffer_kernel that also binds the error word when the shader declares one (after the
        slots, as the host does) and returns its word 0 (0 when there is none)."""
        wgpu = self.wgpu
        dev = self.device
        usage = wgpu.BufferUsage
        # The loop budget travels in the parameter block; these kernels loop a few times at most.
        params = parameter_block(count, lim.LOOP_BUDGET)
        ubuf = dev.create_buffer_with_data(data=params, usage=usage.UNIFORM)
        entries = [{"binding": 0, "resource": {"buffer": ubuf, "offset": 0, "size": 16}}]
        bufs = {}
        for i, slot in enumerate(sorted(slots)):
            data = np.ascontiguousarray(slots[slot], dtype=np.uint32)
            bufs[slot] = dev.create_buffer_with_data(data=data.tobytes(),
                                                     usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
            entries.append({"binding": i + 1, "resource": {"buffer": bufs[slot], "offset": 0, "size": data.nbytes}})
        err = None
        if "var<storage, read_write> err:" in wgsl:
            err = dev.create_buffer_with_data(data=bytes(16), usage=usage.STORAGE | usage.COPY_SRC)
            entries.append({"binding": len(entries), "resource": {"buffer": err, "offset": 0, "size": 16}})
        pipeline = self.pipeline(wgsl)
        group = dev.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
        enc = dev.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        x, y = workgroup_grid(count)
        cpass.dispatch_workgroups(x, y, 1)
        cpass.end()
        dev.queue.submit([enc.finish()])
        outputs = {s: np.frombuffer(dev.queue.read_buffer(bufs[s]), dtype=np.uint32).copy() for s in writes}
        error = int(np.frombuffer(dev.queue.read_buffer(err), dtype=np.uint32)[0]) if err is not None else 0
        return outputs, error


@pytest.fixture(scope="session")
def gpu() -> GpuHelper:
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance", force_fallback_adapter=False)
    if adapter is None:
        pytest.fail("no wgpu adapter opened (install mesa-vulkan-drivers for lavapipe)")
    # f64 kernels need shader-f64 and shader-int64, which the host's device asks for where the adapter has them
    wanted = ("shader-f64", "shader-int64")
    device = adapter.request_device_sync(required_features=[f for f in wanted if f in adapter.features])
    if device is None:
        pytest.fail("the wgpu adapter gave no device")
    return GpuHelper(device)


@pytest.fixture(autouse=True)
def _validate_every_wgsl(gpu: GpuHelper, monkeypatch: pytest.MonkeyPatch):
    """Record every shader the compilers assemble during the test and validate each with wgpu."""
    produced: list[str] = []
    assemble = buffer_mod.assemble
    legacy_body = legacy_mod.compile_legacy_body

    def recording_assemble(*args, **kwargs):
        text = assemble(*args, **kwargs)
        produced.append(text)
        return text

    def recording_legacy(*args, **kwargs):
        text = legacy_body(*args, **kwargs)
        produced.append(text)
        return text

    monkeypatch.setattr(buffer_mod, "assemble", recording_assemble)
    monkeypatch.setattr(legacy_mod, "compile_legacy_body", recording_legacy)
    yield produced
    for text in dict.fromkeys(produced):
        gpu.validate(text)
