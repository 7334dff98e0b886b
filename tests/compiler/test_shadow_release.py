"""The stack pointer restored inside control flow on a path that then returns (shadow.py
release_to_return): Zig's Debug early returns and the stack protector's epilogue. Anything else
that moves it inside control flow stays on the CPU. GPU runs: tests/host/test_kernel_memory_gpu.py."""
from __future__ import annotations

from test_calls import READ, SP, WRITE, compile_wat, refused

FRAME = "(local.set $p (i32.sub (global.get $sp) (i32.const 16))) (global.set $sp (local.get $p))"
RESTORE = "(global.set $sp (i32.add (local.get $p) (i32.const 16)))"
STORE = f"(i32.store offset=4 (local.get $p) {READ})"
EARLY = f"(if (i32.eqz (local.get $i)) (then {RESTORE} {{}} (return)))"
MOVED = "the stack pointer is moved inside control flow"
HELPER = "(func $h (param i32) (result i32) (local.get 0))"


def kernel(body: str) -> str:
    return FRAME + STORE + body + WRITE.format("(i32.load offset=4 (local.get $p))") + RESTORE


def wat(body: str) -> str:
    return compile_wat(kernel(body), SP + HELPER)


def no(body: str) -> str:
    return refused(kernel(body), SP + HELPER)


def test_an_early_return_that_restores_the_stack_pointer_is_accepted():
    assert "slot2[index]" in wat(EARLY.format(""))
    # the frame is the function's again after the path that released it
    assert "slot2[index]" in wat(EARLY.format("") + "(i32.store offset=8 (local.get $p) (i32.const 1))")


def test_a_released_path_may_not_reach_a_join_or_call():
    assert no(f"(if (i32.eqz (local.get $i)) (then {RESTORE}))") == MOVED  # falls through to the if's end
    assert no(f"(block $b (br_if $b (local.get $i)) {RESTORE} (br $b))") == MOVED  # branches to a block
    assert no(EARLY.format("(drop (call $h (i32.const 1)))")) == MOVED
    # and may not use the frame it released
    assert "outside the kernel's frame" in no(EARLY.format("(drop (i32.load offset=4 (local.get $p)))"))


def test_only_the_entry_value_may_be_set_inside_control_flow():
    moved = "(if (i32.eqz (local.get $i)) (then (global.set $sp (i32.sub (local.get $p) (i32.const 16))) (return)))"
    assert no(moved) == MOVED
