"""Copy-backs through a pieced readback staging (TransferTuning.readback_pieces): the guest gets
each piece as it maps, the same bytes, statuses and counters as with one piece, at every range
around the piece boundaries and for narrow element types; a failure in a later piece publishes
nothing (the pieces already copied are put back); and the knobs are checked."""
from __future__ import annotations

import time

import numpy as np
import pytest

from wagogpu import Access, ElementType, Status
from wagogpu.buffers import TransferTuning
from wagogpu.diagnostics import BufferOperation
from wagogpu.errors import ConfigError
from wagogpu.gpu import FaultInjector
from wagogpu.gpu.resources import piece_ranges

from ..conftest import kernel
from ..gpu_support import Guest, gpu_host
from ..guests import runner_kernel

pytestmark = pytest.mark.gpu  # every test here runs work on a GPU adapter (lavapipe in CI)

F32 = ElementType.F32
TWICE = "(f32.mul $x (f32.const 2))"
PIECES, LEAST = 3, 4096
GUEST_OUT = 32768  # where copy-backs land in guest memory; sentinel bytes around them
SENTINEL = 0xA5

#: The parked path from 4 KiB and readbacks in up to three pieces of at least 4 KiB.
PIECED = TransferTuning(prestage_min_bytes=4096, park_min_bytes=4096, readahead=False,
                        readback_pieces=PIECES, readback_piece_min_bytes=LEAST)
#: The same with one piece: the reference for answers and counters.
WHOLE = TransferTuning(prestage_min_bytes=4096, park_min_bytes=4096, readahead=False, readback_pieces=1)


def twice_guest(tuning: TransferTuning) -> Guest:
    return Guest(gpu_host(kernels=[kernel(1, "double")], tuning=tuning), kernels=runner_kernel("double", 0, 1, TWICE))


def values(n: int, i: int) -> np.ndarray:
    return (np.arange(n) % 1013 + i).astype(np.float32)


def sentinel(g: Guest, nbytes: int) -> None:
    g.inst.write_memory(GUEST_OUT - 64, bytes([SENTINEL]) * (nbytes + 128))


def copy_back(g: Guest, b: int, offset: int, count: int) -> tuple[int, bytes]:
    """(status, the guest bytes from 64 before to 64 after the destination)."""
    status = g.inst.call("copyBuffer32", b, offset, 0, GUEST_OUT, count)
    return status, g.inst.read_memory(GUEST_OUT - 64, 4 * count + 128)


def expected(want: np.ndarray, offset: int, count: int) -> bytes:
    pad = bytes([SENTINEL]) * 64
    return pad + want[offset:offset + count].tobytes() + pad


def ranges_around_pieces(n: int) -> list[tuple[int, int]]:
    """Copy-back ranges (element offset, count): whole, ends, and 1 / piece-1 / piece / piece+1
    elements at and across every piece boundary."""
    out = {(0, n), (0, 1), (n - 1, 1)}
    for off, size in piece_ranges(4 * n, PIECES, LEAST):
        e, per = off // 4, size // 4
        for start, count in ((e, 1), (e, per - 1), (e, per), (e, per + 1), (max(0, e - 1), 2), (0, e + 1)):
            if 0 <= start and count > 0 and start + count <= n:
                out.add((start, count))
    return sorted(out)


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 3077, 4099])
def test_copy_backs_around_piece_boundaries(n: int) -> None:
    g = twice_guest(PIECED)
    ref = twice_guest(WHOLE)
    pieces = piece_ranges(4 * n, PIECES, LEAST)
    for i, (offset, count) in enumerate(ranges_around_pieces(n)):
        want = 2 * values(n, i)
        answers = []
        for guest in (g, ref):
            if i == 0:
                guest.a, guest.b = guest.create(F32, n), guest.create(F32, n)
                guest.bind(guest.a, guest.b)
            assert guest.set_f32(guest.a, values(n, i)) == 0 and guest.dispatch(1, n) == 0
            sentinel(guest, 4 * count)
            status, seen = copy_back(guest, guest.b, offset, count)  # the readback, published piece by piece
            assert status == 0 and seen == expected(want, offset, count), (offset, count)
            answers.append((guest.last.download_count, guest.last.gpu_download_bytes, guest.state(guest.b)))
            # A second copy-back of the same version comes from the parking (its segments).
            sentinel(guest, 4 * count)
            assert copy_back(guest, guest.b, offset, count) == (0, expected(want, offset, count))
            assert guest.last.download_count == 0
        assert answers[0] == answers[1]
    parked = g.buf(g.b).parked  # (below park_min_bytes: read back into the CPU copy instead)
    staging = parked[0] if parked is not None else g.inst.buffers.device.staging[0]
    assert [(o, s) for o, s, _ in staging.pieces] == pieces and (parked is not None) == (4 * n >= 4096)
    assert ref.host.context.residency.backup.nbytes == 0  # one piece is final when it maps: nothing kept
    g.host.close()
    ref.host.close()


