"""Buffers, pipelines and bind groups: creation, limits, caching, release."""

from __future__ import annotations

import logging

import pytest

from wagogpu.gpu import DeviceAllocationError, DeviceFailure, ExecutePlan, GpuDevice, PipelineError
from wagogpu.gpu.tuning import DeviceTuning

from .kernels import WGSL_INC, WGSL_X2, grid, params, words

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


def test_buffers_create_and_release(device: GpuDevice) -> None:
    before = device.stats
    s = device.create_storage(4096)
    u = device.create_uniform(16)
    st = device.create_staging(4096)
    assert (s.kind, u.kind, st.kind) == ("storage", "uniform", "staging")
    assert (s.nbytes, u.nbytes, st.nbytes) == (4096, 16, 4096)
    mid = device.stats
    assert mid.live_buffers == before.live_buffers + 3
    assert mid.allocations_total == before.allocations_total + 3
    assert mid.live_bytes == before.live_bytes + 4096 + 16 + 4096
    for h in (s, u, st):
        device.release(h)
        device.release(h)  # idempotent
        assert h.released
    after = device.stats
    assert after.live_buffers == before.live_buffers and after.live_bytes == before.live_bytes


def test_sizes_round_up_to_words(device: GpuDevice) -> None:
    h = device.create_storage(6)
    assert h.nbytes == 8
    device.release(h)


@pytest.mark.parametrize("nbytes", [0, -4])
def test_non_positive_sizes_are_allocation_errors(device: GpuDevice, nbytes: int) -> None:
    with pytest.raises(DeviceAllocationError):
        device.create_storage(nbytes)


def test_sizes_beyond_the_device_limits_are_allocation_errors(device: GpuDevice) -> None:
    too_big = device.limits["max-storage-buffer-binding-size"] + 4
    count = device.stats.allocations_total
    with pytest.raises(DeviceAllocationError) as err:
        device.create_storage(too_big)
    assert "limit" in err.value.message
    with pytest.raises(DeviceAllocationError):
        device.create_staging(device.limits["max-buffer-size"] + 4)
    with pytest.raises(DeviceAllocationError):
        device.create_storage("many")  # type: ignore[arg-type]
    assert device.stats.allocations_total == count


def test_pipeline_cache_counts_hits_and_misses(device: GpuDevice) -> None:
    s0 = device.stats
    p1 = device.pipeline(WGSL_X2, [True, False])
    p2 = device.pipeline(WGSL_X2, [True, False])
    assert p1 is p2
    s1 = device.stats
    assert s1.pipeline_misses - s0.pipeline_misses <= 1  # the module's device may have built it already
    assert s1.pipeline_hits >= s0.pipeline_hits + 1
    p3 = device.pipeline(WGSL_INC, [False])
    assert p3 is not p1 and device.stats.pipelines_live >= 2


