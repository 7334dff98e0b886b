"""The measured placement's cost model on synthetic dispatch times shaped like the H200 run's
(bench/results/h200/placement_ladder_*.jsonl): the GPU about 0.2 ms flat, the CPU kernels rising
with the count, each band's first dispatch on a device paying a cold cost and the GPU's second one
another (its second output buffer is allocated then). After the exploring dispatches of each size,
every decision must be the faster device; moves are priced apart from the kernels' bands."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from wagogpu.host.costmodel import (DEFAULT_COPY_FIXED, MIN_SAMPLES, PROBE_RATIO, SETTLE, STREAK, CopyLine,
                                    CostModels, Device, KernelModel, Why)

Cost = Callable[[int], float]
COLD = 0.05  # a band's first dispatch: buffer allocation, upload, pipeline warm-up (50 ms)
SECOND = 0.03  # the GPU's second dispatch in a band: its second output buffer allocated (30 ms)


def twice_cpu(n: int) -> float:
    return 100e-6 + 0.3e-9 * n


def poly_cpu(n: int) -> float:
    return 80e-6 + 2.5e-9 * n


def gpu_flat(n: int) -> float:
    return 200e-6


def decide(model: KernelModel, n: int, move_gpu: float, move_cpu: float) -> Device:
    """A decision as placement.measured_where asks for it: a settled streak's repeat, else choose()."""
    return model.repeat(n) or model.choose(n, move_gpu, move_cpu)


def end_streak(model: KernelModel, n: int, costs: dict[Device, Cost], move: float) -> None:
    """The data moved away from the device of a running streak (the guest wrote it on the CPU,
    another kernel on the GPU): the streak's next dispatch copies it back, and observing that
    dispatch ends the streak, so the decisions after it price the move (placement.measured_where)."""
    device = model.repeat(n)
    if device is not None:
        model.observe(device, n, costs[device](n) + move, moved=move)
        assert not model.bands[n.bit_length()].streak


def ladder(model: KernelModel, sizes: list[int], costs: dict[Device, Cost], explore: int = 12,
           timed: int = 7) -> dict[int, list[Device]]:
    """Each size's timed decisions after `explore` untimed ones, as bench/placement_ladder.py runs them."""
    seen: dict[tuple[Device, int], int] = {}
    chosen: dict[int, list[Device]] = {}
    for n in sizes:
        picks = []
        for i in range(explore + timed):
            device = decide(model, n, 0.0, 0.0)
            runs = seen[(device, n)] = seen.get((device, n), 0) + 1
            extra = COLD if runs == 1 else SECOND if runs == 2 and device is Device.GPU else 0.0
            model.observe(device, n, costs[device](n) + extra)
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


def test_exploration_is_bounded_per_band() -> None:
    """A new band costs each device its SETTLE transients (the first is cold) and MIN_SAMPLES samples, no more."""
    model = KernelModel()
    picks = [decide(model, 4096, 0.0, 0.0) for _ in range(1)]
    for _ in range(2 * (MIN_SAMPLES + SETTLE) + 20):
        model.observe(picks[-1], 4096, 1e-3 if picks[-1] is Device.GPU else 1e-4)
        picks.append(decide(model, 4096, 0.0, 0.0))
    explored = 2 * (MIN_SAMPLES + SETTLE)
    assert picks[:explored] == [Device.GPU] * (MIN_SAMPLES + SETTLE) + [Device.CPU] * (MIN_SAMPLES + SETTLE)
    assert set(picks[explored:]) == {Device.CPU}
    assert model.report()["last"][-1]["why"].startswith("predicted")  # type: ignore[index]


def test_a_device_that_becomes_faster_is_found_again() -> None:
    """The GPU is slow while the model settles on the CPU; then it becomes 100x faster: the
    probes find it, and the kernel moves there within a bounded share of the time spent."""
    model = KernelModel()
    gpu_cost = [5e-3]
    costs: dict[Device, Cost] = {Device.GPU: lambda n: gpu_cost[0], Device.CPU: twice_cpu}
    assert ladder(model, [65536], costs)[65536] == [Device.CPU] * 7
    gpu_cost[0] = 5e-5
    spent = 0.0
    for _ in range(10_000):
        device = decide(model, 65536, 0.0, 0.0)
        model.observe(device, 65536, costs[device](65536))
        spent += costs[device](65536)
        if device is Device.GPU and model.last[-1][2] is Why.PREDICTED:
            break
    else:
        pytest.fail("the faster GPU was never chosen again")
    # Before the first probe the band spends PROBE_RATIO times its price; then a few probes confirm.
    assert spent <= PROBE_RATIO * ((SETTLE + 1) * 5e-3 + twice_cpu(65536)) + 10 * twice_cpu(65536)
    assert [decide(model, 65536, 0.0, 0.0) for _ in range(5)] == [Device.GPU] * 5


