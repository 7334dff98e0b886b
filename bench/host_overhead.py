"""Where the host's time goes per call: Python->Wasm, Wasm->Python imports, resident dispatch,
a checked 1,024-element round trip and its parts. Medians of many calls, JSONL.

python -m bench.host_overhead [--allow-software-adapter] [--cpu] [--profile-out FILE]

Read-ahead on and off are two hosts (TransferTuning(readahead=False) for the second), alternated
in blocks within this one process; a third host, pipelined, times a resident dispatch that returns
once recorded. --cpu runs with the device disabled: the imports' own cost, the
dispatch answering 1 and the guest's CPU runner over the accessor's scalar imports. The
host-only figures stand beside the Python floor (bench.python_floor) measured in the same run.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from bench.buffer_bench import kernel_configs
from bench.bytecodes import count_bytecodes
from bench.common import CallTimer, emit, environment
from examples.progress import Progress
from bench.work_guest import KERNEL_IDS, input_values, reference, wat
from wagogpu import Config, Host
from wagogpu.buffers import TransferTuning

CALLS = 300


def median_us(fn, calls: int = CALLS) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


@contextlib.contextmanager
def stubbed_device(inst) -> Iterator[None]:
    """The instance's device layer stubbed out while inside: execute and read return at once (read
    leaves ``out`` as it is), so what is measured is the Python host alone."""
    from wagogpu.gpu import ExecuteResult

    dev = inst.ctx.device

    def execute(plan, timeout):
        return ExecuteResult(0.0, 0.0, 0.0, 0.0, None, True, True, 0, 0)

    def read(src, staging, nbytes, timeout, out=None):
        return out if out is not None else np.zeros(nbytes // 4, np.uint32)

    dev.execute, dev.read = execute, read
    try:
        yield
    finally:
        del dev.execute, dev.read  # the class's methods again


def host_only(inst, k: int, n: int) -> dict[str, float | bool]:
    """The same calls with the device layer stubbed out (execute and read return at once): what the
    Python host costs per call on this CPU, whatever the GPU, beside bench.python_floor's direct
    host of the same imports (its results checked after its timers; the package's are not checked
    here)."""
    with stubbed_device(inst):
        figures = {"host_only_resident_dispatch_us": median_us(lambda: inst.call("dispatch", k, n)),
                   "host_only_round_trip_us": median_us(lambda: inst.call("sample", k, n)),
                   **import_budget(inst, k, n), **round_trip_budget(inst, k, n), **resident_layers(inst, k, n),
                   **bytecodes(inst, k, n), "import_floor_us": import_floor()}
    from bench.python_floor import floor_figures  # (it borrows median_us from here)

    figures.update(floor_figures(n, k))  # (main takes python_floor_checked out into the record's check)
    for name in ("round_trip", "resident_dispatch"):
        figures[f"host_only_over_python_floor_{name}"] = \
            figures[f"host_only_{name}_us"] / figures[f"python_floor_{name}_us"]
        figures[f"bytecodes_over_python_floor_{name}"] = \
            figures[f"bytecodes_{name}"] / figures[f"bytecodes_python_floor_{name}"]
    return figures


def bytecodes(inst, k: int, n: int) -> dict[str, int]:
    """The package's bytecodes per call (device stubbed, each call in the state its timing above
    left it): the load-free companion of the host-only timings."""
    c = inst.call
    return {f"bytecodes_{name}": count_bytecodes(fn, ("wagogpu/",)).opcodes for name, fn in (
        ("resident_dispatch", lambda: c("dispatch", k, n)), ("round_trip", lambda: c("sample", k, n)),
        ("set_1024", lambda: c("upload", n)), ("copy_back_cpu_current_1024", lambda: c("download", n, 8 * n)),
        ("noop_dispatch", lambda: c("dispatch", k, 0)))}


def device_bytecodes(inst, k: int, n: int) -> dict[str, int]:
    """The package's bytecodes per call with the real device attached, the device layer's Python
    included: the load-free companion of the device share. Each wait's own frames are left out
    (how often it polls depends on the GPU; what it wakes, each map's callback, is counted)."""
    c = inst.call
    return {f"bytecodes_{name}_with_device": count_bytecodes(fn, ("wagogpu/",), (("gpu/core.py", "wait"),)).opcodes
            for name, fn in (("resident_dispatch", lambda: c("dispatch", k, n)), ("round_trip", lambda: c("sample", k, n)))}


def round_trip_budget(inst, k: int, n: int) -> dict[str, float]:
    """The three imports of a checked round trip (device stubbed), each in the state the round trip
    leaves it: the set of a buffer the last dispatch read, the dispatch that uploads it (and asks
    for a read-ahead of its output), the copy-back of a GPU-current output. Each beyond the
    Python->Wasm call that makes it."""
    call = median_us(lambda: inst.call("grow_to", 0))
    samples: dict[str, list[int]] = {"set": [], "dispatch_after_set": [], "copy_back_gpu_current": []}
    c = inst.call
    for i in range(CALLS + 10):
        t0 = time.perf_counter_ns()
        c("upload", n)
        t1 = time.perf_counter_ns()
        c("dispatch", k, n)
        t2 = time.perf_counter_ns()
        c("download", n, 8 * n)
        t3 = time.perf_counter_ns()
        if i >= 10:
            for name, dt in (("set", t1 - t0), ("dispatch_after_set", t2 - t1), ("copy_back_gpu_current", t3 - t2)):
                samples[name].append(dt)
    return {f"round_trip_budget_{name}_1024_us": statistics.median(v) / 1e3 - call for name, v in samples.items()}


def resident_layers(inst, k: int, n: int) -> dict[str, float]:
    """Where a resident dispatch's time goes (device stubbed): inside the buffer layer's
    Dispatcher.run (the transaction, steady or not), the rest of the import beyond the call."""
    dispatcher = inst.ctx.dispatcher
    with CallTimer([(dispatcher, "run", "run")]) as timer:
        for _ in range(10):
            inst.call("dispatch", k, n)
        inside = []
        for _ in range(CALLS):
            timer.take()
            inst.call("dispatch", k, n)
            inside.append(timer.take()["run"])
    return {"resident_dispatch_in_dispatcher_run_us": statistics.median(inside) * 1e6}


def import_floor() -> float:
    """What any import costs at least here: a Python->Wasm call whose Wasm calls a Python host
    function that takes a lock and returns (the crossing both ways, no checks, no record)."""
    import threading

    import wasmtime

    lock = threading.RLock()

    def nop(a: int, b: int) -> int:
        with lock:
            return 0

    with Host(Config(disabled=True)) as host:
        i32 = wasmtime.ValType.i32()
        host.define_func("env", "nop", wasmtime.FuncType([i32, i32], [i32]), nop)
        inst = host.instantiate(host.compile('(module (import "env" "nop" (func $nop (param i32 i32) (result i32)))'
                                             ' (func (export "nop") (param i32 i32) (result i32)'
                                             ' (call $nop (local.get 0) (local.get 1))))'))
        return median_us(lambda: inst.call("nop", 1, 2))


def import_budget(inst, k: int, n: int) -> dict[str, float]:
    """The per-import budget (device stubbed, host only): what one import costs beyond the
    Python->Wasm call that makes it. A dispatch of count 0 is every import's fixed part (the
    crossing, the lock, the record and its counters, the checks); the others add their work."""
    call = median_us(lambda: inst.call("grow_to", 0))
    return {f"import_budget_{name}_us": median_us(fn) - call for name, fn in (
        ("fixed_noop_dispatch", lambda: inst.call("dispatch", k, 0)),
        ("set_1024", lambda: inst.call("upload", n)),
        ("copy_back_cpu_current_1024", lambda: inst.call("download", n, 8 * n)),
        ("resident_dispatch", lambda: inst.call("dispatch", k, n)))}


def submissions_per_round_trip(host: Host, inst, k: int, n: int, calls: int = 100) -> dict[str, float]:
    """Device submissions per checked round trip (set, dispatch, copy back), counted by the device."""
    dev = host.device
    before = dev.stats.submissions
    for _ in range(calls):
        inst.call("sample", k, n)
    return {"submissions_per_round_trip": (dev.stats.submissions - before) / calls}


def device_layer(dev) -> list[tuple[object, str, str]]:
    """The device layer's entry points the host uses, all under one label."""
    return [(dev, name, "device") for name in ("execute", "read", "read_mapped", "write", "unmap", "stage", "unstage")]


def device_share(inst, k: int, n: int) -> dict[str, float]:
    """Time spent inside the device layer during the guest's calls, against each call's total:
    the host's own share with the real device attached."""
    out: dict[str, float] = {}
    with CallTimer(device_layer(inst.ctx.device)) as timer:
        for label, fn in (("resident_dispatch", lambda: inst.call("dispatch", k, n)),
                          ("checked_round_trip", lambda: inst.call("sample", k, n))):
            for _ in range(10):
                fn()
            totals, inside = [], []
            for _ in range(CALLS):
                timer.take()
                t0 = time.perf_counter()
                fn()
                totals.append(time.perf_counter() - t0)
                inside.append(timer.take()["device"])
            out[f"{label}_total_us"] = statistics.median(totals) * 1e6
            out[f"{label}_in_device_layer_us"] = statistics.median(inside) * 1e6
            out[f"{label}_outside_device_layer_us"] = statistics.median(
                [a - b for a, b in zip(totals, inside)]) * 1e6
    return out


def guest(host: Host, n: int):
    """An instance of the work guest with n input values set up in memory and two bound buffers."""
    inst = host.instantiate(host.compile(wat()))
    inst.call("grow_to", 12 * n // 65536 + 2)
    x = input_values(n)
    inst.memory_view().view(np.float32)[:n] = x
    assert inst.call("setup", n) == 0
    return inst, x


def pipelined_resident(config: Config, n: int) -> dict[str, float | bool]:
    """A resident dispatch on a pipelined host (Config(pipelined=True), the real device): each
    returns once recorded; a copy-back every 16 dispatches, outside the timer, waits for them and
    checks the output."""
    host = Host(dataclasses.replace(config, pipelined=True))
    inst, x = guest(host, n)
    k = KERNEL_IDS["twice"]
    assert inst.call("upload", n) == 0
    times = []
    for _ in range(CALLS // 16 + 4):
        for _ in range(16):
            t0 = time.perf_counter_ns()
            inst.call("dispatch", k, n)
            times.append(time.perf_counter_ns() - t0)
        inst.call("download", n, 8 * n)
    got = inst.memory_view().view(np.float32)[2 * n:3 * n]
    checked = bool(np.array_equal(got, reference("twice", x)))
    host.close()
    return {"pipelined_resident_dispatch_us": statistics.median(times[64:]) / 1e3, "pipelined_checked": checked}


def native_parts(inst, k: int, n: int) -> tuple[Any, Any, Any]:
    """(device core, ExecutePlan, bind group) of the guest's resident dispatch: its own plan,
    caught on its way to the device, and its bind group looked up once; what the native floors
    dispatch with."""
    dev = inst.ctx.device
    plans = []
    real = dev.execute

    def execute(plan, timeout):  # the dispatch's own ExecutePlan, kept
        plans.append(plan)
        return real(plan, timeout)

    dev.execute = execute
    try:
        inst.call("dispatch", k, n)
    finally:
        del dev.execute
    plan = plans[-1]
    core = dev._core
    with core.lock:
        group = dev._pipelines.bind_group(plan.pipeline, plan.uniform, plan.storage)
    return core, plan, group


def native_resident(core, plan, group, wait: Callable[[Any], None]) -> Callable[[], None]:
    """A resident dispatch with the backend's native calls alone, under the device lock: encoder,
    compute pass, submit, work-done fence, then ``wait`` for that fence."""
    backend = core.backend
    pipe, (gx, gy) = plan.pipeline._ptr, plan.workgroups

    def resident() -> None:
        with core.lock:
            enc = backend.encoder()
            backend.dispatch(enc, pipe, group, gx, gy, False)
            backend.submit(enc)
            wait(backend.fence())

    return resident


def native_floor(inst, x: np.ndarray, k: int, n: int, calls: int = CALLS) -> dict[str, float | bool]:
    """The device's part of a waited resident dispatch and of a checked round trip made with the
    backend's native calls alone, on the host's own device, pipeline and bind group: what no Python
    of ours can go below. Resident: encoder, compute pass, submit, work-done fence, poll until done.
    Round trip: the same with a 4 KiB queue write of the input before (the values it holds) and, in
    the same submission, the output copied to a readback buffer, mapped, read out and unmapped; its
    last read-out is checked after the timer (the kernel is `twice`)."""
    dev = inst.ctx.device
    core, plan, group = native_parts(inst, k, n)
    backend = core.backend
    words = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    out = np.empty(n, np.uint32)
    staging = dev.create_staging(4 * n)  # (the device's own readback buffer, freed by its release)
    readback = staging._ptr
    pipe, (gx, gy) = plan.pipeline._ptr, plan.workgroups
    src, dst = plan.storage[0]._ptr, plan.storage[-1]._ptr

    def wait(*cells) -> None:
        while not all(c.status for c in cells):
            backend.poll()

    resident = native_resident(core, plan, group, wait)

    def round_trip() -> None:
        with core.lock:
            backend.write_buffer(src, 0, words, 4 * n)
            enc = backend.encoder()
            backend.dispatch(enc, pipe, group, gx, gy, False)
            backend.copy(enc, dst, 0, readback, 0, 4 * n)
            backend.submit(enc)
            fence = backend.fence()
            wait(fence, backend.map(readback, False, 0, 4 * n))
            ctypes.memmove(out.ctypes.data, backend.read_address(readback, 0, 4 * n), 4 * n)
            backend.unmap(readback)

    try:
        figures = {"native_floor_resident_dispatch_us": median_us(resident, calls),
                   "native_floor_round_trip_us": median_us(round_trip, calls)}
    finally:
        dev.release(staging)
    return {**figures, "native_floor_checked": bool(np.array_equal(out.view(np.float32), reference("twice", x)))}


def round_trip_parts(insts: dict[str, object], k: int, n: int) -> dict[str, float]:
    """The round trip and its parts that need a specific state before each call, per host (tag),
    alternated in blocks so that every host sees the same machine state."""
    samples: dict[str, list[float]] = {}
    for block in range(6):
        tag = list(insts)[block % len(insts)]
        inst = insts[tag]
        for _ in range(3):  # settle the read-ahead hint for this setting
            inst.call("sample", k, n)
        for _ in range(CALLS // 3):
            t0 = time.perf_counter_ns()
            inst.call("sample", k, n)
            t1 = time.perf_counter_ns()
            inst.call("upload", n)
            t2 = time.perf_counter_ns()
            inst.call("dispatch", k, n)
            t3 = time.perf_counter_ns()
            inst.call("download", n, 8 * n)
            t4 = time.perf_counter_ns()
            for name, dt in (("checked_round_trip", t1 - t0), ("dispatch_after_set", t3 - t2),
                             ("copy_back_gpu_current", t4 - t3)):
                samples.setdefault(f"{name}{tag}_us", []).append(dt / 1e3)
    return {name: statistics.median(v) for name, v in sorted(samples.items())}


def cpu_figures(n: int) -> int:
    """--cpu: the device disabled; every dispatch answers 1 and the guest runs its CPU export."""
    host = Host(Config(kernels=kernel_configs(), disabled=True))
    inst, x = guest(host, n)
    k = KERNEL_IDS["twice"]

    def cpu_round_trip() -> None:
        assert inst.call("sample", k, n) == 1
        inst.call("wago_gpu.cpu.twice", n)
        inst.call("download", n, 8 * n)

    figures = {"python_to_wasm_call_us": median_us(lambda: inst.call("grow_to", 0)),
               "set_import_us": median_us(lambda: inst.call("upload", n)),
               "dispatch_answering_1_us": median_us(lambda: inst.call("dispatch", k, n)),
               "copy_back_us": median_us(lambda: inst.call("download", n, 8 * n)),
               "cpu_round_trip_us": median_us(cpu_round_trip, CALLS // 2)}
    checked = bool(np.array_equal(inst.memory_view().view(np.float32)[2 * n:3 * n], reference("twice", x)))
    emit({"bench": "host_overhead", "mode": "cpu", "elements": n, "checked": checked, **figures,
          "adapter": "none (disabled=True)", **environment()})
    host.close()
    return 0 if checked else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="device disabled: the CPU path's figures")
    parser.add_argument("--profile-out")
    parser.add_argument("--n", type=int, default=1024)
    args = parser.parse_args(argv)
    n = args.n
    if args.cpu:
        return cpu_figures(n)
    config = Config(kernels=kernel_configs(), allow_software_adapter=args.allow_software_adapter,
                    require_gpu=not args.allow_software_adapter)
    host = Host(config)
    plain = Host(config, tuning=TransferTuning(readahead=False))
    inst, x = guest(host, n)
    inst_plain, _ = guest(plain, n)
    k = KERNEL_IDS["twice"]
    progress = Progress(5 + bool(args.profile_out), "host_overhead")
    progress.step("single calls")
    figures: dict[str, float | None] = {
        "python_to_wasm_call_us": median_us(lambda: inst.call("grow_to", 0)),
        "set_import_us": median_us(lambda: inst.call("upload", n)),
        "resident_dispatch_us": median_us(lambda: inst.call("dispatch", k, n)),
    }
    progress.step("round trips")
    figures.update(round_trip_parts({"": inst, "_no_readahead": inst_plain}, k, n))
    got = inst.memory_view().view(np.float32)[2 * n:3 * n]
    checked = bool(np.array_equal(got, reference("twice", x)))
    if args.profile_out:
        progress.step("profile")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(CALLS):
            inst.call("sample", k, n)
        prof.disable()
        prof.dump_stats(args.profile_out)
    figures.update(submissions_per_round_trip(host, inst, k, n))
    progress.step("device share")
    figures.update(device_share(inst, k, n))
    figures.update(device_bytecodes(inst, k, n))
    floor = native_floor(inst, x, k, n)
    checked = checked and bool(floor.pop("native_floor_checked"))
    figures.update(floor)
    progress.step("host only")
    figures.update(host_only(inst, k, n))
    checked = checked and bool(figures.pop("python_floor_checked"))
    progress.step("pipelined")
    pipelined = pipelined_resident(config, n)
    checked = checked and bool(pipelined.pop("pipelined_checked"))
    figures.update(pipelined)
    progress.close()
    info = host.device.info
    emit({"bench": "host_overhead", "mode": "gpu", "elements": n, "checked": checked, **figures,
          "adapter": f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}", **environment()})
    plain.close()
    host.close()
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
