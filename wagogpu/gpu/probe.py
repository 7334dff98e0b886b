"""What an adapter does to long shader loops, measured once per adapter in the process.

Some drivers end long loops silently. llvmpipe (lavapipe's Vulkan and Mesa's GL) gives each group
of SIMD lanes (8 on a 256-bit host) one count of 65,535 loop passes for all the loops of an
invocation, nested or one after another; a loop statement the group reaches with no lane active
still costs one pass. The loop that uses up the count exits as if it had broken, and every loop
after it runs one pass. A kernel whose loop is cut writes a wrong answer and reports no error.

The kernels' own loop budget (the compiler's `fuel`, one per pass through the head of a Wasm loop,
for every loop of an invocation together) must therefore run out first. With ``lanes``
invocations sharing ``cut`` passes, a budget B and a kernel of L WGSL loops (its Wasm loops and
the compiler's block wrappers, loops that never repeat): each invocation makes at most B + 1
passes through Wasm loop heads (the last one raises the error word), so the group makes at most
lanes x (B + 1) passes with a lane active in a Wasm loop; every other pass is a loop statement run
once, a wrapper or a loop reached with no lane active, at most one per loop statement each time
its enclosing loop passes: at most L - 1 per such pass, plus L. So the group makes at most
L x lanes x (B + 1) + L passes, and loop_budget() picks the largest B that keeps this below the
cut, with SAFETY_PASSES in hand. (Wrappers must be counted: lavapipe keeps some of them, such as
an `if` that a branch leaves, and charges them a pass each time.)

Four probes, in one shader and two dispatches (the second only when the first found a cut):

  SINGLE       one invocation counts PROBE_PASSES passes: the cut, if any;
  ACROSS       two loops one after the other, together longer than the cut: a shared count?
  SINGLE_PASS  a loop of almost `cut` passes, each running two loops that never repeat (simple
               block wrappers): does the driver remove them? (Recorded only: it keeps others, so
               the budget counts every wrapper anyway);
  LANES        each of 256 invocations runs an inner loop of cut - LANES_HEADROOM passes at its
               own pass of an outer loop: only the first invocation of each group that shares a
               count finishes its inner loop, so 256 / (invocations that finished) is the group
               size, whatever the order in which the driver groups invocations.

Each loop also advances a linear congruential state that is stored, so no compiler can replace a
loop by its trip count. A probe that fails (a device failure, a timeout) leaves budget 0: loop
kernels then run on the CPU, which is slow but never wrong. A cut beyond PROBE_PASSES passes for
one invocation is not searched for; no driver known has one.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from ..diagnostics import LoopLimits
from .errors import GpuError
from .handles import BufferHandle, ExecutePlan

if TYPE_CHECKING:  # pragma: no cover  (type-only: the device runs the probe on itself (GpuDevice.loop_limits))
    from .device import GpuDevice

__all__ = ["PROBE_PASSES", "SAFETY_PASSES", "Probe", "loop_budget", "measure", "probed_limits"]

#: Passes the SINGLE probe counts to: twice the compiler's default budget (2^20). An adapter that
#: lets one invocation finish them is taken to set no limit (the module docstring says why).
PROBE_PASSES = 1 << 21
#: Passes kept in hand below the computed limit.
SAFETY_PASSES = 1
#: Invocations of the probe's workgroup (the kernels' workgroup size, WORKGROUP_SIZE in abi/kernel.py).
LANES = 256
#: The LANES probe's inner loop is this many passes shorter than the cut: room for the outer loop's
#: 256 passes and as many passes of the inner loop with no lane active.
LANES_HEADROOM = 1024
#: The SINGLE_PASS probe's loop stops this many passes short of the cut; each of the ACROSS probe's
#: two loops runs half of that plus ACROSS_EXTRA, so together they pass the cut.
SHORT_OF_CUT = 64
ACROSS_EXTRA = 48
#: Output words: 8 for the single-invocation probes, one per invocation for LANES.
OUT_WORDS = 8 + LANES
PROBE_TIMEOUT = 10.0


class Probe(enum.IntEnum):
    """The probe a workgroup runs: the dispatch's first mode plus the workgroup's index."""

    SINGLE = 0
    ACROSS = 1
    SINGLE_PASS = 2
    LANES = 3


_STEP = "x = x * 1664525u + 1013904223u;"

WGSL = f"""
struct ProbeParams {{ first: u32, passes: u32, inner: u32, seed: u32 }}
@group(0) @binding(0) var<uniform> p: ProbeParams;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size({LANES})
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{
  let mode = p.first + wg.x;
  var x = p.seed;
  if (mode != {Probe.LANES}u && lane != 0u) {{ return; }}
  if (mode == {Probe.SINGLE}u) {{
    var n = 0u;
    loop {{ n = n + 1u; {_STEP} if (n >= p.passes) {{ break; }} }}
    out[0] = n;
    out[1] = x;
    return;
  }}
  if (mode == {Probe.ACROSS}u) {{
    let half = p.passes / 2u + {ACROSS_EXTRA}u;
    var a = 0u;
    loop {{ a = a + 1u; {_STEP} if (a >= half) {{ break; }} }}
    var b = 0u;
    loop {{ b = b + 1u; {_STEP} if (b >= half) {{ break; }} }}
    out[2] = a;
    out[3] = b;
    out[4] = x;
    return;
  }}
  if (mode == {Probe.SINGLE_PASS}u) {{
    var n = 0u;
    loop {{
      n = n + 1u;
      loop {{ if ((x & 1u) == 0u) {{ x = x ^ n; break; }} {_STEP} break; }}
      loop {{ x = x + n; break; }}
      if (n >= p.passes) {{ break; }}
    }}
    out[5] = n;
    out[6] = x;
    return;
  }}
  var k = 0u;
  var got = 0u;
  loop {{
    if (k == lane) {{
      var j = 0u;
      loop {{ j = j + 1u; {_STEP} if (j >= p.inner) {{ break; }} }}
      got = j;
    }}
    k = k + 1u;
    if (k >= {LANES}u) {{ break; }}
  }}
  out[8u + lane] = got;
  if (x == 0u) {{ out[7] = lane; }}
}}
"""


def loop_budget(limits: LoopLimits, loops: int = 1) -> int | None:
    """Loop-head passes one invocation of a kernel with ``loops`` WGSL loops (wrappers included) may
    make on an adapter with ``limits`` so that no group of invocations reaches its cut (the module
    docstring derives it). None: the adapter sets no limit; 0: none is safe, loop kernels fall back."""
    if limits.error:
        return 0
    if limits.cut is None:
        return None
    if not 1 <= limits.lanes <= LANES:
        return 0
    loops = max(1, loops)
    return max(0, (limits.cut - loops) // (limits.lanes * loops) - 1 - SAFETY_PASSES)


class _Runner:
    """The probe's pipeline and buffers on one device, released by close()."""

    def __init__(self, device: GpuDevice) -> None:
        self.device = device
        self.pipeline = device.pipeline(WGSL, [False])
        self.handles: list[BufferHandle] = []
        self.uniform = self._own(device.create_uniform(16))
        self.out = self._own(device.create_storage(OUT_WORDS * 4))
        self.staging = self._own(device.create_staging(OUT_WORDS * 4))

    def _own(self, handle: BufferHandle) -> BufferHandle:
        self.handles.append(handle)
        return handle

    def run(self, first: Probe, groups: int, target: int, inner: int) -> np.ndarray:
        params = struct.pack("<4I", int(first), target, inner, 0x9E3779B9)
        zeros = np.zeros(OUT_WORDS, dtype=np.uint32)
        self.device.execute(ExecutePlan(pipeline=self.pipeline, uniform=self.uniform, params=params,
                                        storage=[self.out], uploads=[(self.out, 0, zeros)],
                                        workgroups=(groups, 1)), PROBE_TIMEOUT)
        return self.device.read(self.out, self.staging, OUT_WORDS * 4, PROBE_TIMEOUT)

    def close(self) -> None:
        for handle in self.handles:
            self.device.release(handle)
        self.device.release_pipeline(self.pipeline)


