"""The operations of the hostile-guest fuzzer: how they are drawn, how their symbolic handle
arguments resolve, what the model predicts for them and what a host answers.

An op is a JSON-able list `[name, arg, ...]`. A handle argument is symbolic so that a sequence
means the same on two hosts whose handle counters differ: `["live", k]` (the k-th handle this
instance created, freed or not), `["recent", k]` (the k-th most recent), `["other"]` (a live
handle of another instance), `["next"]` (the handle the next create will get), `["raw", v]`.
An observation is what the call gave: a status, `[handle, status]`, a packed i64, a value's bits,
`["trap", message]`, or for dispatch `[status, what the CPU runner did after status 1]`.
"""
from __future__ import annotations

from typing import Any

import wasmtime
from hypothesis import strategies as st

from abitable import ELEMENTS, scalar_trap, trap_text
from hostile_guest import GC_KINDS
from hostile_kernels import KERNELS, ScalarTrap
from hostile_model import GC_STORAGE, MEMORIES, U32, U64, Model

Op = list  # [name, *args]
Observation = Any  # what a call gave (see the module docstring); None for a call that returns nothing

TYPE_NAMES = [e.name for e in ELEMENTS]
# the mutable GC array kind (index into GC_KINDS) of each element type's storage
GC_MATCH = {t: next(i for i, k in enumerate(GC_KINDS) if k.mutable and k.storage == storage)
            for t, storage in GC_STORAGE.items()}
TRANSFERS = {"set32": (True, False, "setBuffer32"), "copy32": (False, False, "copyBuffer32"),
             "set64": (True, True, "setBuffer64"), "copy64": (False, True, "copyBuffer64")}
HUGE = [0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 4097, 10_000_001]
SMALL_COUNTS = [0, 1, 2, 3, 4, 5, 8, 16, 17, 64, 65]


def _u32(values: list[int]) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(values), st.sampled_from(HUGE), st.integers(0, U32))


def _count() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(SMALL_COUNTS), st.sampled_from(SMALL_COUNTS), st.sampled_from([2048, 4096]),
                     st.sampled_from(HUGE))


def _handle() -> st.SearchStrategy[list]:
    return st.one_of(st.tuples(st.just("live"), st.sampled_from(range(8))).map(list),
                     st.tuples(st.just("recent"), st.integers(0, 3)).map(list),
                     st.tuples(st.just("recent"), st.integers(0, 1)).map(list),
                     st.just(["other"]), st.just(["next"]),
                     st.tuples(st.just("raw"), st.sampled_from([0, 1, 2, 0xFFFFFFFF, 0x80000001])).map(list))


def _slot() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(range(8)), st.sampled_from(range(8)), st.sampled_from([8, 9, 0xFFFFFFFF]))


def _guest(address64: bool) -> st.SearchStrategy[int]:
    edges = [0, 1, 3, 64, 4096, 65532, 65535, 65536, 65537, 0xFFFFFFFF, 0x80000000]
    if address64:
        edges += [1 << 32, 1 << 63, U64, U64 - 3]
    return st.one_of(st.sampled_from(edges), st.integers(0, 65536))


def _words() -> st.SearchStrategy[str]:
    """Little-endian u32 words, mostly small (in-range gather indices), as hex."""
    word = st.one_of(st.integers(0, 70), st.integers(0, U32), st.sampled_from([0x7FC00001, 0xFF800000, 0x80000000]))
    return st.lists(word, min_size=1, max_size=24).map(lambda ws: b"".join(w.to_bytes(4, "little") for w in ws).hex())


