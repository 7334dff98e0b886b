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


def test_large_copies_from_several_threads_at_once_each_land_whole() -> None:
    """The helper threads serve one copy at a time; callers on other threads wait their turn."""
    import threading
    n = (5 << 20) + 4
    copies = [_arrays(n + k) for k in range(4)]
    errors: list[BaseException] = []

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        try:
            for _ in range(5):
                memcopy.copy_bytes(dst.ctypes.data, src.ctypes.data, src.size, 8)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(src, dst)) for src, dst, _ in copies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)
    assert all(np.array_equal(dst, src) for src, dst, _ in copies)


def _child_copy(queue) -> None:  # pragma: no cover - runs in the forked child
    src, dst, _ = _arrays(6 << 20)
    memcopy.copy_bytes(dst.ctypes.data, src.ctypes.data, src.size, 8)
    queue.put(bool(np.array_equal(dst, src)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # (the point of the test)
def test_a_forked_child_copies_with_helpers_of_its_own() -> None:
    """The parent's helper threads do not exist in a forked child: it must not wait on them."""
    import multiprocessing
    src, dst, _ = _arrays(6 << 20)
    memcopy.copy_bytes(dst.ctypes.data, src.ctypes.data, src.size, 8)  # the parent's helpers started
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_copy, args=(queue,))
    child.start()
    child.join(30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0 and queue.get(timeout=5) is True


def test_a_copy_whose_helpers_cannot_start_is_done_by_the_caller(monkeypatch) -> None:
    """Where the system refuses a new thread, the pieces no helper took are copied on the caller's."""
    import threading
    crew = memcopy._Crew()
    started = 0
    real_start = threading.Thread.start

    def start(self) -> None:
        nonlocal started
        if started >= 1:
            raise RuntimeError("can't start new thread")
        started += 1
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    n = 8 << 20
    src, dst, _ = _arrays(n)
    crew.copy([(dst.ctypes.data + k * (1 << 20), src.ctypes.data + k * (1 << 20), 1 << 20) for k in range(8)])
    assert len(crew.go) == 1 and np.array_equal(dst[:n], src[:n]) and not dst[n:].any()
