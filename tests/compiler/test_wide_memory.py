"""What stays on the CPU among the i64 and f64 loads and stores (memaccess.py, shadow.py); the
GPU runs against wasmtime are in tests/host/test_wide_memory_gpu.py."""
from __future__ import annotations

from test_calls import SP, WRITE, compile_wat, refused

FRAME = "(local.set $p (i32.sub (global.get $sp) (i32.const 16))) (global.set $sp (local.get $p))"
RESTORE = "(global.set $sp (i32.add (local.get $p) (i32.const 16)))"
DATA = '(memory 1) (data (i32.const 64) "\\01\\02\\03\\04\\05\\06\\07\\08")'


def no(body: str, extra: str = SP) -> str:
    return refused(body, extra)


def test_stores_to_guest_memory_stay_on_the_cpu():
    assert no("(i64.store (i32.const 64) (i64.const 1))", DATA).startswith("i64.store to guest memory")
    assert no("(f64.store (i32.const 64) (f64.const 1))", DATA).startswith("f64.store to guest memory")
    assert no("(i64.store8 (i32.const 64) (i64.const 1))", DATA).startswith("i64.store8 to guest memory")


def test_a_narrow_i64_load_extends_as_wasm_does():
    signed = compile_wat(WRITE.format("(i32.wrap_i64 (i64.shr_u (i64.load8_s (i32.const 64)) (i64.const 32)))"),
                         DATA)
    assert "i64_from_i32(" in signed
    unsigned = compile_wat(WRITE.format("(i32.wrap_i64 (i64.load32_u (i32.const 64)))"), DATA)
    assert "vec2<u32>(" in unsigned and "i64_from_i32(" not in unsigned


def test_frame_slots_of_8_bytes_keep_their_rules():
    wide = FRAME + "(i32.store offset=8 (local.get $p) (i32.const 1))"
    assert "loaded wider" in no(wide + WRITE.format("(i32.wrap_i64 (i64.load offset=8 (local.get $p)))") + RESTORE)
    # the high word of an 8-byte slot is not a slot of its own
    split = FRAME + "(i64.store offset=8 (local.get $p) (i64.const 1))"
    assert "overlap" in no(split + WRITE.format("(i32.load offset=12 (local.get $p))") + RESTORE)
    # a narrow store into an 8-byte slot that some path has not stored
    maybe = (FRAME + "(if (local.get $i) (then (i64.store offset=8 (local.get $p) (i64.const 1))))"
             "(i32.store8 offset=8 (local.get $p) (i32.const 1))")
    assert no(maybe + WRITE.format("(i32.load offset=8 (local.get $p))") + RESTORE) == \
        "a narrow store into a stack slot some path has not stored"
    assert "slot2[index]" in compile_wat(split + WRITE.format("(i32.load offset=8 (local.get $p))") + RESTORE, SP)
