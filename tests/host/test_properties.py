"""Property tests: bulk transfers and scalar accessors against a numpy model of every buffer.

Random element types, offsets and counts, out-of-range included; on every error the destination
(plugin buffer or guest memory) must be untouched.
"""
from __future__ import annotations

import numpy as np
import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wagogpu import Config, ElementType, Host, Status
from wagogpu.abi import TYPE_INFO, unpack_result
from wagogpu.abi.f16 import f32_bits_to_half, half_to_f32_bits

from ..conftest import kernel
from ..guests import abi_module

MEMORY_BYTES = 65536
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def session():
    host = Host(Config(kernels=[kernel()], disabled=True))
    inst = host.instantiate(host.compile(abi_module()))
    yield host, inst
    host.close()


def _fresh_buffer(inst, etype: ElementType, length: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    status, h = unpack_result(inst.call("createBufferPacked", etype, length))
    assert status == Status.OK
    model = rng.integers(0, 256, length * TYPE_INFO[etype].stored_bytes, dtype=np.uint8)
    mem = inst.memory_view()
    mem[:model.size] = model
    assert inst.call("setBuffer32", h, 0, 0, 0, length) == Status.OK
    return h, model


@SETTINGS
@given(etype=st.sampled_from(list(ElementType)), length=st.integers(0, 64),
       offset=st.integers(0, 80), count=st.integers(0, 80),
       guest=st.one_of(st.integers(0, 2048), st.integers(MEMORY_BYTES - 64, MEMORY_BYTES + 8),
                       st.integers(2**32 - 8, 2**32 - 1)),
       is_set=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_set_and_copy_match_model(session, etype, length, offset, count, guest, is_set, seed):
    host, inst = session
    rng = np.random.default_rng(seed)
    h, model = _fresh_buffer(inst, etype, length, rng)
    try:
        width = TYPE_INFO[etype].stored_bytes
        mem = inst.memory_view()
        mem[:] = rng.integers(0, 256, mem.size, dtype=np.uint8)
        before_mem = mem.copy()
        buf = inst.buffers.buffers[h]
        version = buf.record.version
        name = "setBuffer32" if is_set else "copyBuffer32"
        status = inst.call(name, h, offset, 0, guest - (1 << 32) if guest >= 1 << 31 else guest, count)
        nbytes = count * width
        if offset + count > length:
            want = Status.INVALID_RANGE
        elif guest + nbytes > mem.size:
            want = Status.INVALID_RANGE
        else:
            want = Status.OK
        assert status == want
        cpu = inst.buffers.cpu_bytes(buf)
        if want == Status.OK and count:
            if is_set:
                model[offset * width:offset * width + nbytes] = before_mem[guest:guest + nbytes]
                assert buf.record.version == version + 1
            else:
                before_mem[guest:guest + nbytes] = model[offset * width:offset * width + nbytes]
        else:
            assert buf.record.version == version
        assert np.array_equal(cpu, model)
        assert np.array_equal(inst.memory_view(), before_mem)
    finally:
        assert inst.call("freeBuffer", h) == Status.OK


def _model_read(etype: ElementType, raw: bytes) -> int:
    v = int.from_bytes(raw, "little")
    if etype == ElementType.I8:
        return (v - ((v & 0x80) << 1)) & 0xFFFFFFFF
    if etype == ElementType.I16:
        return (v - ((v & 0x8000) << 1)) & 0xFFFFFFFF
    if etype == ElementType.F16:
        return half_to_f32_bits(v)
    return v


def _model_write(etype: ElementType, bits: int) -> bytes:
    width = TYPE_INFO[etype].stored_bytes
    if etype == ElementType.F16:
        return f32_bits_to_half(bits & 0xFFFFFFFF).to_bytes(2, "little")
    return (bits & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


@SETTINGS
@given(etype=st.sampled_from(list(ElementType)), length=st.integers(0, 16),
       ops=st.lists(st.tuples(st.booleans(), st.sampled_from(list(ElementType)), st.integers(0, 20),
                              st.integers(0, 2**64 - 1)), max_size=20),
       seed=st.integers(0, 2**32 - 1))
def test_scalar_accessors_match_model(session, etype, length, ops, seed):
    host, inst = session
    rng = np.random.default_rng(seed)
    h, model = _fresh_buffer(inst, etype, length, rng)
    model = bytearray(model.tobytes())
    width = TYPE_INFO[etype].stored_bytes
    try:
        for is_write, access_type, index, bits in ops:
            scalar = TYPE_INFO[access_type].scalar
            if scalar in ("i32", "f32"):
                bits &= 0xFFFFFFFF
            arg = bits - (1 << 64) if bits >= 1 << 63 else bits
            want_status = (Status.TYPE_MISMATCH if access_type != etype else
                           Status.INVALID_RANGE if index >= length else Status.OK)
            try:
                if is_write:
                    inst.call(f"writebits{access_type.name}", h, index, arg)
                    got = None
                else:
                    got = inst.call(f"readbits{access_type.name}", h, index) & 0xFFFFFFFFFFFFFFFF
                status = Status.OK
            except wasmtime.Trap as exc:
                status = int(str(exc).split("status ")[1].split()[0])
            assert status == want_status
            if status == Status.OK:
                if is_write:
                    model[index * width:(index + 1) * width] = _model_write(etype, bits)
                else:
                    assert got == _model_read(etype, bytes(model[index * width:(index + 1) * width]))
            assert inst.buffers.cpu_bytes(inst.buffers.buffers[h]).tobytes() == bytes(model)
    finally:
        assert inst.call("freeBuffer", h) == Status.OK
