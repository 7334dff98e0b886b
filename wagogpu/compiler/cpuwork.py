"""The work queue of CPU kernels on several threads: a small Wasm driver, one module for every
kernel (it imports the kernel's run(start, end) and the shared buffer memory), over the words
abi.accessor keeps for it.

Why in Wasm: with the queue in Python every piece cost a thread a round trip through the GIL (to
take the next piece, and to return from the last), and those hand-offs are serial; so was waking
each thread for each dispatch. Here a pool thread calls `serve` once and stays in Wasm with the GIL
released: it waits on the generation word, takes chunks of each new generation with a
compare-and-swap, and waits again, until it has waited `linger` ns for nothing or the generation
is another kernel's. The dispatching thread calls `lead` once: it publishes a generation (a
futex wake for every waiting thread, no Python on theirs), takes chunks itself, and returns when
every element is done. Chunks can then be small (even balance for uneven work such as Mandelbrot's
rows) at no Python cost.

Words: `next` (u64: the generation in the high half, the next index in the low half, so a thread
still in an old generation can never take a chunk of a new one), `done` (elements finished in this
generation, which `lead` waits on), `stop` (set by the host when a thread trapped: the trapped call
cannot), `gen`, `kernel` (the tag of the kernel this generation runs; 0 recalls every thread),
`chunk`, and `end` (u64: generation and element count).
"""
from __future__ import annotations

from ..abi.accessor import (KERNEL_CHUNK_OFFSET, KERNEL_DONE_OFFSET, KERNEL_END_OFFSET, KERNEL_GEN_OFFSET,
                            KERNEL_NEXT_OFFSET, KERNEL_STOP_OFFSET, KERNEL_TAG_OFFSET)

__all__ = ["DRIVER_WAT", "RECALL_WAT", "SERVE_EXPORT", "LEAD_EXPORT", "RECALL_EXPORT", "RECALLED", "LINGERED"]

SERVE_EXPORT, LEAD_EXPORT, RECALL_EXPORT = "serve", "lead", "recall"
LINGERED, RECALLED = 0, 1  # what serve answers: waited `linger` ns for nothing / another kernel's generation
_MEMORY = '(import "wagogpu:cpu" "buffers" (memory 0 65536 shared))'
_WORDS = {"NEXT": KERNEL_NEXT_OFFSET, "DONE": KERNEL_DONE_OFFSET, "STOP": KERNEL_STOP_OFFSET,
          "GEN": KERNEL_GEN_OFFSET, "TAG": KERNEL_TAG_OFFSET, "CHUNK": KERNEL_CHUNK_OFFSET, "END": KERNEL_END_OFFSET}


def _fill(text: str) -> str:
    for name, offset in _WORDS.items():
        text = text.replace(f"@{name}", f"(i32.const {offset})")
    return text


