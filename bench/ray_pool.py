"""Jobs per second of a HostPool (wagogpu.ray) against a plain Host, and the pool's own cost per job.

python -m bench.ray_pool [--mode cpu|h200] [--actors 1,2] [--width W --height H --iterations N --tile S]
                         [--repeats 3] [--tiny-jobs 300] [--address RAY_ADDRESS] [--out FILE]

Two workloads, each on one plain Host and on pools of 1..N actors (each pool closed before the next):
  tiles  Mandelbrot tiles (examples/ray_pool/tiles.wat): one job per tile, a whole image per pass;
         jobs/s and the speedup over 1 actor. Every pass's image is compared, outside the timer,
         with the plain Host's (the same path on both sides, so they must be equal).
  tiny   a 1-pixel tile of 1 iteration: a job that is nothing but instantiate, call, read, close.
         The pool's own cost per job is the pool's time per job minus the plain Host's, measured
         sequentially (submit, get, next: the round trip) and pipelined (map, max_in_flight queued
         per actor).
Modes: cpu (CPU-only Hosts, Config(disabled=True); on a shared machine the records say so and carry
the load average) and h200 (GPU Hosts with require_gpu: a plain Host and 1 actor by default, every
tile on the GPU). Cold (the pool's start: actors placed, Hosts opened; its first pass, in which each
actor compiles the module) and warm (the median of the later passes) are separate records, and
every record names the adapter. Exit 1 when an image differs or a GPU tile ran on the CPU.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.common import emit, environment
from examples.progress import Progress
from examples.ray_pool.tiles import GUEST, TILE_KERNEL, Tile, cut, paste, read_tile, tile_args, tile_job
from wagogpu import Config, Host

SOURCE = GUEST.read_text()
TINY = Tile(0, 0, 1, 1)
MODES = {"cpu": dict(width=640, height=360, iterations=256, tile=64, actors="1,2"),
         "h200": dict(width=2560, height=1440, iterations=256, tile=512, actors="1")}


@dataclass(frozen=True)
class Workload:
    width: int
    height: int
    iterations: int
    tile: int

    @property
    def tiles(self) -> list[Tile]:
        return cut(self.width, self.height, self.tile)


class BenchError(Exception):
    pass


def plain_pass(host: Host, module: Any, work: Workload) -> tuple[np.ndarray, int, float]:
    """One image on a plain Host: a fresh instance per tile, as a pool job does."""
    image = np.zeros((work.height, work.width), dtype=np.uint32)
    gpu = 0
    t0 = time.perf_counter()
    for tile in work.tiles:
        with host.instantiate(module) as inst:
            if inst.call("render_tile", *tile_args(tile, work.width, work.height, work.iterations)) != 0:
                raise BenchError(f"render_tile {tile} failed on the plain Host")
            reads = read_tile(tile.pixels, inst)
        paste(image, tile, reads["counts"])
        gpu += reads["gpu"][0]
    return image, gpu, time.perf_counter() - t0


def pool_pass(pool: Any, work: Workload) -> tuple[np.ndarray, int, float]:
    tiles = work.tiles
    jobs = [tile_job(SOURCE, t, work.width, work.height, work.iterations) for t in tiles]
    t0 = time.perf_counter()
    results = list(pool.map(jobs))
    seconds = time.perf_counter() - t0
    image = np.zeros((work.height, work.width), dtype=np.uint32)
    for tile, result in zip(tiles, results):
        paste(image, tile, result.reads["counts"])
    return image, sum(r.reads["gpu"][0] for r in results), seconds


def tiny_round(host: Host, module: Any, pool: Any, jobs: int) -> dict[str, float]:
    """One round of tiny jobs, in microseconds per job: on the plain Host, through the pool one at a
    time, and through the pool pipelined; with the actor's own time per job (JobResult.seconds).
    beyond_actor: what a job costs besides the actor's own time (sequential: the whole round trip;
    pipelined: the time each actor spends per job not running it, wall per job x actors - own)."""
    import ray

    args = tile_args(TINY, 1, 1, 1)
    t0 = time.perf_counter()
    for _ in range(jobs):
        with host.instantiate(module) as inst:
            inst.call("render_tile", *args)
            read_tile(1, inst)
    plain = (time.perf_counter() - t0) / jobs
    t0 = time.perf_counter()
    sequential = [ray.get(pool.submit(SOURCE, "render_tile", *args)) for _ in range(jobs)]
    seq = (time.perf_counter() - t0) / jobs
    batch = [tile_job(SOURCE, TINY, 1, 1, 1) for _ in range(jobs)]
    t0 = time.perf_counter()
    pipelined = list(pool.map(batch))
    pipe = (time.perf_counter() - t0) / jobs
    if any(r.value != 0 for r in sequential + pipelined):
        raise BenchError("a tiny job failed")
    actor_seq = statistics.mean(r.seconds for r in sequential)
    actor_pipe = statistics.mean(r.seconds for r in pipelined)
    return {k: v * 1e6 for k, v in dict(
        plain_host_us=plain, sequential_us=seq, pipelined_us=pipe, actor_job_us=actor_seq,
        overhead_sequential_us=seq - plain, overhead_pipelined_us=pipe - plain,
        round_trip_beyond_actor_us=seq - actor_seq,
        pipelined_beyond_actor_us=pipe * pool.placement.actors - actor_pipe).items()}


def tiny_overhead(host: Host, module: Any, pool: Any, jobs: int, rounds: int = 7) -> dict[str, float]:
    """Medians over interleaved rounds (plain, sequential, pipelined, again), so that a load that
    drifts on a shared machine weighs on every column alike."""
    tiny_round(host, module, pool, 10)  # warm-up: the module compiled on every actor
    per_round = [tiny_round(host, module, pool, max(1, jobs // rounds)) for _ in range(rounds)]
    return {key: statistics.median(r[key] for r in per_round) for key in per_round[0]}


def host_adapter(host: Host) -> str:
    snap = host.buffer_snapshot()
    return snap.device or f"none (CPU-only Host: {snap.state} {snap.reason})".strip()


def compare(name: str, image: np.ndarray, reference: np.ndarray, gpu: int, tiles: int, need_gpu: bool) -> None:
    if not np.array_equal(image, reference):
        raise BenchError(f"{name}: {int(np.count_nonzero(image != reference))} pixels differ from the plain Host")
    if need_gpu and gpu != tiles:
        raise BenchError(f"{name}: {tiles - gpu} of {tiles} tiles ran on the CPU")


@dataclass
class Plain:
    """The plain Host every pool is measured against (open for the whole run) and its image."""

    host: Host
    module: Any
    image: np.ndarray
    pass_s: float


def measure_plain(host: Host, work: Workload, repeats: int, need_gpu: bool, record: Callable[..., None]) -> Plain:
    t0 = time.perf_counter()
    module = host.compile(SOURCE)
    compiled = time.perf_counter() - t0
    image, gpu, first = plain_pass(host, module, work)
    jobs = len(work.tiles)
    compare("plain Host", image, image, gpu, jobs, need_gpu)
    warm = [plain_pass(host, module, work) for _ in range(repeats)]
    for other, other_gpu, _ in warm:
        compare("plain Host", other, image, other_gpu, jobs, need_gpu)
    adapter = host_adapter(host)
    record(workload="tiles", runner="plain_host", phase="cold", adapter=adapter, compile_s=compiled,
           first_pass_s=first, jobs=jobs, gpu_tiles=gpu)
    seconds = statistics.median(w[2] for w in warm)
    record(workload="tiles", runner="plain_host", phase="warm", adapter=adapter, jobs=jobs, pass_s=seconds,
           jobs_per_s=jobs / seconds, passes=repeats, gpu_tiles=gpu)
    return Plain(host, module, image, seconds)


def measure_pool(config: Config, actors: int, work: Workload, args: argparse.Namespace, plain: Plain,
                 one_actor_s: float | None, record: Callable[..., None]) -> float:
    """One pool's records (tiles cold and warm, tiny jobs); returns its warm seconds per pass."""
    from wagogpu.ray import HostPool

    need_gpu = args.mode == "h200"
    t0 = time.perf_counter()
    with HostPool(config, actors) as pool:
        started = time.perf_counter() - t0
        adapters = [a.device or f"none (CPU-only Host: {a.state})" for a in pool.actors()]
        jobs = len(work.tiles)
        common = dict(runner="pool", actors=actors, adapter=", ".join(sorted(set(adapters))),
                      actor_adapters=adapters, num_cpus=pool.placement.num_cpus, num_gpus=pool.placement.num_gpus)
        image, gpu, first = pool_pass(pool, work)
        compare(f"pool of {actors}", image, plain.image, gpu, jobs, need_gpu)
        record(workload="tiles", phase="cold", start_s=started, first_pass_s=first, jobs=jobs, **common)
        warm = [pool_pass(pool, work) for _ in range(args.repeats)]
        for other, other_gpu, _ in warm:
            compare(f"pool of {actors}", other, plain.image, other_gpu, jobs, need_gpu)
        seconds = statistics.median(w[2] for w in warm)
        record(workload="tiles", phase="warm", jobs=jobs, pass_s=seconds, jobs_per_s=jobs / seconds,
               passes=args.repeats, speedup_vs_plain_host=plain.pass_s / seconds,
               speedup_vs_1_actor=(one_actor_s or seconds) / seconds, **common)
        tiny = tiny_overhead(plain.host, plain.module, pool, args.tiny_jobs)
        record(workload="tiny", phase="warm", jobs=args.tiny_jobs, plain_adapter=host_adapter(plain.host),
               **tiny, **common)
    return seconds


