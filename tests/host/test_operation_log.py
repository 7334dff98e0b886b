"""OperationLog's Totals: a record added by its counter group is in Totals whenever they are read,
however many records wait unsummed, and a record added without one by the fields it holds."""
from __future__ import annotations

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