@pytest.mark.parametrize("etype", [ElementType.I8, ElementType.U16, ElementType.F16, ElementType.U32,
                                   ElementType.I64])
def test_narrow_and_wide_types_read_back_in_pieces(etype: ElementType) -> None:
    """Non-word types read back into the CPU copy (their pieces copied out, then converted); words
    types are parked; odd counts and offsets at every width."""
    name = etype.name
    k = kernel(1, "copy", bindings=[(0, etype, Access.READ), (1, etype, Access.WRITE)], relaxed_float=True)
    body = (f"(call $writeBuffer{name} (call $getBuffer (i32.const 1)) (local.get 0)"
            f" (call $readBuffer{name} (call $getBuffer (i32.const 0)) (local.get 0)))")
    extra = (f'(func (export "wago_gpu.kernel.copy") (param i32) {body})'
             '(func (export "wago_gpu.cpu.copy") (param i32))')
    width = {ElementType.I8: 1, ElementType.U16: 2, ElementType.F16: 2, ElementType.U32: 4, ElementType.I64: 8}[etype]
    n = 3 * LEAST // 4 + 7  # a device copy of three pieces or more (one word or two per element)
    rng = np.random.default_rng(int(etype))
    raw = rng.integers(0, 256, n * width, dtype=np.uint8)
    if etype == ElementType.F16:  # finite halves only (a NaN's payload is not promised)
        halves = raw.view(np.uint16) & np.uint16(0x3FFF)
        raw = halves.view(np.uint8)
    for tuning in (PIECED, WHOLE):
        g = Guest(gpu_host(kernels=[k], tuning=tuning), extra=extra)
        a, b = g.create(etype, n), g.create(etype, n)
        assert g.set_raw(a, raw.tobytes(), n) == 0
        g.bind(a, b)
        assert g.dispatch(1, n) == 0
        stride = g.buf(b).gpu_stride
        edge = piece_ranges(n * stride, PIECES, LEAST)[1][0] // stride  # the first element of piece 2
        for offset, count in ((0, n), (5, n - 9), (n - 1, 1), (edge - 1, 3), (edge, n - edge)):
            assert g.dispatch(1, n) == 0  # a new version: the copy-back reads it back again
            status = g.inst.call("copyBuffer32", b, offset, 0, 4096, count)
            assert status == 0 and g.last.download_count == 1
            assert g.inst.read_memory(4096, count * width) == raw[offset * width:(offset + count) * width].tobytes()
        buf = g.buf(b)
        staging = buf.parked[0] if buf.parked is not None else g.inst.buffers.device.staging[0]
        assert (buf.parked is not None) == buf.raw  # word types parked, the narrow ones read into the CPU copy
        want = piece_ranges(buf.gpu_bytes, PIECES, LEAST) if tuning is PIECED else [(0, buf.gpu_bytes)]
        assert [(o, s) for o, s, _ in staging.pieces] == want and len(want) == (3 if tuning is PIECED else 1)
        g.host.close()


