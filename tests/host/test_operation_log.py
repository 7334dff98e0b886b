"""OperationLog's Totals: a record added by its counter group is in Totals whenever they are read,
however many records wait unsummed, and a record added without one by the fields it holds."""
from __future__ import annotations

import dataclasses

import pytest

from wagogpu.diagnostics import COPY_COUNTERS, NO_COUNTERS, SET_COUNTERS, BufferOperation
from wagogpu.host import context
from wagogpu.host.context import OperationLog


def copy_back(nbytes: int) -> BufferOperation:
    op = BufferOperation(import_name="copyBuffer32")
    op.logical_download_bytes = op.gpu_download_bytes = op.guest_copy_bytes = nbytes
    op.download_count = op.guest_copy_count = 1
    return op


def test_grouped_records_are_in_totals_whenever_read_past_the_unsummed_bound():
    log = OperationLog()
    n = 2 * context.MAX_UNSUMMED + 7  # summed twice on the way, seven left for the read
    for i in range(n):
        log.record(copy_back(4 * (i + 1)), COPY_COUNTERS)
        set_op = BufferOperation(import_name="setBuffer32", guest_set_bytes=16, guest_set_count=1)
        log.record(set_op, SET_COUNTERS)
        if i == 3:
            early = log.totals.counters()
            assert (early.download_count, early.guest_set_bytes) == (4, 64)
    totals = log.totals
    assert totals.download_count == totals.guest_copy_count == n
    assert totals.logical_download_bytes == totals.gpu_download_bytes == totals.guest_copy_bytes == 2 * n * (n + 1)
    assert (totals.guest_set_count, totals.guest_set_bytes) == (n, 16 * n)
    assert log.sequence == 2 * n and log.last.import_name == "setBuffer32"


def test_no_group_adds_what_the_record_holds_and_no_counters_adds_nothing():
    log = OperationLog()
    log.record(BufferOperation(import_name="dispatch", upload_count=2, parameter_upload_bytes=16))
    log.record(BufferOperation(import_name="dispatch"), NO_COUNTERS)
    totals = log.totals
    assert (totals.upload_count, totals.parameter_upload_bytes, totals.download_count) == (2, 16, 0)
    assert log.last_dispatch.sequence == 2


@pytest.mark.gpu
def test_the_fields_a_round_trip_sets_are_among_the_first_thirty():
    """CPython 3.11 and 3.12 share at most 30 attribute keys per class: a record given a field past
    them keeps a dict of its own, and every attribute of it is then read and written the slow way
    (about 5% of a round trip's instructions). Every field a round trip and a resident dispatch
    set, waited and pipelined, comes in the first 30."""
    from bench.buffer_bench import kernel_configs
    from bench.host_overhead import guest
    from bench.work_guest import KERNEL_IDS
    from wagogpu import Config, Host

    shared = {f.name for f in dataclasses.fields(BufferOperation)[:30]}
    k = KERNEL_IDS["twice"]
    config = Config(kernels=kernel_configs(), allow_software_adapter=True, require_gpu=False)
    for pipelined in (False, True):
        host = Host(dataclasses.replace(config, pipelined=pipelined))
        try:
            inst, _x = guest(host, 1024)
            for export, args in (("sample", (k, 1024)), ("dispatch", (k, 1024)), ("dispatch", (k, 1024))):
                assert inst.call(export, *args) == 0
                op = host.context.log.last
                assert op.import_name and set(vars(op)) <= shared, sorted(set(vars(op)) - shared)
        finally:
            host.close()
