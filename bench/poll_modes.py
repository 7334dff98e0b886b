"""How a waited resident dispatch waits: spinning on non-blocking polls (DeviceCore.wait's way)
against one blocking wgpuDevicePoll, with the backend's native calls alone and through the host.
Medians, quartiles and minima per variant, the variants alternated in rounds, JSONL.

python -m bench.poll_modes [--allow-software-adapter] [--rounds 40] [--calls 50]

Native: the resident dispatch's own pipeline and bind group (bench.host_overhead's native floor),
then a work-done fence waited for by spinning (``native_spin``), by one blocking poll
(``native_block``) or by spinning with a scheduler yield between polls (``native_spin_yield``).
Through the host: the guest's resident dispatch with the device's wait as it is (``host_spin``)
and with a blocking poll before it (``host_block``). ``idle_poll`` is one non-blocking poll with
nothing in flight. ``polls_per_call`` counts the non-blocking polls a native variant made. The
output of a last host dispatch is checked after the timers. Raw backend only (the blocking poll is
a wgpu-native call).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from typing import Any, Callable

import numpy as np

from bench.buffer_bench import device_string, kernel_configs
from bench.common import emit, environment
from bench.host_overhead import guest, native_parts, native_resident
from bench.work_guest import KERNEL_IDS, reference
from wagogpu import Config, Host
from wagogpu.gpu.backend import DeviceApi

N = 1024


def blocking_poll(core) -> Callable[[], None]:
    """One wgpuDevicePoll that waits until the device's queue is done (the raw backend's call),
    bound once: the timed variants call it with nothing looked up."""
    from wagogpu.gpu import _native  # (here: main() has checked the device runs on the raw backend)

    return partial(_native._poll, core.backend._D, 1, _native._NULL)


def native_variants(inst, polls: list[int]) -> dict[str, Callable[[], None]]:
    """The native waits over the dispatch's own ExecutePlan (bench.host_overhead's native floor)."""
    core, plan, group = native_parts(inst, KERNEL_IDS["twice"], N)
    backend = core.backend

    def spinning(pause: Callable[[], None] | None) -> Callable[[Any], None]:
        def spin(cell) -> None:
            while not cell.status:
                backend.poll()
                polls[0] += 1
                if pause is not None:
                    pause()
        return spin

    spin = spinning(None)
    wait_idle = blocking_poll(core)

    def block(cell) -> None:
        wait_idle()
        spin(cell)  # (a fence the blocking poll returned before: none was seen)

    return {"native_spin": native_resident(core, plan, group, spin),
            "native_block": native_resident(core, plan, group, block),
            "native_spin_yield": native_resident(core, plan, group, spinning(lambda: time.sleep(0))),
            "idle_poll": lambda: backend.poll()}


def host_variants(inst) -> dict[str, Callable[[], None]]:
    """The guest's resident dispatch, the device's wait as it is and after a blocking poll."""
    core = inst.ctx.device._core
    wait = core.wait
    wait_idle = blocking_poll(core)

    def blocking_wait(deadline, cells, what="work") -> None:
        with core.lock:
            wait_idle()
        wait(deadline, cells, what)

    def dispatch(waiter) -> Callable[[], None]:
        def run() -> None:
            core.wait = waiter
            try:
                inst.call("dispatch", KERNEL_IDS["twice"], N)
            finally:
                del core.wait
        return run

    return {"host_spin": dispatch(wait), "host_block": dispatch(blocking_wait)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=50, help="timed calls per variant and round")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        raise SystemExit(f"bench.poll_modes: --rounds and --calls must be at least 1, got {args.rounds}, {args.calls}")
    soft = args.allow_software_adapter
    host = Host(Config(kernels=kernel_configs(), allow_software_adapter=soft, require_gpu=not soft))
    if host.device is None:
        raise SystemExit(f"bench.poll_modes: no GPU adapter ({host.context.device_reason})")
    if host.device.api is not DeviceApi.RAW:
        raise SystemExit(f"bench.poll_modes: the device runs on the {host.device.api} backend; the blocking poll "
                         "is a wgpu-native call of the raw one")
    inst, x = guest(host, N)
    polls = [0]
    variants = {**native_variants(inst, polls), **host_variants(inst)}
    times: dict[str, list[int]] = {name: [] for name in variants}
    polled = dict.fromkeys(variants, 0)
    for _ in range(args.rounds):
        for name, run in variants.items():
            for _ in range(5):
                run()
            polls[0] = 0
            for _ in range(args.calls):
                t0 = time.perf_counter_ns()
                run()
                times[name].append(time.perf_counter_ns() - t0)
            polled[name] += polls[0]
    inst.call("upload", N)
    inst.call("dispatch", KERNEL_IDS["twice"], N)
    inst.call("download", N, 8 * N)
    checked = bool(np.array_equal(inst.memory_view().view(np.float32)[2 * N:3 * N], reference("twice", x)))
    record: dict[str, Any] = {"bench": "poll_modes", "elements": N, "rounds": args.rounds, "calls": args.calls,
                              "checked": checked}
    for name, t in times.items():
        t.sort()
        record[name] = {"min_us": t[0] / 1e3, "q1_us": t[len(t) // 4] / 1e3, "median_us": statistics.median(t) / 1e3,
                        "polls_per_call": polled[name] / len(t)}
    record["adapter"] = device_string(host)
    host.close()
    emit({**record, **environment()})
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
