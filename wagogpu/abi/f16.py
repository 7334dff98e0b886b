"""binary16 <-> f32 bit conversions with the ABI's rules.

numpy's float16 casts differ from the ABI (NaN payloads and signs are kept there; the ABI maps every
NaN to one canonical pattern), so the rules are written out here, vectorised over uint arrays.
"""
from __future__ import annotations

import numpy as np

F32_QUIET_NAN = 0x7FC00000
F16_QUIET_NAN = 0x7E00


def half_to_f32_bits(h: np.ndarray | int) -> np.ndarray | int:
    """binary16 bits -> f32 bits; every NaN becomes +quiet NaN, subnormals normalise exactly."""
    scalar = np.isscalar(h)
    h = np.asarray(h, dtype=np.uint32) & 0xFFFF
    s = (h & 0x8000) << 16
    e = (h >> 10) & 31
    m = h & 0x3FF
    normal = s | ((e + 112) << 23) | (m << 13)
    # Subnormal: value m * 2^-24 is exact in f32; let float32 arithmetic normalise it.
    sub = s | (m.astype(np.float32) * np.float32(2.0**-24)).view(np.uint32)
    out = np.where(e == 0, sub, normal)
    out = np.where(e == 31, np.where(m != 0, np.uint32(F32_QUIET_NAN), s | 0x7F800000), out)
    out = out.astype(np.uint32)
    return int(out) if scalar else out


def f32_bits_to_half(x: np.ndarray | int) -> np.ndarray | int:
    """f32 bits -> binary16 bits, round to nearest even; every NaN becomes 0x7E00 (sign dropped)."""
    scalar = np.isscalar(x)
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    s = (x >> 16) & 0x8000
    e = (x >> 23) & 255
    m = x & 0x7FFFFF
    # Normal half range (a rounding carry may step into infinity, which is right).
    v = ((e - 112) << 10) | (m >> 13)
    r = m & 0x1FFF
    v = v + ((r > 0x1000) | ((r == 0x1000) & ((v & 1) == 1)))
    # Half subnormal range, e in [102, 113).
    k = np.clip(126 - e, 1, 62)
    mf = m | 0x800000
    sv = mf >> k
    sr = mf & ((1 << k) - 1)
    half = 1 << (k - 1)
    sv = sv + ((sr > half) | ((sr == half) & ((sv & 1) == 1)))
    out = np.where(e < 113, sv, v)
    out = np.where(e < 102, 0, out)
    out = np.where(e > 142, 0x7C00, out) | s
    out = np.where(e == 255, np.where(m != 0, F16_QUIET_NAN, s | 0x7C00), out).astype(np.uint16)
    return int(out) if scalar else out
