"""Shared helpers of the GPU backend tests: WGSL kernels of the compiler's shape (docs/design/abi.md §6.5)."""

from __future__ import annotations

import numpy as np

from wagogpu.compiler import parameter_block as params, workgroup_grid as grid  # noqa: F401 (re-exported)


def words(values: list[int] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32)


_HEAD = """
struct Params { count: u32, p1: u32, p2: u32, p3: u32 }
@group(0) @binding(0) var<uniform> params: Params;
"""

#: dst[i] = src[i] * 2 (the compiler's shape, docs/design/abi.md §6.5, with the 2-D index).
WGSL_X2 = _HEAD + """
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x + id.y * 65535u * 256u;
  if (index >= params.count) { return; }
  dst[index] = src[index] * 2u;
}
"""

#: o[i] = o[i] + 1: reads its output before writing it (needs a full seed).
WGSL_INC = _HEAD + """
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x + id.y * 65535u * 256u;
  if (index >= params.count) { return; }
  o[index] = o[index] + 1u;
}
"""

#: dst[i] = i + 1 over a 2-D grid: index = id.x + id.y * 65535 * 256.
WGSL_INDEX_2D = _HEAD + """
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x + id.y * 65535u * 256u;
  if (index >= params.count) { return; }
  dst[index] = index + 1u;
}
"""

#: A deliberately slow kernel: p1 rounds of an LCG per element.
WGSL_SLOW = _HEAD + """
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let index = id.x;
  if (index >= params.count) { return; }
  var x = dst[index];
  for (var k = 0u; k < params.p1; k = k + 1u) { x = x * 1664525u + 1013904223u; }
  dst[index] = x;
}
"""