def test_invalid_wgsl_raises_and_logs_nothing(device: GpuDevice, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with pytest.raises(PipelineError) as err:
        device.pipeline("fn main( {", [])
    assert "error" in err.value.message.lower()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # The device stays usable after a rejected shader.
    assert device.pipeline(WGSL_X2, [True, False]) is not None


def test_binding_kinds_must_match_the_shader(device: GpuDevice) -> None:
    # The shader writes binding 2, the layout says read-only.
    with pytest.raises(PipelineError):
        device.pipeline(WGSL_X2, [True, True])
    with pytest.raises(PipelineError):
        device.pipeline(WGSL_X2, [True])  # binding 2 missing from the layout


def test_release_pipeline_drops_it_from_the_cache(make_device) -> None:
    dev = make_device()
    p = dev.pipeline(WGSL_INC, [False])
    a, u = dev.create_storage(1024), dev.create_uniform()
    dev.execute(ExecutePlan(p, u, params(256), [a], workgroups=grid(256)), 10.0)
    assert dev.stats.bind_groups_live == 1
    dev.release(p)
    dev.release(p)
    assert dev.stats.pipelines_live == 0 and dev.stats.bind_groups_live == 0
    with pytest.raises(DeviceFailure) as err:
        dev.execute(ExecutePlan(p, u, None, [a], workgroups=grid(256)), 10.0)
    assert err.value.stage == "submit" and not err.value.submitted
    assert dev.pipeline(WGSL_INC, [False]) is not p  # rebuilt


def test_bind_groups_are_cached_by_handles(make_device) -> None:
    dev = make_device()
    p = dev.pipeline(WGSL_X2, [True, False])
    a, b, c, u = dev.create_storage(1024), dev.create_storage(1024), dev.create_storage(1024), dev.create_uniform()
    for _ in range(3):
        dev.execute(ExecutePlan(p, u, params(256), [a, b], workgroups=grid(256)), 10.0)
    st = dev.stats
    assert (st.bind_group_misses, st.bind_group_hits, st.bind_groups_live) == (1, 2, 1)
    dev.execute(ExecutePlan(p, u, None, [a, c], workgroups=grid(256)), 10.0)
    assert dev.stats.bind_groups_live == 2
    dev.release(c)  # invalidates the group that used it
    assert dev.stats.bind_groups_live == 1
    with pytest.raises(DeviceFailure) as err:
        dev.execute(ExecutePlan(p, u, None, [a, c], workgroups=grid(256)), 10.0)
    assert err.value.stage == "submit"


def test_a_kept_plan_uses_its_group_while_it_lives(make_device) -> None:
    """A plan dispatched again uses the bind group found for it (a cache hit, no key built); once
    the cache evicts that group or a buffer it binds is released, the plan gets a fresh group or
    the submit failure a new plan would get."""
    dev = make_device(tuning=DeviceTuning(bind_group_cache=1))
    p = dev.pipeline(WGSL_X2, [True, False])
    a, b, c, u = dev.create_storage(1024), dev.create_storage(1024), dev.create_storage(1024), dev.create_uniform()
    staging = dev.create_staging(1024)
    dev.write(a, 0, words(range(256)))
    kept = ExecutePlan(p, u, params(256), [a, b], workgroups=grid(256))
    for _ in range(3):
        dev.execute(kept, 10.0)
    st = dev.stats
    assert (st.bind_group_misses, st.bind_group_hits) == (1, 2)
    dev.execute(ExecutePlan(p, u, None, [a, c], workgroups=grid(256)), 10.0)  # evicts kept's group
    assert kept.group.obj is None and dev.stats.bind_groups_live == 1
    dev.write(b, 0, words([0] * 256))
    dev.execute(kept, 10.0)
    assert dev.stats.bind_group_misses == 3
    assert (dev.read(b, staging, 1024, 10.0) == words(range(0, 512, 2))).all()
    dev.release(b)  # releases the group kept on the plan
    with pytest.raises(DeviceFailure) as err:
        dev.execute(kept, 10.0)
    assert err.value.stage == "submit" and not err.value.submitted


def test_plan_shape_errors_are_submit_failures(device: GpuDevice) -> None:
    p = device.pipeline(WGSL_X2, [True, False])
    a, b, u = device.create_storage(64), device.create_storage(64), device.create_uniform()
    bad = [
        ExecutePlan(p, u, params(16), [a], workgroups=(1, 1)),  # one buffer for two bindings
        ExecutePlan(p, a, params(16), [a, b], workgroups=(1, 1)),  # storage buffer as uniform
        ExecutePlan(p, u, b"short", [a, b], workgroups=(1, 1)),  # params not 16 bytes
        ExecutePlan(p, u, None, [a, b], workgroups=(device.limits["max-compute-workgroups-per-dimension"] + 1, 1)),
        ExecutePlan(p, u, None, [a, b], seeds=[(a, b, 0, 128)], workgroups=(1, 1)),  # seed beyond the end
    ]
    for plan in bad:
        with pytest.raises(DeviceFailure) as err:
            device.execute(plan, 10.0)
        assert err.value.stage == "submit" and not err.value.submitted, plan
    for h in (a, b, u):
        device.release(h)
