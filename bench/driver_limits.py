"""Driver limits and what measuring them costs; prints JSONL (issue 16).

    python bench/driver_limits.py [--software] [--backend vulkan|gl] [--cold N] [--straight N ...]
                                  [--grid] [--out FILE]

Records, each naming the adapter:
  probe_cold   in a fresh interpreter: device open, the loop probe (GpuDevice.loop_limits, which
               builds the probe's pipeline and runs one or two dispatches), then the first user
               pipeline after it; and, in another fresh interpreter, the first user pipeline with no
               probe before it. The probe moves the driver's first-compile warm-up, so its net
               cost at open is probe_s + pipeline_after_probe_s - pipeline_without_probe_s.
  probe_warm   measure() again on the same device (the probe's own pipeline cached by the driver).
  limits       what the probe found: cut, lanes, budget for 1..4 loops.
  straight     (--straight N) one invocation running N dependent integer statements: right answer?
               how long did the pipeline take to build? (a silent limit on long code would show here)
  grid         (--grid) a 2-D grid of (65535, 2) workgroups of 256, every invocation writing its
               index: did every one run?
Results are checked outside the timed regions.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OUT: Any = sys.stdout

_COLD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from wagogpu.gpu import GpuDevice
kw, probe = json.loads(sys.argv[2]), sys.argv[3] == "1"
t0 = time.perf_counter()
dev = GpuDevice.open(**kw)
t1 = time.perf_counter()
limits = dev.loop_limits if probe else None
t2 = time.perf_counter()
wgsl = ("struct P { n: u32, a: u32, b: u32, c: u32 }\\n@group(0) @binding(0) var<uniform> p: P;\\n"
        "@group(0) @binding(1) var<storage, read_write> o: array<u32>;\\n@compute @workgroup_size(256)\\n"
        "fn main(@builtin(global_invocation_id) id: vec3<u32>) { if (id.x < p.n) { o[id.x] = o[id.x] * 2u; } }\\n")
dev.pipeline(wgsl, [False])
t3 = time.perf_counter()
print(json.dumps({"adapter": dev.info.name, "backend": dev.info.backend, "software": dev.info.is_software,
                  "open_s": t1 - t0, "probe_s": t2 - t1 if probe else None, "pipeline_s": t3 - t2,
                  "probe_seconds_reported": limits.seconds if limits else None}))
dev.close()
"""


def emit(rec: dict[str, Any]) -> None:
    OUT.write(json.dumps(rec) + "\n")
    OUT.flush()


def cold(kw: dict[str, Any], repeat: int) -> None:
    for i in range(repeat):
        runs = {}
        for probe in ("1", "0"):
            out = subprocess.run([sys.executable, "-c", _COLD, ROOT, json.dumps(kw), probe], check=True,
                                 capture_output=True, text=True).stdout
            runs[probe] = json.loads(out.strip().splitlines()[-1])
        with_probe, without = runs["1"], runs["0"]
        emit({"record": "probe_cold", "run": i, "adapter": with_probe["adapter"], "backend": with_probe["backend"],
              "software": with_probe["software"], "open_s": with_probe["open_s"], "probe_s": with_probe["probe_s"],
              "pipeline_after_probe_s": with_probe["pipeline_s"], "pipeline_without_probe_s": without["pipeline_s"],
              "net_probe_s": with_probe["probe_s"] + with_probe["pipeline_s"] - without["pipeline_s"]})


def _base(dev: Any) -> dict[str, Any]:
    return {"adapter": dev.info.name, "backend": dev.info.backend, "driver": dev.info.driver,
            "software": dev.info.is_software}


def warm_and_limits(dev: Any) -> None:
    from dataclasses import asdict

    from wagogpu.gpu.probe import loop_budget, measure

    limits = dev.loop_limits
    t0 = time.perf_counter()
    again = measure(dev)
    same = (again.cut, again.lanes, again.budget) == (limits.cut, limits.lanes, limits.budget)
    emit({"record": "probe_warm", **_base(dev), "probe_s": time.perf_counter() - t0, "same": same})
    emit({"record": "limits", **_base(dev), **asdict(limits),
          "budget_by_loops": {n: loop_budget(limits, n) for n in (1, 2, 3, 4)}})


def _one_shot(dev: Any, wgsl: str, params: tuple[int, int, int, int], words: int, groups: tuple[int, int]
              ) -> tuple[np.ndarray, float]:
    """Build `wgsl` (timed), run it once over a zeroed buffer of `words` words, read the buffer."""
    from wagogpu.gpu import ExecutePlan

    t0 = time.perf_counter()
    pipeline = dev.pipeline(wgsl, [False])
    built = time.perf_counter() - t0
    uniform, out, staging = dev.create_uniform(16), dev.create_storage(words * 4), dev.create_staging(words * 4)
    try:
        dev.execute(ExecutePlan(pipeline=pipeline, uniform=uniform, params=struct.pack("<4I", *params),
                                storage=[out], uploads=[(out, 0, np.zeros(words, np.uint32))], workgroups=groups), 600)
        return dev.read(out, staging, words * 4, 600), built
    finally:
        for h in (uniform, out, staging):
            dev.release(h)
        dev.release_pipeline(pipeline)


_HEAD = ("struct P { n: u32, a: u32, b: u32, c: u32 }\n@group(0) @binding(0) var<uniform> p: P;\n"
         "@group(0) @binding(1) var<storage, read_write> o: array<u32>;\n")


def straight(dev: Any, n: int) -> None:
    body = "".join(f"  x = x * {3 + 2 * (k % 5)}u + {k}u;\n" for k in range(n))
    wgsl = _HEAD + "@compute @workgroup_size(1)\nfn main() {\n  var x = p.n;\n" + body + "  o[0] = x;\n}\n"
    want = 12345
    for k in range(n):
        want = (want * (3 + 2 * (k % 5)) + k) & 0xFFFFFFFF
    words, built = _one_shot(dev, wgsl, (12345, 0, 0, 0), 1, (1, 1))
    emit({"record": "straight", **_base(dev), "statements": n, "right": int(words[0]) == want, "pipeline_s": built})


def grid(dev: Any) -> None:
    from wagogpu.abi.kernel import ROW_INVOCATIONS, workgroup_grid

    count = ROW_INVOCATIONS + 5000
    wgsl = _HEAD + (f"@compute @workgroup_size(256)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n"
                    f"  let i = id.x + id.y * {ROW_INVOCATIONS}u;\n  if (i < p.n) {{ o[i] = i + 1u; }}\n}}\n")
    groups = workgroup_grid(count)
    t0 = time.perf_counter()
    words, _ = _one_shot(dev, wgsl, (count, 0, 0, 0), count, groups)
    emit({"record": "grid", **_base(dev), "count": count, "workgroups": groups, "seconds": time.perf_counter() - t0,
          "all_ran": bool(np.array_equal(words, np.arange(1, count + 1, dtype=np.uint32)))})


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--software", action="store_true", help="allow a software adapter (lavapipe)")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--cold", type=int, default=3, help="fresh-interpreter repetitions (0: none)")
    ap.add_argument("--straight", type=int, nargs="*", default=[], help="straight-line statement counts")
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.out:
        OUT = open(args.out, "a")
    kw = {"allow_software_adapter": args.software, "backend": args.backend}
    cold(kw, args.cold)
    from wagogpu.gpu import GpuDevice

    with GpuDevice.open(**kw) as dev:
        warm_and_limits(dev)
        for n in args.straight:
            straight(dev, n)
        if args.grid:
            grid(dev)


if __name__ == "__main__":
    main()