@st.composite
def _setup(draw) -> list[Op]:
    """Memory 0 filled, buffers matching a kernel's bindings set from it and bound, and a dispatch
    of that kernel (most dispatches then reach the later checks: types, ranges, the GPU)."""
    kid = draw(st.sampled_from(sorted(KERNELS)))
    length = draw(st.sampled_from([0, 1, 4, 5, 17, 64]))
    ops: list[Op] = [["fill", 0, 0, draw(_words())]]
    for slot, etype, _ in KERNELS[kid].bindings:
        if draw(st.integers(0, 7)) == 0:
            continue  # now and then a slot left as it was
        ops += [["packed", int(etype), length], ["set32", ["recent", 0], 0, 0, 0, length],
                ["bind", slot, ["recent", 0]]]
    count = draw(st.one_of(st.just(length), st.sampled_from([0, 1, 4, 5, length + 1])))
    return ops + [["dispatch", kid, count]] + [["free", ["recent", 0]]] * draw(st.integers(0, 1))


@st.composite
def _scalar_group(draw) -> list[Op]:
    """A buffer of any type written and read back through the scalar imports, element by element
    (the conversions: sign and zero extension, F16 rounding, NaN payloads), then copied out."""
    etype = draw(st.sampled_from(range(1, 12)))
    length = draw(st.sampled_from([1, 2, 5, 17]))
    bits = st.one_of(st.integers(0, U64), st.sampled_from([0x7FC00001, 0x7F800001, 0x7F800000, 0x38000001,
                                                          0x477FF000, 0xFFFF, 0x80, 0x8000, 0xFFFFFFFF]))
    ops: list[Op] = [["packed", etype, length]]
    for _ in range(draw(st.integers(1, 4))):
        k = draw(st.integers(0, 20))
        ops += [["write", "match", ["recent", 0], ["in", k], draw(bits)], ["read", "match", ["recent", 0], ["in", k]]]
    ops.append(["copy32", ["recent", 0], 0, 0, draw(st.sampled_from([0, 3, 4096])), length])
    return ops


@st.composite
def _transfer_group(draw) -> list[Op]:
    """A buffer of any type through the 64-bit memory and a GC array of its own storage kind
    ("match"), in and out, with offsets and counts that mostly fit."""
    etype = draw(st.sampled_from(range(1, 12)))
    length = draw(st.sampled_from([1, 3, 8, 17]))
    offset = draw(st.sampled_from([0, 0, 1, 2]))
    count = draw(st.sampled_from([0, 1, length - offset, length - offset + 1, length]))
    guest = draw(st.sampled_from([0, 7, 65536 - 8 * length, 65535]))
    array_offset = draw(st.sampled_from([0, 1, 3]))
    array_length = max(0, array_offset + count + draw(st.sampled_from([0, 0, 2, -1])))
    fill = draw(st.one_of(st.integers(0, U64), st.sampled_from([0x7FC00001, 0xFFFF, 0x80])))
    kind = draw(st.sampled_from(["match", "match", "match", 9]))  # 9: the immutable i32 array
    return [["packed", etype, length], ["fill", 1, 0, draw(_words())],
            ["set64", ["recent", 0], 0, 1, 0, length], ["copy64", ["recent", 0], offset, 1, guest, count],
            ["setGC", ["recent", 0], offset, kind, array_length, array_offset, count, fill],
            ["copyGC", ["recent", 0], offset, kind, array_length, array_offset, count],
            ["copy32", ["recent", 0], 0, 0, 1024, length]]


