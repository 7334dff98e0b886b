"""An actor's adapter from the GPU Ray gave it (wagogpu.ray.gpu_match), on made-up adapter lists."""
from __future__ import annotations

import pytest

from wagogpu import Config
from wagogpu.gpu.adapters import AdapterInfo

from ..conftest import kernel

pytest.importorskip("ray", exc_type=ImportError)
from wagogpu.ray.gpu_match import match_gpu  # noqa: E402


def adapter(name: str, backend: str = "Vulkan", software: bool = False) -> AdapterInfo:
    return AdapterInfo(name, "NVIDIA", backend, "CPU" if software else "DiscreteGPU", "580", software)


H200 = "NVIDIA H200"
NODE = [adapter("llvmpipe", software=True), *[adapter(H200) for _ in range(4)], adapter(H200, "OpenGL")]
CONFIG = Config(kernels=[kernel()])


def test_ray_gpu_3_is_the_fourth_hardware_vulkan_adapter():
    match = match_gpu(CONFIG, ("3",), NODE, node_gpus=4)
    assert match.config.adapter == 4 and match.config.kernels == CONFIG.kernels
    assert match.note == "Ray GPU 3 -> adapter [4] NVIDIA H200 (vulkan)"


def test_every_gpu_gets_its_own_adapter():
    picked = [match_gpu(CONFIG, (str(g),), NODE, node_gpus=4).config.adapter for g in range(4)]
    assert picked == [1, 2, 3, 4]


@pytest.mark.parametrize("config, gpu_ids, adapters, node_gpus, note", [
    (CONFIG.with_changes(adapter="h200"), ("0",), NODE, 4, "Config.adapter='h200' given"),
    (CONFIG.with_changes(disabled=True), ("0",), NODE, 4, "GPU disabled"),
    (CONFIG, ("0", "1"), NODE, 4, "Ray gave this actor 2 GPUs: the default adapter choice applies"),
    (CONFIG, (), NODE, 0, "Ray gave this actor 0 GPUs: the default adapter choice applies"),
    (CONFIG, ("1",), NODE, 8, "4 hardware vulkan adapters for the 8 GPUs Ray counts on this node: Ray's GPU number "
                              "cannot be matched to an adapter"),
    (CONFIG, ("0",), [adapter("NVIDIA H200"), adapter("NVIDIA A100")], 2,
     "the node's vulkan adapters differ (NVIDIA A100, NVIDIA H200): Ray's GPU order cannot be checked against theirs"),
    (CONFIG, ("0",), [adapter("llvmpipe", software=True)], 1,
     "0 hardware vulkan adapters for the 1 GPUs Ray counts on this node: Ray's GPU number cannot be matched to an "
     "adapter"),
])
def test_left_as_it_is_where_the_match_cannot_be_known(config, gpu_ids, adapters, node_gpus, note):
    match = match_gpu(config, gpu_ids, adapters, node_gpus)
    assert match.config is config and match.note == note


def test_a_configured_backend_is_the_one_counted():
    match = match_gpu(CONFIG.with_changes(backend="gl"), ("0",), NODE, node_gpus=1)
    assert match.config.adapter == 5 and match.note.endswith("(gl)")


def test_an_argument_out_of_range_is_a_usage_error_of_the_job():
    from wagogpu.ray.actor import JobRunner
    from wagogpu.ray.jobs import FailureKind, JobError, WireJob

    runner = JobRunner(Config(disabled=True))
    try:
        wat = '(module (func (export "f") (param i32) (result i32) local.get 0))'
        with pytest.raises(JobError) as caught:
            runner.run(WireJob("f", (wat,), "f", (2 ** 40,), (), None, False, True))
        assert caught.value.kind is FailureKind.USAGE
        assert caught.value.message == "f: argument 1 (i32) is 1099511627776, outside -2147483648..4294967295"
        assert runner.run(WireJob("f", (wat,), "f", (5,), (), None, False, True)).value == 5
    finally:
        runner.shutdown()
