"""Translate time of the largest inlined corpus kernel, and the dispatch cost of a guest-memory
snapshot (first dispatch, then cached: the bytes compared and found equal; changed: written anew).

    python3 -m bench.inline_snapshot [--allow-software-adapter] [--repeat N]

Prints JSONL, one record per figure, naming the adapter. Cold (first dispatch: pipeline build,
snapshot upload) and warm figures are separate records; every GPU dispatch is checked (status 0,
outcome GPU, the right answer) outside the timer. Also the raw cost of the exact comparison
(memcmp) at 64 KiB and 1 MiB.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu.buffers.snapshots import same_bytes
from wagogpu.compiler.buffer import lower_kernel
from wagogpu.compiler.decoder import decode_module

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"
TABLE_AT = 8192
KERNEL = KernelConfig(1, "wago_gpu.kernel.k", "wago_gpu.cpu.k",
                      [BindingConfig(0, ElementType.I32, Access.READ), BindingConfig(2, ElementType.I32, Access.WRITE)])


def emit(**record: object) -> None:
    print(json.dumps(record), flush=True)


def translate(repeat: int) -> None:
    """The corpus kernel whose WGSL is largest among the eligible ones, lowered `repeat` times."""
    from tests.corpus.cells import CELLS

    best = (0, None, None, None)
    for cell in CELLS:
        data = cell.path().read_bytes()
        module = decode_module(data)
        for kid, kernel in cell.kernels():
            try:
                size = len(lower_kernel(module, kernel.config(kid)).wgsl)
            except Exception:  # noqa: BLE001 - stays on the CPU: not a candidate
                continue
            if size > best[0]:
                best = (size, cell, module, (kid, kernel))
    size, cell, module, (kid, kernel) = best
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        lower_kernel(module, kernel.config(kid))
        times.append(time.perf_counter() - t0)
    emit(bench="translate_largest_inlined", cell=cell.label, kernel=kernel.name, wgsl_bytes=size,
         median_ms=1e3 * float(np.median(times)), min_ms=1e3 * min(times), repeat=repeat)


def compare(repeat: int) -> None:
    for size in (64 * 1024, 1024 * 1024):
        a = np.random.default_rng(1).integers(0, 255, size, dtype=np.uint8)
        b = a.copy()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            equal = same_bytes(a.ctypes.data, b)
            times.append(time.perf_counter() - t0)
            assert equal
        emit(bench="snapshot_compare", bytes=size, median_us=1e6 * float(np.median(times)))


def keys_at(table_words: int) -> int:
    return TABLE_AT + 4 * table_words


def pages(table_words: int) -> int:
    return (keys_at(table_words) + 8 * (1 << 16)) // 65536 + 1  # keys, then the answer read back


def kernel_text(table_words: int) -> str:
    return f"""
  (func (export "wago_gpu.kernel.k") (param $i i32)
    (call $writeBufferI32 (call $getBuffer (i32.const 2)) (local.get $i)
      (i32.load offset={TABLE_AT} (i32.shl (i32.and (call $readBufferI32 (call $getBuffer (i32.const 0)) (local.get $i))
        (i32.const {table_words - 1})) (i32.const 2)))))
  (func (export "wago_gpu.cpu.k") (param i32))"""


def snapshot(args: argparse.Namespace) -> None:
    for table_words in (16 * 1024, 256 * 1024):  # 64 KiB and 1 MiB of table
        host = Host(Config(kernels=[KERNEL], allow_software_adapter=args.allow_software_adapter))
        try:
            _snapshot_runs(host, table_words, args.repeat)
        finally:
            host.close()


def _snapshot_runs(host: Host, table_words: int, repeat: int) -> None:
    from tests.gpu_support import Guest

    from tests.guests import abi_module

    g = Guest.__new__(Guest)  # the test guest, with a memory large enough for the table
    g.host = host
    g.inst = host.instantiate(host.compile(abi_module(kernels=kernel_text(table_words),
                                                      memory=f'(memory (export "memory") {pages(table_words)})')))
    n = 1 << 16
    table = np.arange(table_words, dtype=np.uint32) * 3
    g.inst.write_memory(TABLE_AT, table.tobytes())
    src, dst = g.create(ElementType.I32, n), g.create(ElementType.I32, n)
    keys = (np.arange(n, dtype=np.uint32) * 7919) % table_words
    assert g.set_raw(src, keys.tobytes(), n, guest=keys_at(table_words)) == 0
    g.bind(src, dst, slots=[0, 2])
    adapter = host.snapshot().device
    for label, mutate in (("first", False), ("cached", False), ("changed", True)):
        times = []
        for _ in range(1 if label == "first" else repeat):
            if mutate:
                table[0] += 1
                g.inst.write_memory(TABLE_AT, table[:1].tobytes())
            t0 = time.perf_counter()
            status = g.dispatch(1, n)
            times.append(time.perf_counter() - t0)
            assert status == 0 and g.last.outcome == "GPU", (status, g.last.reason)
        back = keys_at(table_words) + 4 * n  # the answer, checked outside the timer
        assert g.inst.call("copyBuffer32", dst, 0, 0, back, n) == 0
        out = np.frombuffer(g.inst.read_memory(back, 4 * n), dtype=np.uint32)
        assert np.array_equal(out, table[keys])
        emit(bench="snapshot_dispatch", adapter=str(adapter), table_bytes=4 * table_words, phase=label,
             median_ms=1e3 * float(np.median(times)), repeat=len(times))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--allow-software-adapter", action="store_true")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    translate(args.repeat)
    compare(args.repeat * 10)
    snapshot(args)


if __name__ == "__main__":
    main()
