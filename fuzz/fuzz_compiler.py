"""atheris (libFuzzer) harness for the compilers (extra `fuzz`: pip install -e '.[fuzz]').

Every input goes through compile_buffer_wgsl (the reference fuzzer's twice config), compile_wgsl
and inspect_module. Anything but CompileError escaping, a shader over 512 KiB, or inspect_module
raising is a crash that libFuzzer reports and saves.

    python fuzz/fuzz_compiler.py -max_total_time=600 fuzz/corpus        # 10 minutes
    python fuzz/fuzz_compiler.py --write-seeds fuzz/corpus              # seed the corpus first
    python fuzz/fuzz_compiler.py -runs=200000 fuzz/corpus                # exactly 200,000 executions

libFuzzer's final statistics are always printed (-print_final_stats=1); the last line is
`FUZZ-RESULT {json}` (fuzz/fuzz_result.py) with libFuzzer's own count of executed inputs.

The module imports without atheris (tests call test_one_input directly).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (ROOT, HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # the harness stays importable; main() explains what is missing
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["wagogpu.compiler"]):
        import wagogpu.compiler  # noqa: F401 (instrumented: coverage guides the mutations)

from wagogpu import (Access, BindingConfig, CompileError, ElementType, KernelConfig,  # noqa: E402
                     compile_buffer_wgsl, compile_wgsl)
from fuzz_result import FuzzResult  # noqa: E402
from wagogpu.compiler import inspect_module  # noqa: E402

MAX_WGSL_BYTES = 512 * 1024  # one buffer kernel's WGSL (docs/design/compiler.md §3)

TWICE = KernelConfig(1, "wago_gpu.kernel.twice", "wago_gpu.cpu.twice",
                     [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)])


CHILD = "WAGOGPU_ATHERIS_CHILD"  # set in the process that runs libFuzzer (see main)
STAT_EXECUTED = "stat::number_of_executed_units:"


def test_one_input(data: bytes) -> None:
    try:
        wgsl = compile_buffer_wgsl(data, TWICE)
    except CompileError as e:
        if type(e) is not CompileError:
            raise
    else:
        if len(wgsl) > MAX_WGSL_BYTES:
            raise AssertionError("buffer shader over the WGSL byte limit")
    try:
        compile_wgsl(data, "kernel")
    except CompileError as e:
        if type(e) is not CompileError:
            raise
    if not isinstance(getattr(inspect_module(data, [TWICE], kernel_export="kernel"), "verified", None), bool):
        raise AssertionError("inspect_module returned no module contract")


def write_seeds(directory: str) -> int:
    """The reference's seeds (BufferWork, the truncated type section) plus our fixtures."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "compiler"))
    import fixtures  # noqa: PLC0415 (test helpers, only needed here)

    os.makedirs(directory, exist_ok=True)
    seeds = {
        "bufferwork.wasm": fixtures.bufferwork_wasm(),
        "buffers.wasm": fixtures.buffers_wasm(),
        "mandelbrot.wasm": fixtures.mandelbrot_wasm(),
        "twice-tm.wasm": fixtures.tm(fixtures.TWICE_BODY, kernel="twice"),
        "legacy-twice.wasm": fixtures.legacy_twice(),
        "legacy-heavy.wasm": fixtures.legacy_heavy(),
        "header.wasm": b"\x00asm\x01\x00\x00\x00",
        "unterminated-type-size.wasm": bytes.fromhex("0061736d0100000001ff"),
    }
    for name, data in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return len(seeds)


def _supervise(argv: list[str]) -> int:
    """Run libFuzzer in a child process and echo its output; libFuzzer ends that process without
    returning to Python, so only a parent can print the final FUZZ-RESULT line from its statistics."""
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv[1:]], stderr=subprocess.PIPE,
                             env={**os.environ, CHILD: "1"}, text=True, errors="replace")
    executions, crashed = 0, False
    assert child.stderr is not None
    for line in child.stderr:
        sys.stderr.write(line)
        if line.startswith(STAT_EXECUTED):
            executions = int(line[len(STAT_EXECUTED):])
        crashed = crashed or line.startswith(("==", "=== Uncaught Python exception"))
    rc = child.wait()
    failures = int(rc != 0 or crashed)
    print(FuzzResult("atheris", executions, time.monotonic() - started, failures, {"returncode": rc}).line(),
          flush=True)
    return rc


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[1] == "--write-seeds":
        print(f"wrote {write_seeds(argv[2])} seeds to {argv[2]}")
        return 0
    if atheris is None:
        print("atheris is not installed: pip install -e '.[fuzz]' (or use fuzz/hypothesis_fuzz.py)", file=sys.stderr)
        return 2
    if not any(a.startswith("-print_final_stats") for a in argv):
        argv = argv + ["-print_final_stats=1"]
    if os.environ.get(CHILD) != "1":
        return _supervise(argv)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
