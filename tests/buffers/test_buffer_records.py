"""The buffer layer's typed records and closed sets: BufferRecord's named fields are the accessor
layout's words (RECORD_DTYPE), the StrEnums read and serialise as the names docs/design/abi.md §8 prints, and
TransferTuning refuses what it cannot mean."""
from __future__ import annotations

import json
import struct
from dataclasses import asdict

import numpy as np
import pytest

from wagogpu import Config, ConfigError, ElementType, Host
from wagogpu.abi import accessor as acc
from wagogpu.abi import unpack_result
from wagogpu.buffers import BufferRecord, HostTuning, PipelineTuning, TransferTuning
from wagogpu.diagnostics import BufferState, Outcome, ReasonCode, RuntimeState
from wagogpu.gpu import DeviceTuning

from ..conftest import kernel
from ..gpu_support import gpu_host
from ..guests import abi_module, runner_kernel


def records_view(words: memoryview) -> np.ndarray:
    return np.frombuffer(words, dtype=acc.RECORD_DTYPE)


def test_record_fields_are_the_layout_words() -> None:
    table = bytearray(acc.MAX_RECORDS * acc.RECORD_BYTES)
    words = memoryview(table).cast("I")
    rec = BufferRecord(words, 3)
    rec.fill(int(ElementType.F32), 17, 4096)
    rec.version = (5 << 32) | 7
    rec.dirty_start, rec.dirty_end = 2, 9
    row = records_view(words)[3]
    assert (int(row["type"]), int(row["length"]), int(row["ptr"]), int(row["flags"])) == (8, 17, 4096, acc.CPU_CURRENT)
    assert (int(row["version"]), int(row["dirty_start"]), int(row["dirty_end"])) == ((5 << 32) | 7, 2, 9)
    raw = np.frombuffer(words, dtype="<u4").reshape(acc.MAX_RECORDS, -1)
    assert not raw[2].any() and not raw[4].any()  # neighbours untouched
    records_view(words)["flags"][3] = acc.GPU_CURRENT | acc.DIRTY  # written by "the Wasm side"
    assert rec.flags == acc.GPU_CURRENT | acc.DIRTY and rec.dirty() == (2, 9)
    rec.version = 0xFFFFFFFF
    rec.bump_version()  # carries into the high word
    assert int(records_view(words)["version"][3]) == 1 << 32
    rec.version = (2 << 32) | 0xFFFFFFFF
    rec.mark_gpu_written()  # a GPU write carries too (its own increment, inline)
    assert rec.version == 3 << 32 and rec.flags == acc.GPU_CURRENT
    rec.mark_gpu_written()
    assert rec.version == (3 << 32) | 1
    rec.clear()
    assert not raw[3].any()


def test_record_transitions_follow_the_state_table() -> None:
    words = memoryview(bytearray(acc.RECORD_BYTES * 2)).cast("I")
    rec = BufferRecord(words, 1)
    rec.fill(int(ElementType.F32), 8, 0)
    rec.mark_uploaded()  # upload: both copies current
    assert rec.flags == acc.CPU_CURRENT | acc.GPU_CURRENT and rec.version == 1
    rec.note_cpu_write(2, 4)  # CPU write: GPU stale, dirty [2, 4)
    assert (rec.flags, rec.dirty(), rec.version) == (acc.CPU_CURRENT | acc.DIRTY, (2, 4), 2)
    rec.note_cpu_write(6, 7)  # widens the interval
    assert rec.dirty() == (2, 7)
    rec.mark_gpu_written()
    assert (rec.flags, rec.version) == (acc.GPU_CURRENT, 4)
    rec.mark_quarantined()  # only the device held the contents
    assert rec.flags == acc.LOST