def test_probes_take_a_bounded_share_of_the_time() -> None:
    """The CPU wins by 10x: over a long run the GPU probes (and the moves back they cause) cost
    about 1/PROBE_RATIO of the time, not one dispatch in 64 whatever it costs."""
    model = KernelModel()
    cost = {Device.GPU: 300e-6, Device.CPU: 30e-6}
    back = 100e-6  # the CPU dispatch after a probe reads the output back
    probes = total = 0.0
    previous = Device.CPU
    for i in range(20_000):
        device = decide(model, 1024, 0.0, back if previous is Device.GPU else 0.0)
        moved = back if device is Device.CPU and previous is Device.GPU else 0.0
        seconds = cost[device] + moved
        model.observe(device, 1024, seconds, moved)
        if i > 100:
            total += seconds
            probes += seconds - cost[Device.CPU] if device is Device.GPU or moved else 0.0
        previous = device
    assert 0 < probes / total < 2.0 / PROBE_RATIO


def test_a_moves_cost_is_not_charged_to_the_kernels_band() -> None:
    model = KernelModel()
    for _ in range(MIN_SAMPLES + 1):
        model.observe(Device.GPU, 1 << 20, 2e-4)
    model.observe(Device.GPU, 1 << 20, 2e-4 + 8e-3, moved=8e-3)  # an upload of 8 ms rode along
    model.observe(Device.GPU, 1 << 20, 2e-4 + 8e-3, moved=8e-3)
    assert model.estimate(Device.GPU, 1 << 20) == pytest.approx(2e-4)
    band = model.bands[(1 << 20).bit_length()]
    assert max(band.gpu.seconds) == pytest.approx(2e-4)


def test_transients_are_not_samples_and_the_lower_median_ignores_one_off_costs() -> None:
    """The H200's 64K twice: the cold dispatch and the second (its second output allocated) are no
    samples; of [a one-off 3x cost, plain] the band predicts the plain time."""
    model = KernelModel()
    for seconds in (0.05, 0.03, 3e-4, 1e-4):
        model.observe(Device.GPU, 65536, seconds)
    assert model.estimate(Device.GPU, 65536) == pytest.approx(1e-4)
    assert max(model.bands[(65536).bit_length()].gpu.seconds) == pytest.approx(3e-4)


def test_the_dispatches_just_after_a_change_of_device_are_not_samples() -> None:
    """After a readback the next GPU dispatches carry a read-ahead (on the H200 about 0.4 ms each):
    coming back to a device, its first SETTLE dispatches are transients, not the kernel's cost."""
    model = KernelModel()
    for device, seconds in [(Device.GPU, 1e-4)] * 4 + [(Device.CPU, 2e-4)] * 4 + [(Device.GPU, 5e-4)] * SETTLE:
        model.observe(device, 4096, seconds)
    assert list(model.bands[(4096).bit_length()].gpu.seconds) == [1e-4, 1e-4]
    model.observe(Device.GPU, 4096, 1e-4)
    assert list(model.bands[(4096).bit_length()].gpu.seconds) == [1e-4] * 3


def test_a_move_waits_until_staying_has_cost_as_much() -> None:
    """Ski rental: the GPU's kernel is 20 us faster but the data lives on the CPU and moving it
    costs 100 us: the kernel stays for about five dispatches, then moves (not never, not at once)."""
    model = KernelModel()
    costs: dict[Device, Cost] = {Device.GPU: lambda n: 80e-6, Device.CPU: lambda n: 100e-6}
    ladder(model, [16384], costs)
    end_streak(model, 16384, costs, 100e-6)
    picks = [decide(model, 16384, 100e-6, 0.0) for _ in range(8)]
    first = picks.index(Device.GPU)  # the deficit reaches the move's extra 80 us after 4 dispatches
    assert 3 <= first <= 4 and set(picks[:first]) == {Device.CPU}
    assert [d[2] for d in model.last].count(Why.MOVED) == 1


def test_a_costly_readback_waits_for_the_deficit() -> None:
    """The CPU kernel is faster by 50 us; reading the output back costs 1 ms: the kernel stays on
    the GPU's data until staying has cost the readback's extra 950 us (19 dispatches), then moves."""
    model = KernelModel()
    costs: dict[Device, Cost] = {Device.GPU: lambda n: 150e-6, Device.CPU: lambda n: 100e-6}
    ladder(model, [16384], costs)
    end_streak(model, 16384, costs, 1e-3)
    picks = [decide(model, 16384, 0.0, 1e-3) for _ in range(25)]
    first = picks.index(Device.CPU)
    assert 18 <= first <= 19 and set(picks[:first]) == {Device.GPU}


