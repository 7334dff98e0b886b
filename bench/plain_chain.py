"""The chain of bench.dispatch_chain written in plain wgpu-py (its public API, nothing of
wagogpu): the floor a Python program pays per dispatch on this adapter. Two buffers, b = a + 1 then
a = b + 1, 1,024 f32 elements, a 16-byte count uniform; three ways to wait:

  wait_each: one submission per dispatch, each waited for (a 4-byte copy mapped for reading);
  submit_each_wait_once: one submission per dispatch, one wait at the end;
  one_submission: one encoder, one compute pass with every dispatch, one submission, one wait.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import wgpu

SHADER = """
struct Params { count: u32, p1: u32, p2: u32, p3: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.x >= params.count) { return; }
  dst[id.x] = src[id.x] + 1.0;
}
"""
MODES = ("wait_each", "submit_each_wait_once", "one_submission")


def _adapter(name: str, allow_software: bool) -> Any:
    """The adapter wagogpu ran on (its "name; driver; type; backend" string), else the default."""
    want_name, _driver, _kind, backend = (name.split("; ") + ["", "", "", ""])[:4]
    for adapter in wgpu.gpu.enumerate_adapters_sync():
        info = adapter.info
        if info.get("device") == want_name and backend.lower() in str(info.get("backend_type", "")).lower():
            return adapter
    return wgpu.gpu.request_adapter_sync(power_preference="high-performance", force_fallback_adapter=allow_software)


class PlainChain:
    def __init__(self, adapter: Any, n: int) -> None:
        self.n = n
        self.info = adapter.info
        dev = self.device = adapter.request_device_sync()
        usage = wgpu.BufferUsage
        self.x = (np.arange(n) % 1000).astype(np.float32)
        self.a = dev.create_buffer_with_data(data=self.x, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        self.b = dev.create_buffer(size=4 * n, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        uniform = dev.create_buffer_with_data(data=np.array([n, 0, 0, 0], np.uint32), usage=usage.UNIFORM)
        self.probe = dev.create_buffer(size=4, usage=usage.MAP_READ | usage.COPY_DST)
        self.pipeline = dev.create_compute_pipeline(
            layout="auto", compute={"module": dev.create_shader_module(code=SHADER), "entry_point": "main"})
        layout = self.pipeline.get_bind_group_layout(0)

        def group(src: Any, dst: Any) -> Any:
            return dev.create_bind_group(layout=layout, entries=[
                {"binding": 0, "resource": {"buffer": uniform}}, {"binding": 1, "resource": {"buffer": src}},
                {"binding": 2, "resource": {"buffer": dst}}])

        self.groups = (group(self.a, self.b), group(self.b, self.a))
        self.workgroups = (n + 255) // 256

    def _record(self, enc: Any, first: int, count: int) -> None:
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self.pipeline)
        for i in range(first, first + count):
            cp.set_bind_group(0, self.groups[i % 2])
            cp.dispatch_workgroups(self.workgroups)
        cp.end()

    def _wait(self, enc: Any, last: Any) -> None:
        enc.copy_buffer_to_buffer(last, 0, self.probe, 0, 4)
        self.device.queue.submit([enc.finish()])
        self.probe.map_sync(wgpu.MapMode.READ)
        self.probe.unmap()

    def run(self, mode: str, steps: int) -> None:
        dev = self.device
        last = self.b if steps % 2 else self.a
        if mode == "one_submission":
            enc = dev.create_command_encoder()
            self._record(enc, 0, steps)
            self._wait(enc, last)
            return
        for i in range(steps):
            enc = dev.create_command_encoder()
            self._record(enc, i, 1)
            if mode == "wait_each" or i == steps - 1:
                self._wait(enc, self.b if i % 2 == 0 else self.a)
            else:
                dev.queue.submit([enc.finish()])

    def result(self, steps: int) -> np.ndarray:
        return np.frombuffer(self.device.queue.read_buffer(self.b if steps % 2 else self.a), np.float32)


def plain_chain(adapter_string: str, n: int, steps_list: list[int], repeats: int,
                allow_software: bool) -> list[dict[str, Any]]:
    from bench.dispatch_chain import ChainModel

    chain = PlainChain(_adapter(adapter_string, allow_software), n)
    model = ChainModel()
    adapter = f"{chain.info.get('device')}; {chain.info.get('description')}; {chain.info.get('adapter_type')}; " \
              f"{chain.info.get('backend_type')}"
    records = []
    for mode in MODES:
        for steps in steps_list:
            times = []
            for _ in range(repeats + 1):
                t0 = time.perf_counter()
                chain.run(mode, steps)
                times.append(time.perf_counter() - t0)
                model.chain(steps)
            if not np.array_equal(chain.result(steps), chain.x + model.last):
                raise RuntimeError(f"plain wgpu-py chain ({mode}, {steps}): wrong values")
            times = times[1:]  # the first run of each is warm-up
            records.append({"mode": mode, "steps": steps, "per_dispatch_us": statistics.median(times) / steps * 1e6,
                            "per_dispatch_min_us": min(times) / steps * 1e6, "adapter": adapter, "checked": True})
    return records
