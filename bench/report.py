"""Writes BENCHMARKS.md tables from bench JSONL, beside the reference's published figures.

python -m bench.report bench/results/*.jsonl > BENCHMARKS-tables.md
The reference figures are from its 2026-10-08 buffer benchmark on an RTX 4060 Laptop GPU (Vulkan),
medians of 3 (docs/design/benchmarks.md §2.3); they are facts quoted for comparison, not our results.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (kernel, elements) -> (direct CPU ms, GPU total ms, resident ms) on the reference's laptop.
REFERENCE = {
    ("twice", 1024): (0.0012, 0.0988, 0.0348), ("twice", 16384): (0.0109, 0.1163, 0.0351),
    ("twice", 1_000_000): (0.7641, 1.7561, 0.1358), ("twice", 10_000_000): (5.8688, 13.0969, 0.5132),
    ("square", 1024): (0.0016, 0.1289, 0.0439), ("square", 16384): (0.0145, 0.2414, 0.0683),
    ("square", 1_000_000): (0.7268, 1.3496, 0.0853), ("square", 10_000_000): (7.9118, 14.8292, 0.5125),
    ("copy", 1024): (0.0013, 0.1156, 0.0366), ("copy", 16384): (0.0110, 0.1216, 0.0389),
    ("copy", 1_000_000): (0.5490, 1.5841, 0.1009), ("copy", 10_000_000): (5.7393, 19.2675, 0.4965),
    ("polynomial", 1024): (0.0197, 0.1163, 0.0380), ("polynomial", 16384): (0.3113, 0.1540, 0.0460),
    ("polynomial", 1_000_000): (19.1405, 1.5972, 0.1609), ("polynomial", 10_000_000): (185.7637, 13.6876, 0.6377),
}
REFERENCE_CROSSOVER = {"polynomial": 8192}


def load(paths: list[Path]) -> list[dict]:
    out = []
    for p in paths:
        for line in p.read_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def ms(ns: float) -> str:
    v = ns / 1e6
    return f"{v:.4f}" if v < 1 else f"{v:.2f}"


def buffer_table(records: list[dict]) -> list[str]:
    rows = ["| Kernel | Elements | direct CPU | numpy | bulk CPU runner | GPU total (set+dispatch+copy) | GPU first call | resident dispatch | 1-element prefix | GPU vs direct | ref direct CPU | ref GPU total | ref resident |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(records, key=lambda r: (r["Kernel"], r["Count"])):
        ref = REFERENCE.get((r["Kernel"], r["Count"]), (None, None, None))
        ratio = r["DirectCPUMedianNS"] / r["GPUMedianNS"]
        verdict = f"{ratio:.2f}x {'win' if ratio > 1 else 'loss'}"
        refs = [f"{v:.4f}" if v is not None else "—" for v in ref]
        rows.append(f"| {r['Kernel']} | {r['Count']:,} | {ms(r['DirectCPUMedianNS'])} | {ms(r['NumpyNS'])} | "
                    f"{ms(r['BufferCPUNS'])} | {ms(r['GPUMedianNS'])} | {ms(r['First']['TotalNS'])} | "
                    f"{ms(r['Resident']['TotalNS'])} | {ms(r['SmallPrefix']['TotalNS'])} | {verdict} | "
                    + " | ".join(refs) + " |")
    return rows


def ladder_table(records: list[dict]) -> list[str]:
    rows = ["| Kernel | Elements | direct CPU µs | GPU total µs | resident µs | GPU wins | max abs diff |",
            "| --- | ---: | ---: | ---: | ---: | :---: | ---: |"]
    for r in sorted(records, key=lambda r: (r["Kernel"], r["Count"])):
        rows.append(f"| {r['Kernel']} | {r['Count']:,} | {r['DirectCPUNS'] / 1e3:.1f} | {r['GPUTotalNS'] / 1e3:.1f} | "
                    f"{r['ResidentNS'] / 1e3:.1f} | {'yes' if r['GPUWins'] else 'no'} | {r['MaxAbsDiff']:.3g} |")
    firsts = {}
    for r in records:
        firsts[r["Kernel"]] = r.get("Crossover")
    rows.append("")
    for k, c in sorted(firsts.items()):
        ref = REFERENCE_CROSSOVER.get(k)
        rows.append(f"- {k}: first GPU win at {c:,} elements" if c else f"- {k}: no GPU win on the ladder")
        if ref:
            rows[-1] += f" (reference: {ref:,})"
    return rows


def fallback_table(records: list[dict]) -> list[str]:
    rows = ["| Kernel | Elements | per-element runner over plugin buffers | direct Wasm loop | ratio | ns per element |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(records, key=lambda r: (r["kernel"], r["elements"])):
        rows.append(f"| {r['kernel']} | {r['elements']:,} | {r['plugin_cpu_ms']:.3f} ms | {r['direct_cpu_ms']:.3f} ms | "
                    f"{r['ratio_plugin_over_direct']:.2f}x | {r['plugin_ns_per_element']:.1f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+")
    args = parser.parse_args(argv)
    records = load(args.results)
    groups = {"buffer_bench": buffer_table, "crossover": ladder_table, "cpu_fallback": fallback_table}
    for bench, render in groups.items():
        chosen = [r for r in records if r.get("bench") == bench]
        if not chosen:
            continue
        adapters = sorted({r.get("adapter") or r.get("Device", "") for r in chosen})
        print(f"### {bench}\n")
        print("Adapter: " + "; ".join(a for a in adapters if a) + "\n")
        print("\n".join(render(chosen)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
