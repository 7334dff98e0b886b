"""Instantiation time against the number of exports: Host.instantiate (exports read on first use)
beside wasmtime-py's own Instance plus its eager exports() read (what the host did before), and a
bare wasmtime Instance, in one run.

    python -m bench.instantiate [--exports 1000,5000,20000] [--repeats 3]

Each record: exports, the three medians in ms (first instantiation of a module apart: "cold"), and
the ratios side by side. The result is checked outside the timer: the last export is called and
must return its index. No GPU is involved (adapter: none, disabled=True).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import wasmtime

from bench.common import emit, environment
from examples.progress import Progress
from wagogpu import Config, Host


def guest(exports: int) -> str:
    return "(module " + "".join(f'(func (export "f{i}") (result i32) i32.const {i})' for i in range(exports)) + ")"


def seconds(run: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def measure(host: Host, exports: int, repeats: int) -> dict[str, object]:
    source = guest(exports)
    module = host.compile(source)
    engine = host.context.engine
    plain = wasmtime.Module(engine, source)
    last = f"f{exports - 1}"

    def ours() -> None:
        host.instantiate(module).close()

    def eager() -> None:
        store = wasmtime.Store(engine)
        wasmtime.Instance(store, plain, []).exports(store)

    def bare() -> None:
        store = wasmtime.Store(engine)
        wasmtime.Instance(store, plain, [])

    cold = {"ours": seconds(ours), "eager_exports": seconds(eager), "bare": seconds(bare)}
    warm = {name: statistics.median(seconds(run) for _ in range(repeats))
            for name, run in (("ours", ours), ("eager_exports", eager), ("bare", bare))}
    inst = host.instantiate(module)
    checked = inst.call(last) == exports - 1  # outside the timers
    inst.close()
    return {"exports": exports, "checked": checked,
            **{f"{name}_cold_ms": round(v * 1e3, 3) for name, v in cold.items()},
            **{f"{name}_warm_ms": round(v * 1e3, 3) for name, v in warm.items()},
            "eager_over_ours_warm": round(warm["eager_exports"] / warm["ours"], 2),
            "ours_over_bare_warm": round(warm["ours"] / warm["bare"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", default="1000,5000,20000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    counts = [int(v) for v in args.exports.split(",")]
    env = environment()
    ok = True
    with Host(Config(disabled=True)) as host, Progress(len(counts), "instantiate") as progress:
        for n in counts:
            progress.step(f"{n} exports")
            record = measure(host, n, args.repeats)
            ok &= bool(record["checked"])
            emit({"bench": "instantiate", **record, "repeats": args.repeats, "adapter": "none (disabled=True)", **env})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