DRIVER_WAT = _fill(f"""(module
  {_MEMORY}
  (import "wagogpu:cpu" "run" (func $run (param i32 i32)))
  ;; Every chunk of generation $g still to take, until stop is set.
  (func $chunks (param $g i32) (result i32) (local $tag i64) (local $end i32) (local $chunk i32) (local $old i64)
                               (local $s i32) (local $e i32) (local $n i32) (local $ran i32)
    (local.set $tag (i64.shl (i64.extend_i32_u (local.get $g)) (i64.const 32)))
    (local.set $old (i64.atomic.load @END))
    (if (i64.ne (i64.shr_u (local.get $old) (i64.const 32)) (i64.extend_i32_u (local.get $g))) (then (return (i32.const 0))))
    (local.set $end (i32.wrap_i64 (local.get $old)))
    (local.set $chunk (i32.atomic.load @CHUNK))
    (loop $next
      (if (i32.atomic.load @STOP) (then (return (local.get $ran))))
      (local.set $old (i64.atomic.load @NEXT))
      (if (i64.ne (i64.shr_u (local.get $old) (i64.const 32)) (i64.extend_i32_u (local.get $g)))
        (then (return (local.get $ran))))
      (local.set $s (i32.wrap_i64 (local.get $old)))
      (if (i32.ge_u (local.get $s) (local.get $end)) (then (return (local.get $ran))))
      (local.set $e (select (local.get $end) (i32.add (local.get $s) (local.get $chunk))
                            (i32.gt_u (local.get $chunk) (i32.sub (local.get $end) (local.get $s)))))
      (br_if $next (i64.ne (i64.atomic.rmw.cmpxchg @NEXT (local.get $old)
                                                   (i64.or (local.get $tag) (i64.extend_i32_u (local.get $e))))
                           (local.get $old)))
      (call $run (local.get $s) (local.get $e))
      (local.set $n (i32.sub (local.get $e) (local.get $s)))
      (local.set $ran (i32.add (local.get $ran) (local.get $n)))
      (if (i32.eq (i32.add (i32.atomic.rmw.add @DONE (local.get $n)) (local.get $n)) (local.get $end))
        (then (drop (memory.atomic.notify @DONE (i32.const -1)))))
      (br $next))
    (unreachable))
  ;; A pool thread: each generation from $first on whose tag is $tag, until $linger ns pass with
  ;; none (answers 0) or a generation is another tag's (1); $once: after the first one (0). Before
  ;; it waits on the futex it looks at the generation word $spins times (a futex wake costs the
  ;; woken thread tens of microseconds, the last of 15 more).
  (func (export "{SERVE_EXPORT}") (param $tag i32) (param $first i32) (param $linger i64) (param $once i32)
                                  (param $spins i32) (result i32) (local $seen i32) (local $g i32) (local $n i32)
    (local.set $seen (i32.sub (local.get $first) (i32.const 1)))
    (loop $wait
      (local.set $g (i32.atomic.load @GEN))
      (if (i32.eq (local.get $g) (local.get $seen))
        (then
          (if (i32.lt_u (local.get $n) (local.get $spins))
            (then (local.set $n (i32.add (local.get $n) (i32.const 1))) (br $wait)))
          (if (i32.eq (memory.atomic.wait32 @GEN (local.get $seen) (local.get $linger)) (i32.const 2))
            (then (if (i32.eq (i32.atomic.load @GEN) (local.get $seen)) (then (return (i32.const {LINGERED}))))))
          (br $wait)))
      (local.set $seen (local.get $g))
      (local.set $n (i32.const 0))
      (if (i32.ne (i32.atomic.load @TAG) (local.get $tag)) (then (return (i32.const {RECALLED}))))
      (drop (call $chunks (local.get $g)))
      (br_if $wait (i32.eqz (local.get $once))))
    (i32.const {LINGERED}))
  ;; The dispatching thread: publish a generation of $end elements in chunks of $chunk for $tag,
  ;; take chunks too, then wait (looking at stop every $join ns): once every element is done, the
  ;; elements this thread ran; -1 when stop was set.
  (func (export "{LEAD_EXPORT}") (param $tag i32) (param $end i32) (param $chunk i32) (param $join i64)
                                 (result i64) (local $g i32) (local $d i32) (local $ran i32)
    (local.set $g (i32.add (i32.atomic.load @GEN) (i32.const 1)))
    (i64.atomic.store @END (i64.or (i64.shl (i64.extend_i32_u (local.get $g)) (i64.const 32))
                                   (i64.extend_i32_u (local.get $end))))
    (i32.atomic.store @CHUNK (local.get $chunk))
    (i32.atomic.store @TAG (local.get $tag))
    (i32.atomic.store @DONE (i32.const 0))
    (i32.atomic.store @STOP (i32.const 0))
    (i64.atomic.store @NEXT (i64.shl (i64.extend_i32_u (local.get $g)) (i64.const 32)))
    (i32.atomic.store @GEN (local.get $g))
    (drop (memory.atomic.notify @GEN (i32.const -1)))
    (local.set $ran (call $chunks (local.get $g)))
    (loop $join
      (local.set $d (i32.atomic.load @DONE))
      (if (i32.eq (local.get $d) (local.get $end)) (then (return (i64.extend_i32_u (local.get $ran)))))
      (if (i32.atomic.load @STOP) (then (return (i64.const -1))))
      (drop (memory.atomic.wait32 @DONE (local.get $d) (local.get $join)))
      (br $join))
    (unreachable)))
""")

#: Sends every serving thread of one memory back to Python (a generation of tag 0, woken now).
RECALL_WAT = _fill(f"""(module
  {_MEMORY}
  (func (export "{RECALL_EXPORT}")
    (i32.atomic.store @TAG (i32.const 0))
    (drop (i32.atomic.rmw.add @GEN (i32.const 1)))
    (drop (memory.atomic.notify @GEN (i32.const -1)))))
""")