def test_the_snapshot_report_shows_each_device_and_the_decisions() -> None:
    model = KernelModel()
    ladder(model, [4096], {Device.GPU: gpu_flat, Device.CPU: poly_cpu})
    report = model.report()
    assert report["decisions"] == 19
    for device in ("GPU", "CPU"):
        entry = report[device]
        assert isinstance(entry, dict) and entry["samples"] >= 2 and "4096" in entry["median_us_from_elements"]
    last = report["last"]
    assert isinstance(last, list) and len(last) == 8
    assert last[-1]["device"] == "CPU" and last[-1]["why"].startswith("predicted")


def test_a_copy_line_separates_the_fixed_cost_from_the_rate() -> None:
    line = CopyLine()
    for nbytes in (4096, 1 << 20, 4096, 1 << 24, 1 << 16):
        line.add(nbytes, 50e-6 + nbytes * 0.2e-9)
    assert line.fixed == pytest.approx(50e-6, rel=1e-6) and line.per_byte == pytest.approx(0.2e-9, rel=1e-6)
    assert line.seconds(1 << 22, 2) == pytest.approx(2 * 50e-6 + (1 << 22) * 0.2e-9)
    assert line.seconds(0, 0) == 0.0


def test_one_size_of_copy_is_split_no_worse_than_the_default_fixed_part() -> None:
    line = CopyLine()
    line.add(1 << 20, 1e-3)
    assert line.fixed <= DEFAULT_COPY_FIXED
    assert line.seconds(1 << 20, 1) == pytest.approx(1e-3)


def test_several_copies_in_one_record_count_each() -> None:
    models = CostModels()
    models.note_copy(Device.CPU, 2 << 20, 2e-3, copies=2)
    assert models.to_cpu.copies == 2 and models.copy_seconds(Device.CPU, 1 << 20) == pytest.approx(1e-3)
    assert models.to_gpu.copies == 0


def test_a_chosen_device_that_becomes_slower_is_left() -> None:
    """The GPU wins, then takes 20x longer: its own samples (one per settled streak at first, every
    dispatch once they stray from the estimate) move its estimate, and the kernel leaves it soon."""
    model = KernelModel()
    gpu_cost = [5e-5]
    costs: dict[Device, Cost] = {Device.GPU: lambda n: gpu_cost[0], Device.CPU: twice_cpu}
    assert ladder(model, [65536], costs)[65536] == [Device.GPU] * 7
    gpu_cost[0] = 1e-3
    picks = []
    for _ in range(60):
        device = decide(model, 65536, 0.0, 0.0)
        model.observe(device, 65536, costs[device](65536))
        picks.append(device)
    assert picks.index(Device.CPU) <= 3 * STREAK + MIN_SAMPLES + 2
    assert picks[-10:] == [Device.CPU] * 10


def test_a_settled_decision_repeats_until_a_move_is_needed() -> None:
    model = KernelModel()
    ladder(model, [4096], {Device.GPU: gpu_flat, Device.CPU: poly_cpu})
    band = model.bands[(4096).bit_length()]
    while band.streak != STREAK - 1:  # up to the next evaluated decision that starts a streak
        device = decide(model, 4096, 0.0, 0.0)
        model.observe(device, 4096, poly_cpu(4096) if device is Device.CPU else gpu_flat(4096))
    started, decisions = model.last[-1], model.decisions
    for _ in range(STREAK - 3):  # inside the streak nothing is evaluated, yet every decision counts
        assert decide(model, 4096, 0.0, 0.0) is Device.CPU
        model.observe(Device.CPU, 4096, poly_cpu(4096))
    assert model.last[-1] is started and model.decisions == decisions + STREAK - 3
    samples = band.cpu.samples
    assert decide(model, 4096, 0.0, 1.0) is Device.CPU  # repeated before any move is priced ...
    model.observe(Device.CPU, 4096, poly_cpu(4096) + 1e-3, moved=1e-3)  # ... but this dispatch moved data:
    assert band.streak == 0 and band.cpu.samples == samples + 1  # the streak ends, the dispatch is a sample
    assert decide(model, 4096, 0.0, 1.0) is Device.GPU  # and the next decision prices the move (it stays away)
    assert model.last[-1] is not started


def test_noisy_probes_of_a_slower_device_do_not_cascade() -> None:
    """A GPU about 1.6x slower whose times swing by 2x (a loaded host): a probe that lands low
    against the GPU's own estimate but not below the CPU's asks for no second probe at once."""
    model = KernelModel()
    swings = [1.3e-3, 2.6e-3, 1.9e-3, 2.4e-3, 1.4e-3]
    gpu_runs = 0
    for i in range(6000):
        device = decide(model, 65536, 0.0, 0.0)
        seconds = swings[i % len(swings)] if device is Device.GPU else 1.2e-3
        model.observe(device, 65536, seconds)
        gpu_runs += device is Device.GPU and i >= 12
    assert 0 < gpu_runs < 6000 / PROBE_RATIO
