"""Mandelbrot tiles across a pool of Hosts on Ray, checked against the same tiles on one plain Host.

Run: python -m examples.ray_pool [--width 640] [--height 360] [--iterations 256] [--tile 64]
                                 [--actors N] [--num-cpus C] [--address ADDRESS] [--out FILE.png]
                                 [--cpu] [--require-gpu] [--allow-software-adapter]

Each tile is one job (examples/ray_pool/tiles.wat, render_tile): a fresh instance, one dispatch of
the tile kernel (the GPU, or the guest's CPU runner), the counts read back. The pool has one actor
per GPU Ray sees, or one CPU-only actor per CPU (--actors to choose); --address joins a running Ray
cluster instead of starting one here. The pool's image must equal the plain Host's exactly when
both ran every tile on the same path; a GPU tile against a CPU one may differ in a few pixels
(relaxed_float), at most --tolerance of them. Needs pip install ".[ray]" (PNG: ".[examples]").
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from examples.common import base_parser, check_flags
from examples.progress import Progress, require_packages
from examples.ray_pool.tiles import GUEST, TILE_KERNEL, cut, paste, render_plain, tile_job
from wagogpu import Config, Host
from wagogpu.errors import GpuRequiredError

if TYPE_CHECKING:
    from wagogpu.ray import HostPool

DEFAULT_TOLERANCE = 0.01


@dataclass
class PoolRender:
    """The pool's image and the plain Host's, and what differs between them."""

    actors: list[str]  # one line per actor: index, process, device, state
    tiles: int
    pool_seconds: float
    plain_seconds: float
    pool_gpu_tiles: int
    plain_gpu_tiles: int
    pool_image: np.ndarray
    plain_image: np.ndarray
    problems: list[str] = field(default_factory=list)

    @property
    def differing_pixels(self) -> int:
        return int(np.count_nonzero(self.pool_image != self.plain_image))

    @property
    def ok(self) -> bool:
        return not self.problems


def render_pool(pool: "HostPool", source: str, width: int, height: int, iterations: int,
                tile: int) -> tuple[np.ndarray, int, float]:
    """The image from the pool (jobs in submission order), its GPU tiles, and its wall time."""
    tiles = cut(width, height, tile)
    image = np.zeros((height, width), dtype=np.uint32)
    t0 = time.perf_counter()
    results = []
    with Progress(len(tiles), "pool tiles") as progress:
        for result in pool.map(tile_job(source, t, width, height, iterations) for t in tiles):
            results.append(result)
            progress.step()
    seconds = time.perf_counter() - t0
    for t, result in zip(tiles, results):
        paste(image, t, result.reads["counts"])
    return image, sum(r.reads["gpu"][0] for r in results), seconds


def run(config: Config, width: int = 640, height: int = 360, iterations: int = 256, tile: int = 64,
        actors: int | None = None, num_cpus: float | None = None,
        tolerance: float = DEFAULT_TOLERANCE) -> PoolRender:
    from wagogpu.ray import HostPool

    source = GUEST.read_text()
    with HostPool(config, actors, num_cpus=num_cpus) as pool:
        lines = [f"actor {a.index}: pid {a.pid}, device {a.device or 'none (CPU-only)'} ({a.state})"
                 for a in pool.actors()]
        pool_image, pool_gpu, pool_seconds = render_pool(pool, source, width, height, iterations, tile)
    tiles = cut(width, height, tile)
    with Host(config) as host:
        t0 = time.perf_counter()
        plain_image, plain_gpu = render_plain(host, source, tiles, width, height, iterations)
        plain_seconds = time.perf_counter() - t0
    out = PoolRender(lines, len(tiles), pool_seconds, plain_seconds, pool_gpu, plain_gpu, pool_image, plain_image)
    same_paths = {pool_gpu, plain_gpu} <= {0} or pool_gpu == plain_gpu == len(tiles)
    allowed = 0 if same_paths else int(tolerance * width * height)
    if out.differing_pixels > allowed:
        out.problems.append(f"{out.differing_pixels} pixels differ from the plain Host's image "
                            f"(allowed {allowed}: {'same' if same_paths else 'mixed'} paths)")
    if config.require_gpu and pool_gpu < len(tiles):
        out.problems.append(f"--require-gpu but {len(tiles) - pool_gpu} tiles ran on the CPU")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.ray_pool")
    parser.add_argument("--width", type=int, default=640, help="image width (default 640)")
    parser.add_argument("--height", type=int, default=360, help="image height (default 360)")
    parser.add_argument("--iterations", type=int, default=256, help="max iterations per pixel (default 256)")
    parser.add_argument("--tile", type=int, default=64, help="tile side in pixels (default 64)")
    parser.add_argument("--actors", type=int, help="actors in the pool (default: one per GPU, else per CPU)")
    parser.add_argument("--num-cpus", type=float, help="CPUs each actor asks Ray for (default 1 or a share)")
    parser.add_argument("--address", help="a running Ray cluster to join (default: start one here)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help=f"share of pixels a GPU tile may differ from a CPU one (default {DEFAULT_TOLERANCE})")
    parser.add_argument("--out", type=Path, help="write the pool's image as a PNG")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if not (1 <= args.width <= 4096 and 1 <= args.height <= 4096 and 1 <= args.iterations <= 65535):
        parser.error("--width and --height must be 1..4096, --iterations 1..65535")
    if args.tile < 1 or args.tile * args.tile > 1_294_336:
        parser.error("--tile must be 1..1137")
    require_packages("examples.ray_pool", {"ray": "ray"}, "ray", "the pool")
    if args.out is not None:
        require_packages("examples.ray_pool", {"PIL": "Pillow"}, "examples", "writing the PNG")
    import ray

    config = Config(kernels=[TILE_KERNEL], disabled=args.cpu, require_gpu=args.require_gpu,
                    allow_software_adapter=args.allow_software_adapter)
    if args.address:
        ray.init(address=args.address)
    try:
        out = run(config, args.width, args.height, args.iterations, args.tile, args.actors, args.num_cpus,
                  args.tolerance)
    except (GpuRequiredError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return report(out, args)


def report(out: PoolRender, a: argparse.Namespace) -> int:
    for line in out.actors:
        print(line)
    print(f"image {a.width}x{a.height}, {a.iterations} iterations, {out.tiles} tiles of {a.tile}x{a.tile}")
    print(f"pool: {out.pool_seconds * 1e3:.1f} ms, {out.pool_gpu_tiles} of {out.tiles} tiles on the GPU")
    print(f"plain Host: {out.plain_seconds * 1e3:.1f} ms, {out.plain_gpu_tiles} of {out.tiles} tiles on the GPU")
    print(f"pool vs plain Host: {out.differing_pixels} of {out.pool_image.size} pixels differ")
    if a.out is not None:
        from examples.mandelbrot.__main__ import write_png

        try:
            write_png(out.pool_image, a.iterations, a.out)
        except (RuntimeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {a.out}")
    for problem in out.problems:
        print(f"error: {problem}", file=sys.stderr)
    if out.ok:
        print("verified: the pool's image equals the plain Host's")
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
