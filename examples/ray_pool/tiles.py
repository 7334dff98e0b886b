"""Mandelbrot tiles as independent guest jobs: cutting an image, one job per tile, putting it together.

The guest is tiles.wat beside this file (render_tile); the same tiles run on a plain Host give the
reference image a pool's image must equal. Importing this module needs no Ray: only tile_job does.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from wagogpu import Access, BindingConfig, ElementType, Host, Instance, KernelConfig

GUEST = Path(__file__).resolve().with_name("tiles.wat")
COUNTS_OFFSET = 65536  # where render_tile leaves a tile's counts in guest memory
MAX_TILE_PIXELS = 1_294_336
TILE_KERNEL = KernelConfig(1, "wago_gpu.kernel.tile", "wago_gpu.cpu.tile",
                           [BindingConfig(0, ElementType.U32, Access.READ),  # [x0, y0, tw, w, h, max_iter]
                            BindingConfig(1, ElementType.U32, Access.WRITE)],  # escape counts
                           relaxed_float=True)


@dataclass(frozen=True)
class Tile:
    """A rectangle of the image: columns x0 .. x0+width-1, rows y0 .. y0+height-1."""

    x0: int
    y0: int
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height


def cut(width: int, height: int, side: int) -> list[Tile]:
    """Row-major tiles of at most side x side pixels covering a width x height image."""
    if min(width, height, side) < 1 or side * side > MAX_TILE_PIXELS:
        raise ValueError(f"cannot cut {width}x{height} into {side}x{side} tiles")
    return [Tile(x0, y0, min(side, width - x0), min(side, height - y0))
            for y0 in range(0, height, side) for x0 in range(0, width, side)]


def read_tile(pixels: int, inst: Instance) -> dict[str, bytes]:
    """The reads of one tile job: its counts, and whether its dispatch ran on the GPU."""
    gpu = inst.call("gpu_dispatches")
    return {"counts": inst.read_memory(COUNTS_OFFSET, 4 * pixels), "gpu": bytes([1 if gpu else 0])}


def tile_args(tile: Tile, width: int, height: int, iterations: int) -> tuple[int, ...]:
    return (tile.x0, tile.y0, tile.width, tile.height, width, height, iterations)


def tile_job(source: str, tile: Tile, width: int, height: int, iterations: int) -> Any:
    """The pool job of one tile (a wagogpu.ray.Job; its reads run read_tile in the actor)."""
    from wagogpu.ray import Job

    return Job(source, "render_tile", tile_args(tile, width, height, iterations),
               reads=functools.partial(read_tile, tile.pixels), check_status=True)


def render_plain(host: Host, source: str, tiles: Iterable[Tile], width: int, height: int,
                 iterations: int) -> tuple[np.ndarray, int]:
    """The image rendered tile by tile on one plain Host, each tile on a fresh instance as in the
    pool; returns the counts and how many tiles ran on the GPU."""
    module = host.compile(source)
    image = np.zeros((height, width), dtype=np.uint32)
    on_gpu = 0
    for tile in tiles:
        with host.instantiate(module) as inst:
            status = inst.call("render_tile", *tile_args(tile, width, height, iterations))
            if status != 0:
                raise RuntimeError(f"render_tile {tile} returned {status}")
            reads = read_tile(tile.pixels, inst)
        paste(image, tile, reads["counts"])
        on_gpu += reads["gpu"][0]
    module.close()
    return image, on_gpu


def paste(image: np.ndarray, tile: Tile, counts: bytes) -> None:
    block = np.frombuffer(counts, dtype="<u4").reshape(tile.height, tile.width)
    image[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = block
