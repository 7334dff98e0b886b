"""Start-up, each figure in a fresh interpreter: `import wagogpu`, the first Host() (engine,
accessor module, device open), compiling the work guest (its pipelines), and the first dispatch
after compile, split into its parts (buffers, bind group, uniform, error word, staging, the
submission and wait that include the driver's first use of the pipeline). JSONL. Beside it, the
floor: plain wgpu-py importing, requesting an adapter and a device in a fresh interpreter.

python -m bench.startup [--allow-software-adapter] [--runs 3] [--pipelined] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from bench.common import emit, environment

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One child: every phase timed in order; the first dispatch's parts by wrapping the device's calls.
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import wagogpu
t_import = time.perf_counter() - t0
sys.path.insert(0, sys.argv[1])
opts = json.loads(sys.argv[2])
import numpy as np
from bench.buffer_bench import kernel_configs
from bench.common import CallTimer
from bench.work_guest import KERNEL_IDS, input_values, reference, wat
from wagogpu import Config, Host
config = Config(kernels=kernel_configs(), allow_software_adapter=opts["software"],
                require_gpu=not opts["software"], pipelined=opts["pipelined"])
t0 = time.perf_counter()
import wagogpu.gpu._native as native_api, wagogpu.gpu.device as device_module
t_gpu_import = time.perf_counter() - t0
# The device open's parts: the adapter list, the device request (with the adapter's own limits).
open_timer = CallTimer([(native_api, "enumerate_adapters", "enumerate_adapters"),
                        (native_api, "open_backend", "request_device")])
with open_timer:
    host = Host(config)
t_host = time.perf_counter() - t0
if not host.gpu_active:
    print(json.dumps({"error": host.device_reason})); sys.exit(1)
src = wat()
t0 = time.perf_counter()
module = host.compile(src)
t_compile = time.perf_counter() - t0
t0 = time.perf_counter()
inst = host.instantiate(module)
n = 1024
inst.call("grow_to", 2)
x = input_values(n)
inst.memory_view().view(np.float32)[:n] = x
assert inst.call("setup", n) == 0
t_instantiate = time.perf_counter() - t0
dev = host.device
backend = dev._core.backend
targets = [(dev, name, name) for name in ("create_storage", "create_uniform", "create_staging", "execute",
                                          "enqueue", "flush", "read")]
targets += [(dev._pipelines, "bind_group", "bind_group"), (backend, "create_bind_group", "native_bind_group"),
            (backend, "submit", "native_submit"), (dev._core, "wait", "wait")]
k = KERNEL_IDS["twice"]
with CallTimer(targets) as timer:
    t0 = time.perf_counter()
    status = inst.call("sample", k, n)
    t_first = time.perf_counter() - t0
    parts = timer.take()
    t0 = time.perf_counter()
    inst.call("sample", k, n)
    t_second = time.perf_counter() - t0
ok = status == 0 and np.array_equal(inst.memory_view().view(np.float32)[2 * n:3 * n], reference("twice", x))
snap = host.buffer_snapshot()
info = dev.info
print(json.dumps({"import_s": t_import, "first_host_s": t_host, "device_open_s": host.device_init,
                  "gpu_stack_import_s": t_gpu_import, "device_open_parts_s": open_timer.take(),
                  "compile_s": t_compile, "pipeline_s": sum(d.pipeline for d in snap.kernels),
                  "instantiate_s": t_instantiate, "first_round_trip_s": t_first, "second_round_trip_s": t_second,
                  "first_round_trip_parts_s": {k2: v for k2, v in parts.items() if v},
                  "checked": bool(ok), "adapter": f"{info.name}; {info.driver}; {info.adapter_type}; {info.backend}"}))
host.close()
"""


# The floor under the first Host(): plain wgpu-py opening a device on the same machine.
_PLAIN_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import wgpu
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
t_adapter = time.perf_counter() - t0
t0 = time.perf_counter()
device = adapter.request_device_sync(required_limits=dict(adapter.limits))
t_device = time.perf_counter() - t0
info = adapter.info
print(json.dumps({"import_wgpu_s": t_import, "request_adapter_s": t_adapter, "request_device_s": t_device,
                  "plain_open_s": t_import + t_adapter + t_device,
                  "adapter": f"{info['device']}; {info['description']}; {info['adapter_type']}; {info['backend_type']}"}))
"""


def fresh_interpreter(code: str, *argv: str, what: str) -> dict[str, Any]:
    """Run `code` in a fresh interpreter and return the last JSON line it printed."""
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=HERE, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{what} child failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def plain_child() -> dict[str, Any]:
    """One fresh interpreter opening a device with nothing but wgpu-py (request_adapter_sync picks
    its own adapter: on a machine whose only adapter is software that is the one timed)."""
    return fresh_interpreter(_PLAIN_CHILD, what="plain wgpu")


def child(args: argparse.Namespace) -> dict[str, Any]:
    opts = json.dumps({"software": args.allow_software_adapter, "pipelined": args.pipelined})
    result = fresh_interpreter(_CHILD, HERE, opts, what="start-up")
    if "error" in result or not result["checked"]:
        raise RuntimeError(f"start-up child: {result.get('error', 'wrong values')}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-software-adapter", action="store_true")
    parser.add_argument("--pipelined", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    env = environment()
    runs = [child(args) for _ in range(args.runs)]
    plain = [plain_child() for _ in range(args.runs)]
    out = open(args.out, "a") if args.out else None

    def publish(record: dict[str, Any]) -> None:
        emit(record)
        if out:
            emit(record, out)

    try:
        for i, run in enumerate(runs):
            publish({"bench": "startup", "run": i, "pipelined": args.pipelined, **run, **env})
        keys = [k for k, v in runs[0].items() if isinstance(v, float)]
        summary = {"bench": "startup_median", "runs": len(runs), "pipelined": args.pipelined,
                   "adapter": runs[0]["adapter"], **{k: statistics.median(r[k] for r in runs) for k in keys}, **env}
        publish(summary)
        for i, run in enumerate(plain):
            publish({"bench": "startup_plain_wgpu", "run": i, **run, **env})
        floor = {"bench": "startup_floor", "runs": len(runs), "pipelined": args.pipelined,
                 "first_host_s": summary["first_host_s"], "adapter": runs[0]["adapter"],
                 **{k: statistics.median(r[k] for r in plain) for k in plain[0] if k.endswith("_s")},
                 "plain_adapter": plain[0]["adapter"], **env}
        floor["first_host_over_plain_open"] = floor["first_host_s"] / floor["plain_open_s"]
        publish(floor)
    finally:
        if out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