def failing_copy_back(tuning: TransferTuning, fail: dict) -> tuple[int, bytes, str, bytes]:
    """A fresh round trip whose copy-back's readback fails as ``fail`` says; (status, guest bytes
    around the destination, device state, the buffer's contents read afterwards)."""
    n = 3077
    g = twice_guest(tuning)
    a, b = g.create(F32, n), g.create(F32, n)
    g.bind(a, b)
    assert g.set_f32(a, values(n, 1)) == 0 and g.dispatch(1, n) == 0
    sentinel(g, 4 * n)
    g.host.device._faults = FaultInjector(fail=fail)
    status, seen = copy_back(g, b, 0, n)
    g.host.device._faults = None
    state = g.host.buffer_snapshot().device_state
    after = g.inst.call("copyBuffer32", b, 0, 0, 4096, n)
    contents = g.inst.read_memory(4096, 4 * n) if after == 0 else b""
    g.host.close()
    return status, seen, state, contents


@pytest.mark.parametrize("failing_piece", [2, 3])
def test_a_failure_in_a_later_piece_publishes_nothing(failing_piece: int) -> None:
    """Pieces 1..k-1 were copied into guest memory when piece k's map fails: they are put back, and
    the answer is the one-piece path's for a failed map."""
    status, seen, state, contents = failing_copy_back(PIECED, {"map": failing_piece})
    assert status == Status.DEVICE_ERROR and seen == bytes([SENTINEL]) * (4 * 3077 + 128)
    assert (status, seen, state, contents) == failing_copy_back(WHOLE, {"map": 1})


def test_a_failure_before_any_piece_publishes_nothing() -> None:
    for fail in ({"map": 1}, {"lost": 1}, {"timeout": 1}):
        got = failing_copy_back(PIECED, fail)
        assert got[1] == bytes([SENTINEL]) * (4 * 3077 + 128)
        assert got == failing_copy_back(WHOLE, fail), fail


@pytest.mark.parametrize("pieces_in_turn", [False, True])
def test_a_readback_complete_past_the_deadline_publishes_nothing(pieces_in_turn: bool) -> None:
    """Cancelled where the one-piece copy-back checks (the readback done): pieces already published
    (in turn: with a fault injector that fails nothing, every piece waits for its own map) are put back."""
    g = twice_guest(PIECED)
    n = 3077
    a, b = g.create(F32, n), g.create(F32, n)
    g.bind(a, b)
    assert g.set_f32(a, values(n, 1)) == 0 and g.dispatch(1, n) == 0
    sentinel(g, 4 * n)
    res = g.host.context.residency
    if pieces_in_turn:
        g.host.device._faults = FaultInjector()
    guest_address = int(g.inst.memory_view()[GUEST_OUT:].ctypes.data)
    op = BufferOperation()
    status = res.copy_back(g.inst.buffers, g.buf(b), guest_address, 0, 4 * n, time.perf_counter(), op, op)
    assert status == Status.CANCELLED
    assert g.inst.read_memory(GUEST_OUT - 64, 4 * n + 128) == bytes([SENTINEL]) * (4 * n + 128)
    assert res.backup.nbytes == 4 * n  # (the pieces before the last were kept, then put back)
    g.host.close()


@pytest.mark.parametrize("field, value", [
    ("readback_pieces", 0), ("readback_pieces", True), ("readback_pieces", 2.0),
    ("readback_piece_min_bytes", 3), ("readback_piece_min_bytes", None),
    ("prestage_min_bytes", -1), ("park_min_bytes", "big"), ("in_place_outputs", 1), ("readahead", None),
    ("set_copy_threads", (4, 0)), ("set_copy_threads", [4, 4]), ("quarantine_readback_seconds", -1.0),
])
def test_transfer_knobs_are_checked(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        TransferTuning(**{field: value})
    assert err.value.field == f"TransferTuning.{field}" and str(err.value).startswith(f"TransferTuning.{field}: ")

