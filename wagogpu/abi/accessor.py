"""Generated Wasm module that owns one instance's buffer bytes and serves the scalar imports.

DESIGN decision 1: a Wasm->Python call costs microseconds, a Wasm->Wasm call nanoseconds, so
getBuffer/readBuffer*/writeBuffer* (and the GC transfers, which need anyref) are exported by this
module and the guest links straight to them. Python reaches the same linear memory as numpy views
and owns the layout below; Wasm calls back into Python only on error paths (trap), when a buffer is
not CPU-current (acquire), and around GC transfers (gc_begin/gc_end, for checks and bookkeeping).

Layout of the accessor memory (all little-endian):
  [0]     u32 state        0 = open; anything else traps 12 (instance closing or host stopped)
  [32]    u32 slots[8]     bound handle per slot, 0 = empty
  [64]    hash[128]        (u32 handle, u32 record) open addressing on handle & 127, 0 = empty
  [1088]  records[64]      32 bytes each, see RECORD_DTYPE
  [3584]  kernel table[8]  (u32 address, u32 length) per slot, written before a CPU kernel runs
  [3712]  queue words      CPU kernels on several threads (compiler/cpuwork.py): next, done, stop,
                           generation, kernel tag, chunk and end, up to 3992
  [4096]  heap             buffer bytes, placed by the buffer layer's heap allocator

RECORD_DTYPE is the one description of a record: the generated Wasm takes its field offsets from
it, and the buffer layer's typed record view (wagogpu.buffers.records) its word positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .table import GC_IMPORTS, IMPORTS_BY_NAME, SLOT_COUNT, TYPE_INFO, ElementType, Status, TypeInfo

STATE_OFFSET = 0
SLOTS_OFFSET = 32
HASH_OFFSET = 64
HASH_ENTRIES = 128
RECORDS_OFFSET = HASH_OFFSET + 8 * HASH_ENTRIES
MAX_RECORDS = 64
RECORD_BYTES = 32
HEAP_OFFSET = 4096
#: The CPU kernels' slot table (compiler/cpukernel.py): the buffer address and length per slot.
KERNEL_TABLE_OFFSET = 3584
assert RECORDS_OFFSET + MAX_RECORDS * RECORD_BYTES <= KERNEL_TABLE_OFFSET
assert KERNEL_TABLE_OFFSET + 8 * SLOT_COUNT <= HEAP_OFFSET
#: The CPU kernels' shared work queue (compiler/cpuwork.py): `next` and `done`, which every thread
#: updates, each have a 128-byte line (an adjacent-line prefetch pair) of their own, away from the
#: table, which every element's access reads; the words written once per dispatch share the last.
KERNEL_NEXT_OFFSET = 3712  # u64
KERNEL_DONE_OFFSET = 3840
KERNEL_STOP_OFFSET = 3968
KERNEL_GEN_OFFSET = 3972
KERNEL_TAG_OFFSET = 3976
KERNEL_CHUNK_OFFSET = 3980
KERNEL_END_OFFSET = 3984  # u64
assert KERNEL_TABLE_OFFSET + 8 * SLOT_COUNT + 64 <= KERNEL_NEXT_OFFSET
assert KERNEL_END_OFFSET + 8 <= HEAP_OFFSET

# Record flags.
CPU_CURRENT = 1
GPU_CURRENT = 2
LOST = 4
DIRTY = 8

RECORD_DTYPE = np.dtype([
    ("type", "<u4"), ("length", "<u4"), ("ptr", "<u4"), ("flags", "<u4"),
    ("version", "<u8"), ("dirty_start", "<u4"), ("dirty_end", "<u4"),
])
assert RECORD_DTYPE.itemsize == RECORD_BYTES
#: Byte offset of each record field within its record.
_RECORD_FIELDS = RECORD_DTYPE.fields
assert _RECORD_FIELDS is not None
RECORD_OFFSETS: dict[str, int] = {name: int(_RECORD_FIELDS[name][1]) for name in _RECORD_FIELDS}
HASH_DTYPE = np.dtype([("handle", "<u4"), ("record", "<u4")])

#: Module name of what the accessor imports: its memory (made by the host first, so that the
#: buffer table exists before any hook can be called), then host functions with these signatures
#: (params, results), in this order before the memory:
#: trap(status) never returns; acquire(handle) -> status makes a buffer CPU-current; gc_begin(import
#: position, handle, offset, kind, mutable, array offset, array length, count) -> (status, address)
#: checks a GC transfer, gc_end(import position, handle, offset, count) -> status records it.
HOOK_MODULE = "wagogpu"
HOOK_SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "trap": (("i32",), ()),
    "acquire": (("i32",), ("i32",)),
    "gc_begin": (("i32",) * 8, ("i32", "i32")),
    "gc_end": (("i32",) * 4, ("i32",)),
}
GC_PROCEED = -1  # gc_begin's status meaning "checks passed, move the elements"

# GC array storage kinds, as classified by the adapter and passed to gc_begin.
GC_NULL = 0
GC_OTHER = 255  # not an array of a numeric type we know (struct, i31, ref-typed array, ...)


@dataclass(frozen=True)
class AccessOps:
    """How one element type is loaded, stored and laid out in the accessor memory."""

    load: str
    store: str
    size_log2: int
    scalar: str
    gc_kind: str  # GC array storage type accepted for transfers (docs/design/abi.md §1.2)
    gc_get: str  # array.get variant for that storage
    gc_load: str  # memory load for copying into an array of that storage
    gc_store: str  # memory store for copying out of such an array


_STORAGE = {  # gc storage -> (array.get, memory load, memory store, bytes)
    "i8": ("array.get_u", "i32.load8_u", "i32.store8"),
    "i16": ("array.get_u", "i32.load16_u", "i32.store16"),
    "i32": ("array.get", "i32.load", "i32.store"),
    "i64": ("array.get", "i64.load", "i64.store"),
    "f32": ("array.get", "f32.load", "f32.store"),
    "f64": ("array.get", "f64.load", "f64.store"),
}
GC_KINDS = tuple(_STORAGE)  # kind code = index + 1

# F16 travels as binary16 bits in memory and as an f32 to the guest: its row's load and store
# convert through the helpers below.
_HALF_LOAD = "\n    call $half_to_f32\n    f32.reinterpret_i32"
_HALF_STORE = "i32.reinterpret_f32\n    call $f32_to_half\n    "


def _ops(info: TypeInfo) -> AccessOps:
    """An element type's accessor code, from its ABI row; the GC storage is the stored form's."""
    kind = info.wasm_load.split(".")[0] if info.stored_bytes >= 4 else f"i{8 * info.stored_bytes}"
    load, store = info.wasm_load, info.wasm_store
    if info.half:
        load, store = load + _HALF_LOAD, _HALF_STORE + store
    return AccessOps(load, store, info.stored_bytes.bit_length() - 1, info.scalar, kind, *_STORAGE[kind])


OPS: dict[ElementType, AccessOps] = {t: _ops(info) for t, info in TYPE_INFO.items()}


def gc_kind_code(element_type: ElementType) -> int:
    return GC_KINDS.index(OPS[element_type].gc_kind) + 1


_F16_HELPERS = """
  ;; binary16 bits -> f32 bits (docs/design/abi.md §5.3): every NaN -> 0x7fc00000, subnormals normalised.
  (func $half_to_f32 (param $h i32) (result i32)
    (local $s i32) (local $e i32) (local $m i32)
    (local.set $s (i32.shl (i32.and (local.get $h) (i32.const 0x8000)) (i32.const 16)))
    (local.set $e (i32.and (i32.shr_u (local.get $h) (i32.const 10)) (i32.const 31)))
    (local.set $m (i32.and (local.get $h) (i32.const 0x3ff)))
    (if (i32.eq (local.get $e) (i32.const 31)) (then
      (if (local.get $m) (then (return (i32.const 0x7fc00000))))
      (return (i32.or (local.get $s) (i32.const 0x7f800000)))))
    (if (i32.eqz (local.get $e)) (then
      (if (i32.eqz (local.get $m)) (then (return (local.get $s))))
      (local.set $e (i32.const 113))
      (loop $norm
        (if (i32.eqz (i32.and (local.get $m) (i32.const 0x400))) (then
          (local.set $m (i32.shl (local.get $m) (i32.const 1)))
          (local.set $e (i32.sub (local.get $e) (i32.const 1)))
          (br $norm))))
      (return (i32.or (i32.or (local.get $s) (i32.shl (local.get $e) (i32.const 23)))
                      (i32.shl (i32.and (local.get $m) (i32.const 0x3ff)) (i32.const 13))))))
    (i32.or (i32.or (local.get $s) (i32.shl (i32.add (local.get $e) (i32.const 112)) (i32.const 23)))
            (i32.shl (local.get $m) (i32.const 13))))

  ;; f32 bits -> binary16 bits, round to nearest even; every NaN -> 0x7e00.
  (func $f32_to_half (param $x i32) (result i32)
    (local $s i32) (local $e i32) (local $m i32) (local $k i32) (local $v i32) (local $r i32) (local $half i32)
    (local.set $s (i32.and (i32.shr_u (local.get $x) (i32.const 16)) (i32.const 0x8000)))
    (local.set $e (i32.and (i32.shr_u (local.get $x) (i32.const 23)) (i32.const 255)))
    (local.set $m (i32.and (local.get $x) (i32.const 0x7fffff)))
    (if (i32.eq (local.get $e) (i32.const 255)) (then
      (if (local.get $m) (then (return (i32.const 0x7e00))))
      (return (i32.or (local.get $s) (i32.const 0x7c00)))))
    (if (i32.gt_u (local.get $e) (i32.const 142)) (then (return (i32.or (local.get $s) (i32.const 0x7c00)))))
    (if (i32.lt_u (local.get $e) (i32.const 102)) (then (return (local.get $s))))
    (if (i32.lt_u (local.get $e) (i32.const 113)) (then
      (local.set $m (i32.or (local.get $m) (i32.const 0x800000)))
      (local.set $k (i32.sub (i32.const 126) (local.get $e)))
      (local.set $v (i32.shr_u (local.get $m) (local.get $k)))
      (local.set $r (i32.and (local.get $m) (i32.sub (i32.shl (i32.const 1) (local.get $k)) (i32.const 1))))
      (local.set $half (i32.shl (i32.const 1) (i32.sub (local.get $k) (i32.const 1))))
      (if (i32.or (i32.gt_u (local.get $r) (local.get $half))
                  (i32.and (i32.eq (local.get $r) (local.get $half)) (i32.and (local.get $v) (i32.const 1))))
        (then (local.set $v (i32.add (local.get $v) (i32.const 1)))))
      (return (i32.or (local.get $s) (local.get $v)))))
    (local.set $v (i32.or (i32.shl (i32.sub (local.get $e) (i32.const 112)) (i32.const 10))
                          (i32.shr_u (local.get $m) (i32.const 13))))
    (local.set $r (i32.and (local.get $m) (i32.const 0x1fff)))
    (if (i32.or (i32.gt_u (local.get $r) (i32.const 0x1000))
                (i32.and (i32.eq (local.get $r) (i32.const 0x1000)) (i32.and (local.get $v) (i32.const 1))))
      (then (local.set $v (i32.add (local.get $v) (i32.const 1)))))
    (i32.or (local.get $s) (local.get $v)))
  (func (export "half_to_f32") (param i32) (result i32) (call $half_to_f32 (local.get 0)))
  (func (export "f32_to_half") (param i32) (result i32) (call $f32_to_half (local.get 0)))
