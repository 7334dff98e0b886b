"""OperationLog's Totals: a record added by its counter group is in Totals whenever they are read,
however many records wait unsummed, and a record added without one by the fields it holds."""
from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys

import pytest

from wagogpu.diagnostics import COPY_COUNTERS, NO_COUNTERS, SET_COUNTERS, SHARED_FIELDS, BufferOperation
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


def keeps_a_dict(op: BufferOperation) -> bool:
    """Whether a record holds its attributes in a dict of its own rather than inline (the garbage
    collector sees the dict, or each inline value, among what the object refers to; no field of a
    record holds a dict itself)."""
    return any(type(r) is dict for r in gc.get_referents(op))


@pytest.mark.gpu
def test_the_records_of_a_round_trip_keep_their_fields_inline():
    """CPython 3.11 and 3.12 keep a record's attributes inline only while its class's shared keys
    (the first SHARED_FIELDS fields) hold them: a record given a field past them keeps a dict of
    its own, and every attribute of it is then read and written the slow way (about 5% of a round
    trip's instructions). No record of a steady round trip (set, dispatch, copy back) or of a
    resident dispatch, waited and pipelined, has one."""
    from bench.buffer_bench import kernel_configs
    from bench.host_overhead import guest
    from bench.work_guest import KERNEL_IDS
    from wagogpu import Config, Host

    shared = {f.name for f in dataclasses.fields(BufferOperation)[:SHARED_FIELDS]}
    k = KERNEL_IDS["twice"]
    config = Config(kernels=kernel_configs(), allow_software_adapter=True, require_gpu=False)
    for pipelined in (False, True):
        host = Host(dataclasses.replace(config, pipelined=pipelined))
        log = host.context.log
        seen: list[BufferOperation] = []
        keep = log.record
        log.record = lambda op, counters=None: (seen.append(op), keep(op, counters))[1]
        try:
            inst, _x = guest(host, 1024)
            for _ in range(3):  # into the steady state (a binding set's first dispatches plan it)
                assert inst.call("sample", k, 1024) == 0
            del seen[:]
            for export, args in (("sample", (k, 1024)), ("dispatch", (k, 1024)), ("dispatch", (k, 1024))):
                assert inst.call(export, *args) == 0
            assert [op.import_name for op in seen][-2:] == ["dispatch", "dispatch"] and len(seen) >= 4
            for op in seen:
                assert not keeps_a_dict(op), (op.import_name, sorted(set(vars(op)) - shared))
        finally:
            host.close()


def test_the_first_record_fills_the_shared_keys():
    """The first record is made with every field in declaration order when the module is imported,
    so the shared keys hold the first SHARED_FIELDS fields even where many records holding few
    fields come first (each record made before the keys fill leaves room for one key less)."""
    script = (
        "import gc, dataclasses\n"
        "from wagogpu.diagnostics import BufferOperation, SHARED_FIELDS\n"
        "few = [BufferOperation.start('dispatch', 1, 8, 2) for _ in range(25)]\n"
        "op = BufferOperation.start('dispatch', 1, 8, 2)\n"
        "for f in dataclasses.fields(BufferOperation)[:SHARED_FIELDS]:\n"
        "    setattr(op, f.name, f.default)\n"
        "print(any(type(r) is dict for r in gc.get_referents(op)))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
