"""atheris (libFuzzer) harness for the compilers (extra `fuzz`: pip install -e '.[fuzz]').

Every input goes through compile_buffer_wgsl (the reference fuzzer's twice config), compile_wgsl
and inspect_module. Anything but CompileError escaping, a shader over 512 KiB, or inspect_module
raising is a crash that libFuzzer reports and saves.

    python fuzz/fuzz_compiler.py -max_total_time=600 fuzz/corpus        # 10 minutes
    python fuzz/fuzz_compiler.py --write-seeds fuzz/corpus              # seed the corpus first

The module imports without atheris (tests call test_one_input directly).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # the harness stays importable; main() explains what is missing
    atheris = None

if atheris is not None:
    with atheris.instrument_imports():
        from wagogpu.compiler import (CompileError, ModuleContract, compile_buffer_wgsl, compile_wgsl,
                                      inspect_module)
        from wagogpu.compiler import reader as lim
else:
    from wagogpu.compiler import CompileError, ModuleContract, compile_buffer_wgsl, compile_wgsl, inspect_module
    from wagogpu.compiler import reader as lim

from wagogpu.abi.table import Access, ElementType  # noqa: E402
from wagogpu.config import BindingConfig, KernelConfig  # noqa: E402

TWICE = KernelConfig(1, "wago_gpu.kernel.twice", "wago_gpu.cpu.twice",
                     [BindingConfig(0, ElementType.F32, Access.READ), BindingConfig(1, ElementType.F32, Access.WRITE)])


def test_one_input(data: bytes) -> None:
    try:
        wgsl = compile_buffer_wgsl(data, TWICE)
    except CompileError as e:
        if type(e) is not CompileError:
            raise
    else:
        if len(wgsl) > lim.MAX_WGSL_BYTES:
            raise AssertionError("buffer shader over the WGSL byte limit")
    try:
        compile_wgsl(data, "kernel")
    except CompileError as e:
        if type(e) is not CompileError:
            raise
    if not isinstance(inspect_module(data, [TWICE], kernel_export="kernel"), ModuleContract):
        raise AssertionError("inspect_module returned something else")


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


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[1] == "--write-seeds":
        print(f"wrote {write_seeds(argv[2])} seeds to {argv[2]}")
        return 0
    if atheris is None:
        print("atheris is not installed: pip install -e '.[fuzz]' (or use fuzz/hypothesis_fuzz.py)", file=sys.stderr)
        return 2
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
