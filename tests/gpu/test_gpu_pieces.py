"""Readbacks through a staging made of pieces: each piece its own submission and map, read out in
order as it maps; the layout, the words, what a PieceSink hears, and what a failure leaves."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np
import pytest

from wagogpu.gpu import DeviceFailure, FaultInjector
from wagogpu.gpu.resources import piece_ranges

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)


class Recorder:
    """A PieceSink that copies each piece it hears of and notes the calls."""

    def __init__(self, nbytes: int) -> None:
        self.out = np.zeros(nbytes, np.uint8)
        self.calls: list[tuple] = []

    def submitted(self, pieces: Sequence[tuple[int, int]]) -> None:
        self.calls.append(("submitted", tuple(pieces)))

    def piece(self, offset: int, address: int, nbytes: int, final: bool) -> None:
        ctypes.memmove(self.out.ctypes.data + offset, address, nbytes)
        self.calls.append(("piece", offset, nbytes, final))


@pytest.mark.parametrize("nbytes, pieces, least, want", [
    (4, 4, 4, [(0, 4)]),
    (12308, 3, 4096, [(0, 4352), (4352, 4352), (8704, 3604)]),
    (12288, 3, 4096, [(0, 4096), (4096, 4096), (8192, 4096)]),
    (12284, 3, 4096, [(0, 6144), (6144, 6140)]),  # three would make one under the least size
    (8188, 3, 4096, [(0, 8188)]),  # two pieces would be under the least size: one piece
    (40_000_000, 4, 2 << 20, [(0, 10_000_128), (10_000_128, 10_000_128), (20_000_256, 10_000_128),
                              (30_000_384, 9_999_616)]),
])
def test_piece_ranges(nbytes: int, pieces: int, least: int, want: list[tuple[int, int]]) -> None:
    got = piece_ranges(nbytes, pieces, least)
    assert got == want and sum(n for _, n in got) == nbytes
    assert all(off % 256 == 0 for off, _ in got)


@pytest.mark.parametrize("nbytes", [4, 4092, 4096, 4100, 12308, 16384])
def test_reads_through_a_pieced_staging_match_the_source(make_device, nbytes: int) -> None:
    dev = make_device(None)
    words = np.arange(nbytes // 4, dtype=np.uint32) * 2654435761
    src = dev.create_storage(nbytes)
    dev.write(src, 0, words)
    st = dev.create_staging(nbytes, pieces=3, piece_min=4096)
    layout = piece_ranges(nbytes, 3, 4096)
    assert [(off, n) for off, n, _ in st.pieces] == layout
    assert np.array_equal(dev.read(src, st, nbytes, 10.0), words)
    sink = Recorder(nbytes)
    address = dev.read_mapped(src, st, nbytes, 10.0, sink)
    assert address == st.mapped == st.segments[0][1]
    assert [(off, n) for off, _, n in st.segments] == layout
    assert sink.calls[0] == ("submitted", tuple(layout))
    assert [c[1:3] for c in sink.calls[1:]] == layout and sink.calls[-1][3] is True
    assert np.array_equal(sink.out.view(np.uint32), words)
    for off, addr, n in st.segments:
        got = np.frombuffer((ctypes.c_uint8 * n).from_address(addr), np.uint8)
        assert np.array_equal(got, words.view(np.uint8)[off:off + n])
    # A part of the source: the pieces past it are not copied, nor mapped, nor unmapped after.
    assert np.array_equal(dev.read(src, st, 4, 10.0), words[:1]) and st.mapped == 0
    dev.read_mapped(src, st, 4, 10.0)
    assert len(st.segments) == 1 and st.segments[0][2] == 4
    assert np.array_equal(dev.read(src, st, nbytes, 10.0), words)  # (unmaps the one piece first)
    dev.read_mapped(src, st, 4, 10.0)
    dev.release(st)
    assert st.released and st.segments == () and not dev._core.flags.errors


def test_a_released_pieced_staging_pools_every_piece(make_device) -> None:
    dev = make_device(None)
    src = dev.create_storage(12308)
    st = dev.create_staging(12308, pieces=3, piece_min=4096)
    natives = [native.obj for _, _, native in st.pieces]
    dev.read_mapped(src, st, 12308, 10.0)
    allocations = dev.stats.allocations_total
    dev.release(st)  # released while mapped: every piece unmapped and kept
    again = dev.create_staging(12308, pieces=3, piece_min=4096)
    assert sorted(map(id, (n.obj for _, _, n in again.pieces))) == sorted(map(id, natives))
    assert dev.stats.allocations_total == allocations
    assert np.array_equal(dev.read(src, again, 12308, 10.0), np.zeros(3077, np.uint32))


@pytest.mark.parametrize("failing", [1, 2, 3])
def test_a_map_failure_in_piece_k_comes_after_pieces_before_k_and_unmaps_all(make_device, failing: int) -> None:
    dev = make_device(FaultInjector(fail={"map": failing}))
    src = dev.create_storage(12308)
    dev.write(src, 0, np.arange(3077, dtype=np.uint32))
    st = dev.create_staging(12308, pieces=3, piece_min=4096)
    sink = Recorder(12308)
    with pytest.raises(DeviceFailure) as err:
        dev.read_mapped(src, st, 12308, 10.0, sink)
    assert err.value.stage == "map" and st.mapped == 0 and st.segments == ()
    # Under fault injection every piece waits its turn: the pieces before the failing one went out,
    # none of them final.
    assert [c[0] for c in sink.calls] == ["submitted"] + ["piece"] * (failing - 1)
    assert all(c[3] is False for c in sink.calls[1:])
    dev._faults = None
    assert np.array_equal(dev.read(src, st, 12308, 10.0), np.arange(3077, dtype=np.uint32))  # usable again