def configure(mode: str, allow_software: bool) -> Config:
    if mode == "cpu":
        return Config(kernels=[TILE_KERNEL], disabled=True)
    return Config(kernels=[TILE_KERNEL], require_gpu=not allow_software, allow_software_adapter=allow_software)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="cpu")
    for name in ("width", "height", "iterations", "tile"):
        parser.add_argument(f"--{name}", type=int, help="(default: per mode)")
    parser.add_argument("--actors", help="pool sizes, comma-separated (default: cpu 1,2; h200 1)")
    parser.add_argument("--repeats", type=int, default=3, help="warm passes per runner (default 3)")
    parser.add_argument("--tiny-jobs", type=int, default=300, help="tiny jobs per measurement (default 300)")
    parser.add_argument("--address", help="a running Ray cluster (default: start one with every CPU here)")
    parser.add_argument("--allow-software-adapter", action="store_true", help="h200 mode on lavapipe (a dry run)")
    parser.add_argument("--out", type=Path, help="also append the records to this file")
    args = parser.parse_args(argv)
    for key, value in MODES[args.mode].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.actors = [int(v) for v in str(args.actors).split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        import ray
    except ImportError:
        print('bench.ray_pool: error: Ray is not installed: pip install ".[ray]"', file=sys.stderr)
        return 2
    ray.init(address=args.address, num_cpus=None if args.address else os.cpu_count(),
             include_dashboard=False, log_to_driver=False)
    out = args.out.open("a") if args.out else None
    env = {**environment(), "ray": ray.__version__, "cpu_count": os.cpu_count(), "mode": args.mode,
           "shared_cores": args.mode == "cpu", "cluster_cpus": ray.cluster_resources().get("CPU", 0),
           "cluster_gpus": ray.cluster_resources().get("GPU", 0)}

    def record(**fields: Any) -> None:
        rec = {"bench": "ray_pool", **env, "load_average": os.getloadavg()[0], **fields}
        emit(rec)
        if out is not None:
            emit(rec, out)
    try:
        return run(args, record)
    except BenchError as exc:
        print(f"bench.ray_pool: error: {exc}", file=sys.stderr)
        return 1
    finally:
        ray.shutdown()
        if out is not None:
            out.close()


def run(args: argparse.Namespace, record: Callable[..., None]) -> int:
    config = configure(args.mode, args.allow_software_adapter)
    work = Workload(args.width, args.height, args.iterations, args.tile)
    with Host(config) as host, Progress(1 + len(args.actors), "ray_pool") as progress:
        progress.step("plain Host")
        plain = measure_plain(host, work, args.repeats, args.mode == "h200", record)
        one_actor_s: float | None = None
        for actors in args.actors:
            progress.step(f"pool of {actors}")
            seconds = measure_pool(config, actors, work, args, plain, one_actor_s, record)
            if actors == 1:
                one_actor_s = seconds
    return 0


if __name__ == "__main__":
    sys.exit(main())
