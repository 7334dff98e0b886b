"""The host copy helpers: every byte lands once, at the right place, whatever the split."""
import numpy as np
import pytest

from wagogpu import memcopy


def _arrays(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    src = rng.integers(0, 256, n + 64, dtype=np.uint8)
    return src, np.zeros(n + 64, np.uint8), np.zeros(n + 64, np.uint8)


@pytest.mark.parametrize("n", [1, 4095, 1 << 20, (9 << 20) + 12])
@pytest.mark.parametrize("threads", [1, 3, 8])
def test_copy_bytes_copies_exactly_the_range(n: int, threads: int) -> None:
    src, dst, _ = _arrays(n)
    memcopy.copy_bytes(dst.ctypes.data + 16, src.ctypes.data + 8, n, threads)
    assert np.array_equal(dst[16:16 + n], src[8:8 + n])
    assert not dst[:16].any() and not dst[16 + n:].any()


def test_copy_many_runs_each_job() -> None:
    n = (6 << 20) + 8
    src, a, b = _arrays(n)
    memcopy.copy_many([(a.ctypes.data, src.ctypes.data, n, 8), (b.ctypes.data, src.ctypes.data + 8, 100, 8),
                       (b.ctypes.data + 200, src.ctypes.data, 0, 8)])
    assert np.array_equal(a[:n], src[:n]) and np.array_equal(b[:100], src[8:108]) and not b[100:].any()
