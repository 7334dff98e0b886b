"""Locals that control flow assigns a stack address or a buffer handle (addressvars.py): the var
keeps no such value, so a kernel is GPU-eligible exactly when no read of the var can see one. The
GPU runs are in tests/host/test_kernel_memory_gpu.py."""
from __future__ import annotations

from test_calls import READ, SP, WRITE, compile_wat, refused

FRAME = "(local.set $p (i32.sub (global.get $sp) (i32.const 16))) (global.set $sp (local.get $p))"
RESTORE = "(global.set $sp (i32.add (local.get $p) (i32.const 16)))"
LOCALS = "(local $p i32) (local $q i32)"
IN_VAR = "stack address in a local that control flow assigns"
# musl's FORCE_EVAL: on one path a value is stored to a volatile slot and its address left in $q
FORCE_EVAL = ("(if (i32.eqz (local.get $i)) (then (i32.store offset=12 (local.get $p) (i32.const 7))"
              " (local.set $q (i32.add (local.get $p) (i32.const 12)))) (else (local.set $q (i32.const 5))))")


def wat(body: str) -> str:
    return compile_wat(FRAME + body + RESTORE, SP, LOCALS)


def no(body: str) -> str:
    return refused(FRAME + body + RESTORE, SP, locals_=LOCALS)


def test_an_address_never_read_after_the_join_is_accepted():
    assert "slot2[index]" in wat(FORCE_EVAL + WRITE.format(READ))


def test_a_read_after_the_join_is_refused():
    assert no(FORCE_EVAL + WRITE.format("(local.get $q)")) == IN_VAR


def test_the_address_is_used_on_its_own_path():
    body = ("(if (i32.eqz (local.get $i)) (then (local.set $q (i32.add (local.get $p) (i32.const 12)))"
            " (i32.store (local.get $q) (i32.const 7))" + WRITE.format("(i32.load offset=12 (local.get $p))") + "))")
    assert "slot2[index]" in wat(body)


def test_a_path_that_leaves_by_a_branch_carries_no_mark_past_it():
    """The address is set only on a path that branches out of the block: after the inner block
    $q is the number the other path stored."""
    body = ("(block $out (block $in (br_if $in (i32.eqz (local.get $i)))"
            " (local.set $q (i32.add (local.get $p) (i32.const 12))) (br $out))"
            " (local.set $q (i32.const 9))" + WRITE.format("(local.get $q)") + ")")
    assert "slot2[index]" in wat(body)
    # ... but a branch to the block that the read follows brings it along
    body = ("(block $out (br_if $out (i32.eqz (local.get $i)))"
            " (local.set $q (i32.add (local.get $p) (i32.const 12))))" + WRITE.format("(local.get $q)"))
    assert no(body) == IN_VAR


def test_a_back_edge_refuses_reads_it_repeats():
    loop = ("(loop $l (local.set $q (i32.add (local.get $q) (i32.const 1)))"
            " (if (i32.eqz (local.get $i)) (then (local.set $q (i32.add (local.get $p) (i32.const 12)))"
            " (br $l))))")
    assert no(loop) == IN_VAR  # the read at the loop's head sees the address on the next pass
    later = ("(loop $l (if (i32.eqz (local.get $i)) (then (local.set $q (i32.add (local.get $p) (i32.const 12)))"
             " (br $l))) (local.set $q (i32.add (local.get $q) (i32.const 1))))")
    assert no(later) == IN_VAR  # a read after the branch is reached through the loop's head too
    assert "slot2[index]" in wat("(loop $l (if (i32.eqz (local.get $i)) (then (local.set $q (i32.add (local.get $p)"
                                 " (i32.const 12))))))" + WRITE.format(READ))


def test_a_straight_line_assignment_gives_the_local_a_value_again():
    body = FORCE_EVAL + "(local.set $q (i32.const 3))" + WRITE.format("(local.get $q)")
    assert "slot2[index]" in wat(body)


def test_an_if_without_else_keeps_the_entry_paths_marks():
    body = ("(if (local.get $i) (then (local.set $q (i32.add (local.get $p) (i32.const 12)))))"
            "(if (local.get $i) (then (local.set $q (i32.const 1))))" + WRITE.format("(local.get $q)"))
    assert no(body) == IN_VAR


def test_a_mark_brought_back_to_a_loop_head_reaches_the_loop_end():
    """One pass sets the address and branches back, the next falls out of the loop: the var still
    holds what the first pass left there, so a read after the loop is refused."""
    body = ("(loop $l (if (i32.eqz (local.get $i)) (then (local.set $q (i32.add (local.get $p) (i32.const 12)))"
            " (br $l))))" + WRITE.format("(local.get $q)"))
    assert no(body) == IN_VAR


HANDLE = "(call $getBuffer (i32.const 2))"
PUT = "(call $writeBufferI32 (local.get $q) (local.get $i) (i32.const 1))"


def test_a_handle_set_on_a_path_is_used_after_nested_blocks_on_that_path():
    """-O0: the handle loaded into a local inside a branch, used after an inner block closes."""
    body = (f"(block $b (br_if $b (local.get $i)) (local.set $q {HANDLE})"
            f" (block $inner (br_if $inner (i32.eqz (local.get $i)))) {PUT})")
    assert "slot2[index]" in wat(body)


def test_paths_that_agree_on_the_record_keep_it_and_others_conflict():
    both = f"(if (local.get $i) (then (local.set $q {HANDLE})) (else (local.set $q {HANDLE}))) {PUT}"
    assert "slot2[index]" in wat(both)
    one = f"(if (local.get $i) (then (local.set $q {HANDLE})) (else (local.set $q (i32.const 2)))) {PUT}"
    assert no(one) == "buffer handle in a local that control flow assigns"


def test_a_back_edge_that_changes_a_record_the_body_read_is_refused():
    body = (f"(if (local.get $i) (then (local.set $q {HANDLE})"
            f" (loop $l {PUT} (local.set $q (i32.const 0)) (br_if $l (i32.eqz (local.get $i))))))")
    assert no(body) == "buffer handle in a local that control flow assigns"