"""


_TYPE, _LENGTH, _PTR, _FLAGS, _VERSION, _DIRTY_START, _DIRTY_END = (
    RECORD_OFFSETS[name] for name in ("type", "length", "ptr", "flags", "version", "dirty_start", "dirty_end"))
assert _TYPE == 0  # the type check loads the record's first word


def _trap(status: Status) -> str:
    return f"(call $trap (i32.const {int(status)})) (unreachable)"


def _checked_address(type_id: int, size_log2: int) -> str:
    """Inline check order of docs/design/abi.md §2.13 steps 1-6, leaving the element's address in $a.

    Inlined (not a helper call) because it runs once per element of every CPU fallback loop.
    """
    return f"""
    (if (i32.load (i32.const {STATE_OFFSET})) (then {_trap(Status.INVALID_STATE)}))
    (if (i32.eqz (local.get $h)) (then {_trap(Status.INVALID_HANDLE)}))
    (local.set $i (i32.and (local.get $h) (i32.const {HASH_ENTRIES - 1})))
    (block $found
      (loop $probe
        (local.set $k (i32.load offset={HASH_OFFSET} (i32.shl (local.get $i) (i32.const 3))))
        (br_if $found (i32.eq (local.get $k) (local.get $h)))
        (if (i32.eqz (local.get $k)) (then {_trap(Status.INVALID_HANDLE)}))
        (local.set $i (i32.and (i32.add (local.get $i) (i32.const 1)) (i32.const {HASH_ENTRIES - 1})))
        (br $probe)))
    (local.set $r (i32.add (i32.const {RECORDS_OFFSET})
      (i32.shl (i32.load offset={HASH_OFFSET + 4} (i32.shl (local.get $i) (i32.const 3))) (i32.const 5))))
    (if (i32.ne (i32.load (local.get $r)) (i32.const {type_id})) (then {_trap(Status.TYPE_MISMATCH)}))
    (if (i32.ge_u (local.get $idx) (i32.load offset={_LENGTH} (local.get $r))) (then {_trap(Status.INVALID_RANGE)}))
    (if (i32.ne (i32.and (i32.load offset={_FLAGS} (local.get $r)) (i32.const {CPU_CURRENT | LOST})) (i32.const {CPU_CURRENT}))
      (then
        (local.set $k (call $acquire (local.get $h)))
        (if (local.get $k) (then (call $trap (local.get $k)) (unreachable)))))
    (local.set $a (i32.add (i32.load offset={_PTR} (local.get $r)) (i32.shl (local.get $idx) (i32.const {size_log2}))))"""


_LOCALS = "(local $i i32) (local $k i32) (local $r i32) (local $a i32) (local $f i32)"

# After a store: version += 1 and the GPU copy becomes stale, widening the dirty interval (docs/design/abi.md §4.5).
_MARK_WRITTEN = f"""
    (i64.store offset={_VERSION} (local.get $r) (i64.add (i64.load offset={_VERSION} (local.get $r)) (i64.const 1)))
    (local.set $f (i32.load offset={_FLAGS} (local.get $r)))
    (if (i32.and (local.get $f) (i32.const {GPU_CURRENT}))
      (then
        (i32.store offset={_FLAGS} (local.get $r)
          (i32.or (i32.and (local.get $f) (i32.const {~GPU_CURRENT & 0xFFFFFFFF})) (i32.const {DIRTY})))
        (i32.store offset={_DIRTY_START} (local.get $r) (local.get $idx))
        (i32.store offset={_DIRTY_END} (local.get $r) (i32.add (local.get $idx) (i32.const 1))))
      (else
        (if (i32.and (local.get $f) (i32.const {DIRTY}))
          (then
            (if (i32.lt_u (local.get $idx) (i32.load offset={_DIRTY_START} (local.get $r)))
              (then (i32.store offset={_DIRTY_START} (local.get $r) (local.get $idx))))
            (if (i32.ge_u (local.get $idx) (i32.load offset={_DIRTY_END} (local.get $r)))
              (then (i32.store offset={_DIRTY_END} (local.get $r) (i32.add (local.get $idx) (i32.const 1)))))))))"""


def _scalar_functions() -> str:
    out = []
    for t, ops in OPS.items():
        name = t.name
        assert IMPORTS_BY_NAME[f"readBuffer{name}"].results == (ops.scalar,)
        out.append(f"""
  (func (export "readBuffer{name}") (param $h i32) (param $idx i32) (result {ops.scalar}) {_LOCALS}
    {_checked_address(int(t), ops.size_log2)}
    (local.get $a)
    {ops.load})""")
        out.append(f"""
  (func (export "writeBuffer{name}") (param $h i32) (param $idx i32) (param $v {ops.scalar}) {_LOCALS}
    {_checked_address(int(t), ops.size_log2)}
    (local.get $a)
    (local.get $v)
    {ops.store}
    {_MARK_WRITTEN})""")
    return "".join(out)


def _gc_types() -> str:
    rows = []
    for kind in GC_KINDS:
        rows.append(f"  (type $a_{kind}_m (array (mut {kind})))")
        rows.append(f"  (type $a_{kind}_c (array {kind}))")
    return "\n".join(rows)


def _gc_functions() -> str:
    """setBufferGC/copyBufferGC: classify the anyref, let Python check and prepare, move elements."""
    classify = []
    for code, kind in enumerate(GC_KINDS, start=1):
        for mut, suffix in ((1, "m"), (0, "c")):
            classify.append(f"""
      (if (ref.test (ref $a_{kind}_{suffix}) (local.get $arr)) (then
        (local.set $kind (i32.const {code})) (local.set $mut (i32.const {mut}))
        (local.set $len (array.len (ref.cast (ref $a_{kind}_{suffix}) (local.get $arr))))))""")
    classify_text = "".join(classify)
    out = []
    for opcode, name in enumerate(GC_IMPORTS):  # gc_begin learns which import by its position
        op = "set" if name.startswith("set") else "copy"
        moves = []
        for code, kind in enumerate(GC_KINDS, start=1):
            get, load, store = _STORAGE[kind]
            width = {"i8": 0, "i16": 1, "i32": 2, "f32": 2, "i64": 3, "f64": 3}[kind]
            suffixes = ("m", "c") if op == "set" else ("m",)  # copy into immutable is refused in Python
            for suffix in suffixes:
                if op == "set":
                    body = (f"({store} (i32.add (local.get $addr) (i32.shl (local.get $j) (i32.const {width}))) "
                            f"({get} $a_{kind}_{suffix} (local.get $ref_{kind}_{suffix}) "
                            f"(i32.add (local.get $aoff) (local.get $j))))")
                else:
                    body = (f"(array.set $a_{kind}_{suffix} (local.get $ref_{kind}_{suffix}) "
                            f"(i32.add (local.get $aoff) (local.get $j)) "
                            f"({load} (i32.add (local.get $addr) (i32.shl (local.get $j) (i32.const {width})))))")
                moves.append(f"""
      (if (i32.and (i32.eq (local.get $kind) (i32.const {code})) (i32.eq (local.get $mut) (i32.const {1 if suffix == 'm' else 0})))
        (then
          (local.set $ref_{kind}_{suffix} (ref.cast (ref $a_{kind}_{suffix}) (local.get $arr)))
          (local.set $j (i32.const 0))
          (loop $move
            {body}
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $move (i32.lt_u (local.get $j) (local.get $n))))))""")
        ref_locals = " ".join(
            f"(local $ref_{kind}_{s} (ref null $a_{kind}_{s}))"
            for kind in GC_KINDS for s in (("m", "c") if op == "set" else ("m",)))
        assert IMPORTS_BY_NAME[name].params == ("i32", "i32", "anyref", "i32", "i32")
        out.append(f"""
  (func (export "{name}") (param $h i32) (param $off i32) (param $arr anyref) (param $aoff i32) (param $n i32) (result i32)
    (local $kind i32) (local $mut i32) (local $len i32) (local $st i32) (local $addr i32) (local $j i32) {ref_locals}
    (local.set $kind (i32.const {GC_NULL}))
    (if (i32.eqz (ref.is_null (local.get $arr))) (then
      (local.set $kind (i32.const {GC_OTHER})){classify_text}))
    (call $gc_begin (i32.const {opcode}) (local.get $h) (local.get $off) (local.get $kind) (local.get $mut)
                    (local.get $aoff) (local.get $len) (local.get $n))
    (local.set $addr)
    (local.set $st)
    (if (i32.ne (local.get $st) (i32.const {GC_PROCEED})) (then (return (local.get $st))))
    {"".join(moves)}
    (call $gc_end (i32.const {opcode}) (local.get $h) (local.get $off) (local.get $n)))""")
    return "".join(out)


def _hook_imports() -> str:
    rows = []
    for name, (params, results) in HOOK_SIGNATURES.items():
        p = f" (param {' '.join(params)})" if params else ""
        r = f" (result {' '.join(results)})" if results else ""
        rows.append(f'  (import "{HOOK_MODULE}" "{name}" (func ${name}{p}{r}))')
    return "\n".join(rows)


def accessor_wat(shared_pages: int = 0) -> str:
    """The accessor module's WAT text; compiled once per Host. `shared_pages`: the memory is a shared
    one of at most that many pages (CPU kernels on several threads reach it from several stores)."""
    memory = f"(memory 1 {shared_pages} shared)" if shared_pages else "(memory 1)"
    return f"""(module
{_gc_types()}
{_hook_imports()}
  (import "{HOOK_MODULE}" "memory" {memory})
  (func (export "getBuffer") (param $s i32) (result i32) (local $h i32)
    (if (i32.load (i32.const {STATE_OFFSET})) (then {_trap(Status.INVALID_STATE)}))
    (if (i32.ge_u (local.get $s) (i32.const {SLOT_COUNT})) (then {_trap(Status.INVALID_BINDING)}))
    (local.set $h (i32.load offset={SLOTS_OFFSET} (i32.shl (local.get $s) (i32.const 2))))
    (if (i32.eqz (local.get $h)) (then {_trap(Status.INVALID_BINDING)}))
    (local.get $h))
{_F16_HELPERS}
{_scalar_functions()}
{_gc_functions()}
)
"""
