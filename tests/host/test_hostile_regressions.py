"""Sequences the hostile-guest fuzzer (fuzz/hostile.py) failed on, shrunk, kept as found. Each
failure so far was the fuzzer's or the model's, not wagogpu's; the docstrings say which and why.
"""
from __future__ import annotations

import pytest

from .. import fuzz_support  # noqa: F401 (sys.path)
from ..fuzz_support import hostile_fuzzer as fuzzer  # noqa: F401 (a fixture)
import hostile  # noqa: E402
from hostile_guest import guest_wat  # noqa: E402
from wagogpu import Host, Status  # noqa: E402

# A dispatch whose GPU path needs more device bytes than max_instance_buffer_bytes (12 KiB): a
# 2,048-element U8 buffer needs 8 KiB of device copy and as much scratch. The GPU host answers
# LIMIT_EXCEEDED, as docs/design/abi.md §4.9 requires ("a budget failure on the GPU path of dispatch returns
# 6, not 1"); the model predicted 0 because it did not count device bytes. The model now calls
# such a dispatch Ambiguous and the fuzzer skips it on both hosts.
GPU_BUDGET = [["packed", 2, 2048], ["bind", 2, ["recent", 0]], ["dispatch", 2, 1], ["read", "U8", ["recent", 0], 0]]
# Statuses equal to a handle number (here 2) were renamed as handles when the two hosts' answers
# were compared, so equal answers differed: only handle fields are renumbered now.
STATUS_LIKE_A_HANDLE = [["create", 1, 0], ["free", ["live", 0]], ["dispatch", 1, 4], ["create", 2, 2048],
                        ["bind", 0, ["live", 0]], ["write", "I8", ["other"], 0, 30362871], ["create", 1, 0]]

# An I64 copy kernel dispatched on the GPU host: it ran on the GPU (0) where the model still said 1,
# from when 64-bit buffers stayed on the CPU as in the reference. The model's kernel is GPU-eligible now.
WIDE_ON_THE_GPU = [["create", 1, 0], ["create", 1, 0], ["fill", 0, 0, "00000000"], ["packed", 9, 1],
                   ["set32", ["recent", 0], 0, 0, 0, 1], ["bind", 5, ["recent", 0]], ["packed", 9, 1],
                   ["set32", ["recent", 0], 0, 0, 0, 1], ["bind", 6, ["recent", 0]], ["dispatch", 5, 1]]


def test_a_gpu_dispatch_over_the_byte_budget_is_skipped(fuzzer):
    skipped = fuzzer.skipped
    fuzzer.check(GPU_BUDGET)
    assert fuzzer.skipped == skipped + 1


@pytest.mark.parametrize("gpu, status", [(True, Status.LIMIT_EXCEEDED), (False, Status.CPU_FALLBACK)])
def test_the_gpu_budget_answer_is_the_spec_one(gpu, status):
    with Host(hostile.host_config(gpu)) as host:
        inst = host.instantiate(host.compile(guest_wat()))
        handle = inst.call("createBufferPacked", 2, 2048) & 0xFFFFFFFF
        assert inst.call("bindBuffer", 2, handle) == 0
        assert inst.call("dispatch", 2, 1) == status
        assert inst.call("readU8", handle, 0) == 0  # nothing committed either way


def test_statuses_are_not_renumbered_as_handles(fuzzer):
    fuzzer.check(STATUS_LIKE_A_HANDLE)


def test_a_64_bit_copy_runs_on_the_gpu_host(fuzzer):
    fuzzer.check(WIDE_ON_THE_GPU)