def _op() -> st.SearchStrategy[list[Op]]:
    kid = st.one_of(st.sampled_from(sorted(KERNELS)), st.sampled_from([0, 10, 0xFFFFFFFF]))
    tname = st.one_of(st.sampled_from(TYPE_NAMES), st.just("match"), st.just("match"))
    index = st.one_of(st.integers(0, 70), st.sampled_from(HUGE), st.tuples(st.just("in"), st.integers(0, 70)).map(list))
    bits = st.one_of(st.integers(0, U64), st.integers(0, 300), st.sampled_from([0x7FC00001, 0x7F800001, 0xFFFF]))
    mem = st.one_of(st.sampled_from([0, 1, 2]), st.sampled_from([3, 0xFFFFFFFF]))
    gc_kind = st.sampled_from(range(len(GC_KINDS)))
    single = st.one_of(
        st.tuples(st.sampled_from(["create", "packed"]), st.one_of(st.sampled_from(range(1, 12)), st.sampled_from(range(14))), _count()),
        st.tuples(st.just("free"), _handle()),
        st.tuples(st.just("bind"), _slot(), _handle()), st.tuples(st.just("bind"), _slot(), _handle()),
        st.tuples(st.just("get"), _slot()),
        st.tuples(st.just("dispatch"), kid, _count()), st.tuples(st.just("dispatch"), kid, st.sampled_from([4, 5, 17])),
        st.tuples(st.just("runner"), st.sampled_from([k for k in sorted(KERNELS) if KERNELS[k].exported]), _count()),
        st.tuples(st.sampled_from(["set32", "copy32"]), _handle(), _u32([0, 1, 2, 16]), mem, _guest(False), _count()),
        st.tuples(st.sampled_from(["set64", "copy64"]), _handle(), _u32([0, 1, 2, 16]), mem, _guest(True), _count()),
        st.tuples(st.just("setGC"), _handle(), _u32([0, 1, 3]), gc_kind, st.integers(0, 70), _u32([0, 1, 5]),
                  _count(), bits),
        st.tuples(st.just("copyGC"), _handle(), _u32([0, 1, 3]), gc_kind, st.integers(0, 70), _u32([0, 1, 5]),
                  _count()),
        st.tuples(st.just("read"), tname, _handle(), index), st.tuples(st.just("read"), tname, _handle(), index),
        st.tuples(st.just("write"), tname, _handle(), index, bits),
        st.tuples(st.just("fill"), st.sampled_from([0, 1]), st.sampled_from([0, 0, 4, 64, 65000]), _words()),
    ).map(lambda t: [list(t)])
    create = st.tuples(st.sampled_from(["create", "packed"]), st.sampled_from(range(1, 12)), st.sampled_from(SMALL_COUNTS))
    return st.one_of(single, single, create.map(lambda t: [list(t)]), _setup(), _scalar_group(), _transfer_group())


def sequences() -> st.SearchStrategy[list[Op]]:
    return st.lists(_op(), min_size=3, max_size=30).map(lambda groups: [op for g in groups for op in g])


# ---- resolution ------------------------------------------------------------------------------------
def _resolve_handle(sym: Any, model: Model, handles: list[int], other: int) -> int:
    kind = sym[0]
    if kind == "live":
        return handles[sym[1] % len(handles)] if handles else 0
    if kind == "recent":
        return handles[-1 - sym[1]] if len(handles) > sym[1] else 0
    if kind == "other":
        return other
    if kind == "next":
        return model.next_handle
    return sym[1]


def resolve(op: Op, model: Model, handles: list[int], other: int) -> list:
    """The op's arguments with every symbolic handle made concrete (the same on both hosts); for a
    scalar access also the type "match" (the buffer's own type) and the index ["in", k] (k modulo
    the buffer's length), and for a GC transfer the array kind "match" (the buffer's storage), so
    that calls also get past the type and range checks."""
    if op[0] in ("read", "write"):
        handle = _resolve_handle(op[2], model, handles, other)
        buf = model.buffers.get(handle)
        tname = op[1] if op[1] != "match" else (buf.element.name if buf else "I32")
        index = op[3] if not isinstance(op[3], (list, tuple)) else op[3][1] % max(1, buf.length if buf else 1)
        return [tname, handle, index, *op[4:]]
    args = [_resolve_handle(a, model, handles, other) if isinstance(a, (list, tuple)) else a for a in op[1:]]
    if op[0] in ("setGC", "copyGC") and args[2] == "match":
        buf = model.buffers.get(args[0])
        args[2] = GC_MATCH.get(buf.element.name, 0) if buf else 0
    return args


# ---- the model's answer ----------------------------------------------------------------------------
def _trap(fn: Any, *args: Any) -> Observation:
    try:
        return fn(*args)
    except ScalarTrap as trap:
        return ["trap", scalar_trap(trap.status)]


def _model_run(model: Model, kid: int, count: int) -> Observation:
    result = _trap(model.run, KERNELS[kid], count)
    return result if isinstance(result, list) else None


