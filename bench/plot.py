"""Plots from bench JSONL: time against size for GPU total, resident, direct CPU and numpy, with the
crossover marked. python -m bench.plot RESULTS.jsonl [--out-dir bench/results] (extra: plot)."""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench.plot: error: matplotlib is missing (pip install '.[plot]')", file=sys.stderr)
        return 2
    records = [r for p in args.results for r in load(p)]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    series: dict[tuple[str, str], dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("bench") == "buffer_bench":
            key = ("sizes", r["Kernel"])
            s = series[key]
            s["GPU total (set+dispatch+copy)"].append((r["Count"], r["GPUMedianNS"] / 1e6))
            s["GPU resident dispatch"].append((r["Count"], r["Resident"]["TotalNS"] / 1e6))
            s["direct Wasm CPU"].append((r["Count"], r["DirectCPUMedianNS"] / 1e6))
            s["numpy"].append((r["Count"], r["NumpyNS"] / 1e6))
            s["_adapter"] = r["adapter"]  # type: ignore[assignment]
        elif r.get("bench") == "crossover":
            s = series[("crossover", r["Kernel"])]
            s["GPU total (set+dispatch+copy)"].append((r["Count"], r["GPUTotalNS"] / 1e6))
            s["GPU resident dispatch"].append((r["Count"], r["ResidentNS"] / 1e6))
            s["direct Wasm CPU"].append((r["Count"], r["DirectCPUNS"] / 1e6))
            s["_adapter"] = r["adapter"]  # type: ignore[assignment]
            s["_crossover"] = r.get("Crossover")  # type: ignore[assignment]
    written = []
    for (kind, kernel), s in sorted(series.items()):
        adapter = s.pop("_adapter", "")
        crossover = s.pop("_crossover", None)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, points in s.items():
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        if crossover:
            ax.axvline(crossover, color="grey", linestyle="--", label=f"first GPU win: {crossover:,}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("elements (f32)")
        ax.set_ylabel("milliseconds")
        ax.set_title(f"{kernel} ({kind}) on {str(adapter).split(';')[0]}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out = args.out_dir / f"{kind}_{kernel}.png"
        fig.savefig(out, dpi=110)
        plt.close(fig)
        written.append(out)
    for out in written:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
