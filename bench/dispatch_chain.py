"""Small dispatches at the device's pace (issue 15): a chain of N resident dispatches with
pipelined off and on, the same chain in plain wgpu-py (waiting on each dispatch, each submitted and
one wait, one submission for the chain) and as plain Wasm, and the checked 1,024-element round trip
with pipelined off and on. One run, side by side, JSONL.

python -m bench.dispatch_chain [--allow-software-adapter] [--steps 1,10,100,1000] [--n 1024]
       [--repeats 7] [--out FILE]

A chain is timed from the first dispatch to the end of the copy-back of its last output (with
pipelined on, that copy-back is where the wait happens); the values are checked after the timer
stopped. Each wagogpu record splits its time into the device layer's native calls, its waits for
the device, the device layer's own Python and the host's Python (the rest), per dispatch.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from bench.common import CallTimer, emit, environment
from bench.chain_guest import kernel_configs as chain_kernels, wat as chain_wat
from bench.buffer_bench import kernel_configs as work_kernels
from bench.work_guest import KERNEL_IDS, input_values, reference, wat as work_wat
from wagogpu import Config, GpuRequiredError, Host

NATIVE = ("encoder", "submit", "fence", "begin_pass", "pass_dispatch", "end_pass", "dispatch", "write_buffer",
          "copy", "map", "unmap")  # (polls are inside the waits)
DEVICE = ("execute", "enqueue", "flush", "submit_pending", "read", "read_mapped", "write", "stage")


class BenchError(RuntimeError):
    pass


class ChainModel:
    """What a chain leaves: a = input + in_a, b = input + in_b; it always starts with b = a + 1."""

    def __init__(self) -> None:
        self.in_a = 0
        self.in_b = 0
        self.last = 0

    def chain(self, steps: int) -> None:
        for i in range(steps):
            if i % 2 == 0:
                self.in_b = self.in_a + 1
            else:
                self.in_a = self.in_b + 1
        self.last = self.in_b if steps % 2 else self.in_a


def timer_targets(host: Host) -> list[tuple[object, str, str]]:
    """Device-layer entry points (label "device"), the backend's native calls ("native") and the
    waits ("wait"); nested labels count in both."""
    dev = host.device
    assert dev is not None
    core = dev._core
    return ([(dev, name, "device") for name in DEVICE] + [(core.backend, name, "native") for name in NATIVE]
            + [(core, "wait", "wait")])


def split(spent: dict[str, float], total: float, calls: int) -> dict[str, float]:
    """Per call, in us: native calls, waits (their polls are native too: counted once, as wait),
    the device layer's Python, the host's Python."""
    wait, native, device = spent["wait"], spent["native"], spent["device"]
    return {"native_us": (native - 0.0) / calls * 1e6, "wait_us": wait / calls * 1e6,
            "device_python_us": max(0.0, device - native - wait) / calls * 1e6,
            "host_python_us": max(0.0, total - device) / calls * 1e6}


def new_host(args: argparse.Namespace, pipelined: bool, kernels: list) -> Host:
    try:
        host = Host(Config(kernels=kernels, pipelined=pipelined, allow_software_adapter=args.allow_software_adapter,
                           require_gpu=not args.allow_software_adapter))
    except GpuRequiredError as exc:
        raise BenchError(f"{exc} (a missing GPU is an error, not a result)") from exc
    if not host.gpu_active:
        raise BenchError(f"no GPU: {host.device_reason}")
    return host


def adapter_name(host: Host) -> str:
    info = host.device.info
    return f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"


def wagogpu_chain(host: Host, n: int, steps_list: list[int], repeats: int) -> list[dict[str, Any]]:
    inst = host.instantiate(host.compile(chain_wat()))
    inst.call("grow_to", 16 * n // 65536 + 2)
    x = (np.arange(n) % 1000).astype(np.float32)
    inst.memory_view().view(np.float32)[:n] = x
    if inst.call("setup", n) != 0:
        raise BenchError("chain setup failed")
    records = []
    model = ChainModel()
    for steps in steps_list:
        def run() -> None:
            if inst.call("chain", n, steps) != 0 or inst.call("finish", n, steps) != 0:
                raise BenchError(f"chain of {steps} did not run on the GPU")
            model.chain(steps)
        run()  # warm: pipelines, scratch, staging
        times, spent = [], []
        with CallTimer(timer_targets(host)) as timer:
            for _ in range(repeats):
                timer.take()
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
                spent.append(timer.take())
        got = inst.memory_view().view(np.float32)[3 * n:4 * n]
        if not np.array_equal(got, x + model.last):
            raise BenchError(f"chain of {steps}: wrong values")
        last = host.buffer_snapshot().last_dispatch
        if last.outcome != "GPU":
            raise BenchError(f"chain of {steps} fell back: {last.reason_code}")
        best = int(np.argmin(times))
        records.append({"steps": steps, "per_dispatch_us": statistics.median(times) / steps * 1e6,
                        "per_dispatch_min_us": min(times) / steps * 1e6, "chain_us": statistics.median(times) * 1e6,
                        "breakdown_per_dispatch_of_fastest": split(spent[best], times[best], steps),
                        "pipelined_record": last.pipelined, "checked": True})
    inst.close()
    return records


def direct_chain(host: Host, n: int, steps_list: list[int], repeats: int) -> list[dict[str, Any]]:
    inst = host.instantiate(host.compile(chain_wat()))
    inst.call("grow_to", 16 * n // 65536 + 2)
    x = (np.arange(n) % 1000).astype(np.float32)
    inst.memory_view().view(np.float32)[:n] = x
    records = []
    for steps in steps_list:
        inst.call("direct", n, steps)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            at = inst.call("direct", n, steps)
            times.append(time.perf_counter() - t0)
        got = inst.memory_view()[at:at + 4 * n].view(np.float32)
        if not np.array_equal(got, x + steps):
            raise BenchError("direct chain: wrong values")
        records.append({"steps": steps, "per_dispatch_us": statistics.median(times) / steps * 1e6,
                        "per_dispatch_min_us": min(times) / steps * 1e6, "checked": True})
    inst.close()
    return records


def round_trip(host: Host, n: int, repeats: int) -> dict[str, Any]:
    """The checked round trip: full set of the input, dispatch of twice, copy-back of the output."""
    k = KERNEL_IDS["twice"]
    inst = host.instantiate(host.compile(work_wat()))
    inst.call("grow_to", 12 * n // 65536 + 2)
    x = input_values(n)
    inst.memory_view().view(np.float32)[:n] = x
    if inst.call("setup", n) != 0:
        raise BenchError("round-trip setup failed")
    for _ in range(5):
        inst.call("sample", k, n)
    times, spent = [], []
    with CallTimer(timer_targets(host)) as timer:
        for _ in range(max(repeats, 50)):
            timer.take()
            t0 = time.perf_counter()
            status = inst.call("sample", k, n)
            times.append(time.perf_counter() - t0)
            spent.append(timer.take())
            if status != 0:
                raise BenchError(f"round trip answered {status}")
    if not np.array_equal(inst.memory_view().view(np.float32)[2 * n:3 * n], reference("twice", x)):
        raise BenchError("round trip: wrong values")
    best = int(np.argmin(times))
    inst.close()
    return {"median_us": statistics.median(times) * 1e6, "min_us": min(times) * 1e6,
            "breakdown_of_fastest": split(spent[best], times[best], 1), "checked": True}


def run_all(args: argparse.Namespace, env: dict[str, Any], publish: Callable[[dict[str, Any]], None]) -> None:
    from bench.plain_chain import plain_chain

    steps_list = [int(s) for s in args.steps.split(",")]
    by_path: dict[str, dict[int, float]] = {}
    adapter = ""
    for pipelined in (False, True):
        host = new_host(args, pipelined, chain_kernels())
        adapter = adapter_name(host)
        try:
            for rec in wagogpu_chain(host, args.n, steps_list, args.repeats):
                by_path.setdefault(f"wagogpu_pipelined_{pipelined}", {})[rec["steps"]] = rec["per_dispatch_us"]
                publish({"bench": "dispatch_chain", "path": "wagogpu", "pipelined": pipelined, "n": args.n,
                         "adapter": adapter, **rec, **env})
            if not pipelined:
                for rec in direct_chain(host, args.n, steps_list, args.repeats):
                    by_path.setdefault("direct_wasm", {})[rec["steps"]] = rec["per_dispatch_us"]
                    publish({"bench": "dispatch_chain", "path": "direct_wasm", "n": args.n, "adapter": "CPU (wasmtime)",
                             **rec, **env})
            host.close()
            host = new_host(args, pipelined, work_kernels())
            publish({"bench": "round_trip", "pipelined": pipelined, "n": args.n, "adapter": adapter,
                     **round_trip(host, args.n, args.repeats), **env})
        finally:
            host.close()
    for rec in plain_chain(adapter, args.n, steps_list, args.repeats, args.allow_software_adapter):
        by_path.setdefault(f"plain_wgpu_{rec['mode']}", {})[rec["steps"]] = rec["per_dispatch_us"]
        publish({"bench": "dispatch_chain", "path": "plain_wgpu", "n": args.n, **rec, **env})
    for steps in steps_list:
        row = {path: figures.get(steps) for path, figures in by_path.items()}
        waited, piped = row.get("wagogpu_pipelined_False"), row.get("wagogpu_pipelined_True")
        publish({"bench": "dispatch_chain_ratios", "steps": steps, "n": args.n, "adapter": adapter,
                 "per_dispatch_us": row, "pipelined_over_waited": piped / waited if piped and waited else None,
                 "pipelined_over_plain_one_submission": (piped / row["plain_wgpu_one_submission"]
                                                         if piped and row.get("plain_wgpu_one_submission") else None),
                 **env})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--steps", default="1,10,100,1000")
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    env = environment()
    out = open(args.out, "a") if args.out else None

    def publish(record: dict[str, Any]) -> None:
        emit(record)
        if out:
            emit(record, out)

    try:
        run_all(args, env, publish)
    except BenchError as exc:
        print(f"dispatch_chain: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
