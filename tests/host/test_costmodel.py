"""The measured placement's cost model on synthetic dispatch times shaped like the H200 run's
(bench/results/h200/placement_ladder_*.jsonl): the GPU about 0.2 ms flat, the CPU kernels rising
with the count, each band's first dispatch on a device paying a cold cost. After the exploring
dispatches of each size, every decision must be the faster device."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from wagogpu.host.costmodel import REPROBE_EVERY, Device, KernelModel

Cost = Callable[[int], float]
COLD = 0.05  # a band's first dispatch: buffer allocation, upload, pipeline warm-up (50 ms)


def twice_cpu(n: int) -> float:
    return 100e-6 + 0.3e-9 * n


def poly_cpu(n: int) -> float:
    return 80e-6 + 2.5e-9 * n


def gpu_flat(n: int) -> float:
    return 200e-6


def ladder(model: KernelModel, sizes: list[int], costs: dict[Device, Cost], explore: int = 12,
           timed: int = 7) -> dict[int, list[Device]]:
    """Each size's timed decisions after `explore` untimed ones, as bench/placement_ladder.py runs them."""
    cold: set[tuple[Device, int]] = set()
    chosen: dict[int, list[Device]] = {}
    for n in sizes:
        picks = []
        for i in range(explore + timed):
            device = model.choose(n, 0.0, 0.0)
            seconds = costs[device](n) + (COLD if (device, n) not in cold else 0.0)
            cold.add((device, n))
            model.observe(device, n, seconds)
            if i >= explore:
                picks.append(device)
        chosen[n] = picks
    return chosen


def faster(costs: dict[Device, Cost], n: int) -> Device:
    return min(Device, key=lambda d: costs[d](n))


@pytest.mark.parametrize("cpu, sizes", [
    (twice_cpu, [16384, 65536, 262144, 1048576, 2097152, 4194304, 8388608]),
    (poly_cpu, [1024, 4096, 16384, 65536, 262144, 1048576, 4194304]),
])
def test_decisions_converge_to_the_faster_device_at_every_size(cpu: Cost, sizes: list[int]) -> None:
    costs = {Device.GPU: gpu_flat, Device.CPU: cpu}
    chosen = ladder(KernelModel(), sizes, costs)
    for n in sizes:
        assert chosen[n] == [faster(costs, n)] * 7, n
    assert {faster(costs, n) for n in sizes} == {Device.GPU, Device.CPU}  # the ladder crosses over


def test_sizes_visited_largest_first_converge_too() -> None:
    costs = {Device.GPU: gpu_flat, Device.CPU: twice_cpu}
    sizes = [8388608, 1048576, 262144, 16384]
    chosen = ladder(KernelModel(), sizes, costs)
    assert all(chosen[n] == [faster(costs, n)] * 7 for n in sizes)


def test_a_device_that_got_faster_is_found_by_the_reprobe() -> None:
    model = KernelModel()
    slow_gpu: dict[Device, Cost] = {Device.GPU: lambda n: 5e-3, Device.CPU: twice_cpu}
    assert ladder(model, [65536], slow_gpu)[65536] == [Device.CPU] * 7
    fast_gpu: dict[Device, Cost] = {Device.GPU: lambda n: 1e-6, Device.CPU: twice_cpu}
    picks = ladder(model, [65536], fast_gpu, explore=4 * REPROBE_EVERY, timed=7)[65536]
    assert picks == [Device.GPU] * 7


def test_the_snapshot_report_shows_each_device_and_the_decisions() -> None:
    model = KernelModel()
    ladder(model, [4096], {Device.GPU: gpu_flat, Device.CPU: poly_cpu})
    report = model.report()
    assert report["decisions"] == 19
    for device in ("GPU", "CPU"):
        entry = report[device]
        assert isinstance(entry, dict) and entry["samples"] >= 2 and "4096" in entry["median_us_from_elements"]
    last = report["last"]
    assert isinstance(last, list) and last[-1]["device"] == "CPU" and last[-1]["why"].startswith("predicted")


def test_a_move_back_is_spread_over_the_next_dispatches() -> None:
    """After a GPU re-probe the output lives on the GPU: reading it back for a CPU kernel that is
    faster by more than an eighth of the copy must not keep the kernel on the GPU."""
    model = KernelModel()
    costs: dict[Device, Cost] = {Device.GPU: gpu_flat, Device.CPU: lambda n: 165e-6}
    assert ladder(model, [16384], costs)[16384] == [Device.CPU] * 7
    assert model.choose(16384, 0.0, 65e-6) is Device.CPU  # a 64 KiB readback at 1 ns per byte
    assert model.choose(16384, 0.0, 1e-3) is Device.GPU  # one that costs more than 8 dispatches' gain