def _model_dispatch(model: Model, kid: int, count: int) -> list:
    status = int(model.dispatch(kid, count))
    return [status, _model_run(model, kid, count) if status == 1 else None]


def _model_fill(model: Model, mem: int, offset: int, data: str) -> None:
    raw = bytes.fromhex(data)
    model.memories[mem][offset:offset + len(raw)] = raw


PREDICT = {
    "create": lambda m, a: [int(v) for v in m.create(*a)],
    "packed": lambda m, a: (lambda h, s: (int(s) << 32) | h)(*m.create(*a)),
    "free": lambda m, a: int(m.free(*a)),
    "bind": lambda m, a: int(m.bind(*a)),
    "get": lambda m, a: _trap(m.get, *a),
    "dispatch": lambda m, a: _model_dispatch(m, *a),
    "runner": lambda m, a: _model_run(m, *a),
    "setGC": lambda m, a: int(m.gc_transfer(True, *a)),
    "copyGC": lambda m, a: int(m.gc_transfer(False, *a)),
    "read": lambda m, a: _trap(m.read, *a),
    "write": lambda m, a: _trap(m.write, *a),
    "fill": lambda m, a: _model_fill(m, *a),
}


def predict(model: Model, op: Op, args: list) -> Observation:
    if op[0] in TRANSFERS:
        setting, address64, _ = TRANSFERS[op[0]]
        return int(model.transfer(setting, address64, *args))
    return PREDICT[op[0]](model, args)


# ---- the host's answer -----------------------------------------------------------------------------
def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _i32s(args: list) -> list[int]:
    return [_signed(a, 32) for a in args]


def _host_run(inst: Any, kid: int, count: int) -> Observation:
    try:
        inst.call(f"wago_gpu.cpu.{KERNELS[kid].name}", _signed(count, 32))
        return None
    except wasmtime.Trap as exc:
        return ["trap", trap_text(exc)]


def _host_dispatch(inst: Any, kid: int, count: int) -> list:
    status = inst.call("dispatch", _signed(kid, 32), _signed(count, 32))
    return [status, _host_run(inst, kid, count) if status == 1 else None]


def _transfer(inst: Any, op: Op, args: list) -> Observation:
    _, address64, export = TRANSFERS[op[0]]
    h, off, mem, guest, count = args
    return inst.call(export, *_i32s([h, off, mem]), _signed(guest, 64 if address64 else 32), _signed(count, 32))


def _scalar(inst: Any, op: Op, args: list) -> Observation:
    if op[0] == "read":
        return inst.call(f"read{args[0]}", *_i32s(args[1:])) & U64
    inst.call(f"write{args[0]}", *_i32s(args[1:3]), _signed(args[3], 64))
    return None


EXECUTE = {
    "create": lambda i, op, a: [v & U32 for v in i.call("createBuffer", *_i32s(a))],
    "packed": lambda i, op, a: i.call("createBufferPacked", *_i32s(a)) & U64,
    "free": lambda i, op, a: i.call("freeBuffer", *_i32s(a)),
    "bind": lambda i, op, a: i.call("bindBuffer", *_i32s(a)),
    "get": lambda i, op, a: i.call("getBuffer", *_i32s(a)) & U32,
    "dispatch": lambda i, op, a: _host_dispatch(i, *a),
    "runner": lambda i, op, a: _host_run(i, *a),
    "setGC": lambda i, op, a: i.call("setGC", *_i32s(a[:6]), _signed(a[6], 64)),
    "copyGC": lambda i, op, a: i.call("copyGC", *_i32s(a)),
    "read": _scalar,
    "write": _scalar,
    "fill": lambda i, op, a: i.write_memory(a[1], bytes.fromhex(a[2]), memory=a[0]),
}


def execute(inst: Any, op: Op, args: list) -> Observation:
    try:
        if op[0] in TRANSFERS:
            return _transfer(inst, op, args)
        return EXECUTE[op[0]](inst, op, args)
    except wasmtime.Trap as exc:
        return ["trap", trap_text(exc)]


__all__ = ["Op", "sequences", "resolve", "predict", "execute", "MEMORIES"]