def test_a_buffers_record_moves_with_its_memory_when_the_accessor_grows() -> None:
    """Creating a buffer bigger than the accessor memory grows it; every record is re-bound to the
    new view, so fields read through an old Buffer stay right."""
    with Host(Config(kernels=[kernel()], disabled=True)) as host:
        inst = host.instantiate(host.compile(abi_module(kernels=runner_kernel("double", 0, 1, "$x"))))
        _, small = unpack_result(inst.call("createBufferPacked", 8, 4))
        buf = inst.buffers.buffers[small]
        inst.write_memory(0, struct.pack("<4f", 1, 2, 3, 4))
        assert inst.call("setBuffer32", small, 0, 0, 0, 4) == 0
        pages = inst.buffers.memory.span()[1] // 65536
        _, big = unpack_result(inst.call("createBufferPacked", 8, 1 << 20))  # 4 MiB: the memory grows
        assert inst.buffers.memory.span()[1] // 65536 > pages
        assert (buf.record.version, buf.record.length, buf.state) == (2, 4, BufferState.CPU_CURRENT)
        assert inst.call("readbitsF32", small, 3) == struct.unpack("<I", struct.pack("<f", 4.0))[0]


def test_closed_sets_read_and_serialise_as_their_names() -> None:
    assert [str(m) for m in Outcome if m is not Outcome.NONE] == ["OK", "GPU", "CPU", "CPU_FALLBACK_READY", "NOOP", "ERROR"]
    assert ReasonCode.CONTRACT_UNVERIFIED == "CONTRACT_UNVERIFIED" and str(ReasonCode.NONE) == "NONE"
    with Host(Config(kernels=[kernel()], disabled=True)) as host:
        inst = host.instantiate(host.compile(abi_module(kernels=runner_kernel("double", 0, 1, "$x"))))
        _, a = unpack_result(inst.call("createBufferPacked", 8, 4))
        _, b = unpack_result(inst.call("createBufferPacked", 8, 4))
        inst.call("bindBuffer", 0, a)
        inst.call("bindBuffer", 1, b)
        assert inst.call("dispatch", 1, 4) == 1
        snap = host.buffer_snapshot()
        record = json.loads(json.dumps(asdict(snap)))
        assert (record["state"], record["device_state"]) == ("DISABLED", "UNAVAILABLE")
        assert (record["last"]["outcome"], record["last"]["reason_code"]) == ("CPU_FALLBACK_READY", "DISABLED")
        assert snap.state is RuntimeState.DISABLED and host.state == "DISABLED"


@pytest.mark.parametrize("kwargs, field", [
    ({"prestage_min_bytes": -1}, "prestage_min_bytes"), ({"park_min_bytes": 1.5}, "park_min_bytes"),
    ({"set_copy_threads": (4, 0)}, "set_copy_threads"), ({"set_copy_threads": (4,)}, "set_copy_threads")])
def test_transfer_tuning_refuses_what_it_cannot_mean(kwargs, field) -> None:
    with pytest.raises(ValueError, match=f"TransferTuning.{field}"):
        TransferTuning(**kwargs)


def test_host_takes_only_a_host_tuning() -> None:
    with pytest.raises(ConfigError, match="tuning: expected wagogpu.buffers.HostTuning"):
        Host(Config(kernels=[kernel()], disabled=True), tuning={"prestage_min_bytes": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="HostTuning.pipeline: expected a PipelineTuning"):
        HostTuning(pipeline=TransferTuning())  # type: ignore[arg-type]


@pytest.mark.gpu
def test_one_host_tuning_reaches_the_device_the_pending_work_and_the_transfers() -> None:
    tuning = HostTuning(transfer=TransferTuning(prestage_min_bytes=4096), pipeline=PipelineTuning(max_dispatches=3),
                        device=DeviceTuning(readahead_max_bytes=8192))
    host = gpu_host(tuning, kernels=[kernel()])
    try:
        res = host.context.residency
        assert host.device is not None and host.device.tuning is tuning.device
        assert res.pending.tuning is tuning.pipeline
        assert res.tuning.prestage_min_bytes == 4096 and res.tuning.readahead_max_bytes == 8192
    finally:
        host.close()
    plain = Host(Config(kernels=[kernel()], disabled=True), tuning=TransferTuning(readahead=False))
    try:
        assert plain.tuning.transfer == TransferTuning(readahead=False)  # a TransferTuning alone
        assert plain.tuning.pipeline == PipelineTuning()
    finally:
        plain.close()
