"""Hypothesis fuzzer for the compilers (docs/design/compiler.md §4, docs/design/abi.md §9.2 case 23).

Properties, for every input:
  * compile_buffer_wgsl and compile_wgsl return a str or raise CompileError (exactly that type);
  * a buffer shader is at most 512 KiB;
  * inspect_module never raises and returns a ModuleContract;
  * each input finishes within --max-input-seconds.

Inputs: random bytes (bare and behind a valid header), random section soups, random kernels of the
GPU subset (tests/compiler/strategies.py) and byte mutations of those and of the fixtures.

    python fuzz/hypothesis_fuzz.py --minutes 10
    python fuzz/hypothesis_fuzz.py --executions 200000 --quiet

Its last line is `FUZZ-RESULT {json}` (fuzz/fuzz_result.py): the exact number of inputs checked.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE, os.path.join(ROOT, "tests", "compiler")):
    if path not in sys.path:
        sys.path.insert(0, path)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzz_result import FuzzResult  # noqa: E402
from strategies import mutations, subset_kernels  # noqa: E402
from wagogpu import (Access, BindingConfig, CompileError, ElementType, KernelConfig,  # noqa: E402
                     compile_buffer_wgsl, compile_wgsl)
from wagogpu.compiler import inspect_module  # noqa: E402
from wasmgen import HEADER, section, uleb  # noqa: E402

MAX_WGSL_BYTES = 512 * 1024  # one buffer kernel's WGSL (docs/design/compiler.md §3)

# The reference fuzzer's fixed config: twice, slot 0 F32 READ, slot 1 F32 WRITE.
TWICE = KernelConfig(1, "wago_gpu.kernel.twice", "wago_gpu.cpu.twice",
                     [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)])


@dataclass
class Stats:
    inputs: int = 0
    compiled: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    slowest: float = 0.0

    def line(self, seconds: float) -> str:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(self.rejected.items()))
        return (f"{self.inputs} inputs in {seconds:.1f} s ({self.inputs / max(seconds, 1e-9):.0f}/s), "
                f"{self.compiled} compiled, rejected: {kinds or 'none'}, slowest input {self.slowest * 1e3:.1f} ms")


class PropertyFailure(AssertionError):
    pass


def check_input(source: bytes, kernel: KernelConfig, stats: Stats, max_seconds: float,
                on_wgsl: Callable[[str], None] | None = None) -> None:
    """Run every compiler entry point on one input and check the fuzz properties."""
    t0 = time.perf_counter()
    stats.inputs += 1
    try:
        wgsl = compile_buffer_wgsl(source, kernel)
    except CompileError as e:
        if type(e) is not CompileError:
            raise PropertyFailure(f"a subclass escaped: {type(e).__name__}") from e
        stats.rejected[e.kind.name] = stats.rejected.get(e.kind.name, 0) + 1
    else:
        stats.compiled += 1
        if not isinstance(wgsl, str) or len(wgsl) > MAX_WGSL_BYTES:
            raise PropertyFailure("buffer shader missing or over the WGSL byte limit")
        if on_wgsl is not None:
            on_wgsl(wgsl)
    try:
        legacy = compile_wgsl(source, "kernel")
    except CompileError as e:
        if type(e) is not CompileError:
            raise PropertyFailure(f"a subclass escaped: {type(e).__name__}") from e
    else:
        if on_wgsl is not None:
            on_wgsl(legacy)
    contract = inspect_module(source, [kernel], kernel_export="kernel")
    if not isinstance(getattr(contract, "verified", None), bool):
        raise PropertyFailure("inspect_module returned no module contract")
    elapsed = time.perf_counter() - t0
    stats.slowest = max(stats.slowest, elapsed)
    if elapsed > max_seconds:
        raise PropertyFailure(f"one input took {elapsed:.2f} s (bound {max_seconds} s)")


def _section_soup() -> st.SearchStrategy[bytes]:
    """A header followed by random sections with plausible ids and random payloads."""
    one = st.tuples(st.sampled_from(list(range(14)) + [0, 0, 1, 2, 3, 7, 10, 200]),
                    st.binary(max_size=40)).map(lambda t: section(t[0], t[1]))
    return st.lists(one, max_size=8).map(lambda parts: HEADER + b"".join(parts))


def _counts() -> st.SearchStrategy[bytes]:
    """Sections that announce huge counts or sizes: the bounds must trip before any allocation."""
    big = st.sampled_from([16384, 16385, 2 ** 31, 2 ** 32 - 1])
    return st.tuples(st.sampled_from([1, 2, 3, 5, 7, 10]), big).map(
        lambda t: HEADER + section(t[0], uleb(t[1]) + b"\x60" * 8))


def inputs() -> st.SearchStrategy[tuple[bytes, KernelConfig]]:
    kernels = subset_kernels(max_statements=6, max_depth=3)
    valid = kernels.map(lambda p: (p.source, p.kernel))
    mutated = kernels.flatmap(lambda p: mutations(p.source).map(lambda b: (b, p.kernel)))
    raw = st.one_of(st.binary(max_size=256), st.binary(max_size=256).map(lambda b: HEADER + b),
                    _section_soup(), _counts()).map(lambda b: (b, TWICE))
    return st.one_of(raw, valid, mutated, mutated)


def run(seconds: float, max_input_seconds: float = 5.0, chunk: int = 100,
        on_wgsl: Callable[[str], None] | None = None, verbose: bool = False,
        executions: int | None = None) -> Stats:
    """Fuzz for about `seconds` or exactly `executions` inputs (whichever ends first), in chunks of
    `chunk` examples (fresh seeds each); raise PropertyFailure on the first failing input."""
    stats = Stats()
    deadline = time.monotonic() + seconds
    limit = executions if executions is not None else float("inf")

    def done() -> bool:
        return stats.inputs >= limit or time.monotonic() > deadline

    @settings(max_examples=chunk, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(inputs())
    def one(case: tuple[bytes, KernelConfig]) -> None:
        if done():
            return  # hypothesis still draws the rest of the chunk; those are not counted
        check_input(case[0], case[1], stats, max_input_seconds, on_wgsl)

    start = time.monotonic()
    while not done():
        one()
        if verbose:
            print(stats.line(time.monotonic() - start), flush=True)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None, help="how long to fuzz (default 1 without --executions)")
    parser.add_argument("--executions", type=int, default=None, help="stop after exactly this many inputs")
    parser.add_argument("--max-input-seconds", type=float, default=5.0, help="time bound per input")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    minutes = args.minutes if args.minutes is not None else (1.0 if args.executions is None else 1e9)
    t0 = time.monotonic()
    failures, outcome, stats = 0, "PASS", Stats()
    try:
        stats = run(minutes * 60, args.max_input_seconds, verbose=not args.quiet, executions=args.executions)
    except Exception as exc:  # the first failing input, already shrunk by hypothesis
        failures, outcome = 1, f"FAIL: {type(exc).__name__}: {exc}"
    seconds = time.monotonic() - t0
    print(outcome if failures else f"PASS: {stats.line(seconds)}")
    print(FuzzResult("hypothesis", stats.inputs, seconds, failures,
                     {"compiled": stats.compiled, "rejected": stats.rejected}).line(), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