def _lanes(finished: int) -> int:
    """Group size from the invocations of the LANES probe that finished their inner loop."""
    return -(-LANES // finished) if finished else LANES + 1


def measure(device: GpuDevice) -> LoopLimits:
    """Run the probes on ``device`` (see the module docstring); never raises for a device failure."""
    t0 = time.perf_counter()
    try:
        runner = _Runner(device)
    except GpuError as exc:
        return _failed(exc, t0)
    try:
        words = runner.run(Probe.SINGLE, 1, PROBE_PASSES, 0)
        cut = int(words[0])
        if cut >= PROBE_PASSES:
            return LoopLimits(None, 1, False, True, None, PROBE_PASSES, time.perf_counter() - t0)
        if cut <= 2 * LANES_HEADROOM:  # too short to measure the rest: assume the worst
            return LoopLimits(cut, LANES + 1, True, False, 0, PROBE_PASSES, time.perf_counter() - t0)
        target, inner = cut - SHORT_OF_CUT, cut - LANES_HEADROOM
        words = runner.run(Probe.ACROSS, 3, target, inner)
        across = int(words[2]) + int(words[3]) < 2 * (target // 2 + ACROSS_EXTRA)
        single_pass_free = int(words[5]) == target
        lanes = _lanes(int(np.count_nonzero(words[8:8 + LANES] == inner)))
    except GpuError as exc:
        return _failed(exc, t0)
    finally:
        runner.close()
    found = LoopLimits(cut, lanes, across, single_pass_free, None, PROBE_PASSES, time.perf_counter() - t0)
    return dataclasses.replace(found, budget=loop_budget(found))


def _failed(exc: Exception, t0: float) -> LoopLimits:
    return LoopLimits(None, 1, False, False, 0, PROBE_PASSES, time.perf_counter() - t0,
                      error=f"loop probe failed: {' '.join(str(exc).split())}")


_measured: dict[tuple[str, ...], LoopLimits] = {}
_lock = threading.Lock()


def probed_limits(device: GpuDevice) -> LoopLimits:
    """``measure(device)``, once per adapter, driver and API in the process (a failed probe is
    not kept: the next device tries again)."""
    info = device.info
    key = (info.name, info.vendor, str(info.backend), info.driver, str(device.api))
    with _lock:
        known = _measured.get(key)
        if known is None:
            known = measure(device)
            if not known.error:
                _measured[key] = known
        return known
