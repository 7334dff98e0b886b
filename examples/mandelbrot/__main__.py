"""The Mandelbrot example: one image on the CPU, through the CPU fallback and on the GPU path, compared.

Run: python -m examples.mandelbrot [--width 320] [--height 180] [--iterations 32] [--out mandelbrot.png]
                                   [--loop] [--cpu] [--require-gpu] [--allow-software-adapter]

The guest (examples/guests/mandelbrot.wasm, Zig) computes escape counts three ways:
  render_direct  plain Wasm loops over guest memory (the "direct CPU" baseline, no buffers);
  render         kernel 1 (one z = z^2 + c step per dispatch, max_iter dispatches), GPU or CPU runner;
  render_loop    kernel 2 (the whole escape loop in one dispatch; --loop): a loop with branches, which the
                 compiler's extended subset runs on the GPU (with a loop budget and an error word).
The "CPU fallback" image comes from a host with the GPU disabled, the "GPU path" image from a host
with a device (unless --cpu). The CPU images must equal render_direct exactly; the GPU image may
differ in a few pixels (relaxed_float: e.g. fused multiply-add), reported as a pixel count and the
largest difference in iterations. The GPU-path image (the CPU one with --cpu) is written as a PNG.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from examples.common import base_parser, check_flags, device_line, explain, status_name
from examples.progress import Progress, require_packages
from wagogpu import Access, BindingConfig, Config, ElementType, Host, KernelConfig
from wagogpu import GpuRequiredError

GUEST = Path(__file__).resolve().parent.parent / "guests" / "mandelbrot.wasm"
F32, U32 = ElementType.F32, ElementType.U32
STEP = KernelConfig(1, "wago_gpu.kernel.step", "wago_gpu.cpu.step",
                    [BindingConfig(0, F32, Access.READ), BindingConfig(1, F32, Access.READ),  # c_re, c_im
                     BindingConfig(2, F32, Access.READ_WRITE), BindingConfig(3, F32, Access.READ_WRITE)],  # z
                    relaxed_float=True)
MANDEL = KernelConfig(2, "wago_gpu.kernel.mandel", "wago_gpu.cpu.mandel",
                      [BindingConfig(0, U32, Access.READ),  # [width, height, max_iter, 0]
                       BindingConfig(1, U32, Access.WRITE)],  # escape counts
                      relaxed_float=True)
GUEST_ERRORS = {100: "arguments out of range", 101: "guest memory cannot grow"}
MAX_SIDE, MAX_PIXELS, MAX_ITER = 4096, 4_194_304, 65535
# The GPU image may differ from the CPU one under relaxed floats; more than this share of pixels fails.
DEFAULT_TOLERANCE = 0.01


@dataclass
class Render:
    """One image: the guest export that made it, on which host, and how its dispatches went."""

    name: str  # "render_direct", "CPU fallback", "GPU path"
    export: str
    status: int  # the export's return: 0, an ABI status, 100 or 101
    counts: np.ndarray | None  # (height, width) uint32 escape counts
    gpu_dispatches: int = 0
    cpu_dispatches: int = 0
    path: str = ""  # "GPU" or "CPU fallback (why)" for the kernel; "" for render_direct
    seconds: float = 0.0  # wall clock of the export call
    upload_bytes: int = 0  # host -> device bytes (snapshot totals, GPU path)
    download_bytes: int = 0  # device -> host bytes

    def line(self) -> str:
        if self.status != 0:
            return f"{self.name}: {self.export} failed: {GUEST_ERRORS.get(self.status) or status_name(self.status)}"
        text = f"{self.name}: {self.export} {self.seconds * 1e3:.1f} ms"
        if self.export != "render_direct":
            text += f", dispatches {self.gpu_dispatches} on the GPU / {self.cpu_dispatches} on the CPU: {self.path}"
        if self.upload_bytes or self.download_bytes:
            text += f"; {self.upload_bytes} bytes uploaded, {self.download_bytes} downloaded"
        return text


@dataclass
class Difference:
    a: str
    b: str
    pixels: int  # pixels whose counts differ
    total: int
    max_abs: int  # largest |count_a - count_b|

    def line(self) -> str:
        return (f"{self.a} vs {self.b}: {self.pixels} of {self.total} pixels differ, "
                f"max |difference| {self.max_abs} iterations")


def difference(a: Render, b: Render) -> Difference:
    delta = np.abs(a.counts.astype(np.int64) - b.counts.astype(np.int64))
    return Difference(a.name, b.name, int(np.count_nonzero(delta)), int(delta.size), int(delta.max(initial=0)))


def render(host: Host, name: str, export: str, width: int, height: int, iterations: int) -> Render:
    """Call one render export on a fresh instance and read its counts back."""
    module = host.compile(GUEST.read_bytes())
    with host.instantiate(module) as inst:
        before = host.buffer_snapshot().totals
        t0 = time.perf_counter()
        status = inst.call(export, width, height, iterations)
        seconds = time.perf_counter() - t0
        out = Render(name, export, status, None, seconds=seconds)
        if status != 0:
            return out
        n = inst.call("image_len")
        raw = inst.read_memory(inst.call("counts_ptr"), 4 * n)
        out.counts = np.frombuffer(raw, dtype="<u4").reshape(height, width).copy()
        if export != "render_direct":
            out.gpu_dispatches, out.cpu_dispatches = inst.call("gpu_dispatches"), inst.call("cpu_dispatches")
            kernel = MANDEL if export == "render_loop" else STEP
            paths = []
            if out.gpu_dispatches:
                paths.append("GPU")
            if out.cpu_dispatches:
                paths.append(explain(host, module, kernel, 1, width * height))
            out.path = ", ".join(paths)
        after = host.buffer_snapshot().totals
        out.upload_bytes = after.gpu_upload_bytes - before.gpu_upload_bytes
        out.download_bytes = after.gpu_download_bytes - before.gpu_download_bytes
    module.close()
    return out


def shade(counts: np.ndarray, iterations: int) -> np.ndarray:
    """RGB image: never-escaped pixels black, the rest on a smooth dark-blue-to-gold ramp."""
    t = counts.astype(np.float64) / iterations
    rgb = np.stack([9 * (1 - t) * t ** 3, 15 * (1 - t) ** 2 * t ** 2, 8.5 * (1 - t) ** 3 * t], axis=-1)
    rgb = np.sqrt(np.clip(rgb, 0.0, 1.0))  # brighten the low counts
    rgb[counts >= iterations] = 0.0
    return (rgb * 255).round().astype(np.uint8)


def write_png(counts: np.ndarray, iterations: int, out: Path) -> None:
    try:
        from PIL import Image
    except ImportError as exc:
        raise RuntimeError("writing the PNG needs Pillow: python3 -m pip install '.[examples]'") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(shade(counts, iterations), "RGB").save(out)


@dataclass
class MandelbrotResult:
    device: str  # the GPU-path host's device line, or the CPU host's with --cpu
    renders: list[Render]
    differences: list[Difference]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def run(width: int = 320, height: int = 180, iterations: int = 32, loop: bool = False, cpu: bool = False,
        require_gpu: bool = False, allow_software_adapter: bool = False,
        tolerance: float = DEFAULT_TOLERANCE, progress: Progress | None = None) -> MandelbrotResult:
    export = "render_loop" if loop else "render"
    expected_dispatches = 1 if loop else iterations
    progress = progress or Progress(2 if cpu else 3, "mandelbrot", enabled=False)
    with Host(Config(kernels=[STEP, MANDEL], disabled=True)) as host:
        progress.step("render_direct")
        direct = render(host, "render_direct", "render_direct", width, height, iterations)
        progress.step("CPU fallback")
        fallback = render(host, "CPU fallback", export, width, height, iterations)
        device = device_line(host)
    renders = [direct, fallback]
    if not cpu:
        config = Config(kernels=[STEP, MANDEL], require_gpu=require_gpu, allow_software_adapter=allow_software_adapter)
        with Host(config) as host:
            device = device_line(host)
            progress.step("GPU path")
            renders.append(render(host, "GPU path", export, width, height, iterations))
    problems = [r.line() for r in renders if r.status != 0]
    differences: list[Difference] = []
    if problems:
        return MandelbrotResult(device, renders, differences, problems)
    for r in renders[1:]:
        if r.gpu_dispatches + r.cpu_dispatches != expected_dispatches:
            problems.append(f"{r.name}: {r.gpu_dispatches} + {r.cpu_dispatches} dispatches, "
                            f"expected {expected_dispatches}")
    if fallback.gpu_dispatches:
        problems.append("CPU fallback: a dispatch ran on the GPU with the GPU disabled")
    if cpu:
        differences.append(difference(fallback, direct))
    else:
        gpu = renders[2]
        differences += [difference(gpu, fallback), difference(gpu, direct), difference(fallback, direct)]
        if gpu.cpu_dispatches == 0 and differences[0].pixels > tolerance * differences[0].total:
            problems.append(f"GPU path: {differences[0].pixels} pixels differ from the CPU image "
                            f"(more than {tolerance:.1%})")
        elif gpu.gpu_dispatches == 0 and differences[0].pixels:
            problems.append("GPU path fell back to the CPU but its image differs from the CPU image")
        if require_gpu and gpu.cpu_dispatches:
            problems.append(f"--require-gpu but {gpu.cpu_dispatches} dispatches ran on the CPU: {gpu.path}")
    if differences[-1].pixels:
        problems.append("the CPU fallback image differs from render_direct (they must be identical)")
    return MandelbrotResult(device, renders, differences, problems)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python -m examples.mandelbrot")
    parser.add_argument("--width", type=int, default=320, help="image width in pixels (default 320)")
    parser.add_argument("--height", type=int, default=180, help="image height in pixels (default 180)")
    parser.add_argument("--iterations", type=int, default=32, help="max iterations per pixel (default 32)")
    parser.add_argument("--out", type=Path, default=Path("mandelbrot.png"), help="PNG to write (default mandelbrot.png)")
    parser.add_argument("--no-image", action="store_true", help="write no PNG")
    parser.add_argument("--loop", action="store_true",
                        help="use render_loop (the loop kernel: one dispatch instead of one per iteration)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help=f"share of pixels the GPU image may differ in (default {DEFAULT_TOLERANCE})")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if not (1 <= args.width <= MAX_SIDE and 1 <= args.height <= MAX_SIDE):
        parser.error(f"--width and --height must be between 1 and {MAX_SIDE}")
    if args.width * args.height > MAX_PIXELS:
        parser.error(f"at most {MAX_PIXELS} pixels")
    if not 1 <= args.iterations <= MAX_ITER:
        parser.error(f"--iterations must be between 1 and {MAX_ITER}")
    if not args.no_image:
        require_packages("examples.mandelbrot", {"PIL": "Pillow"}, "examples", "writing the PNG (or --no-image)")
    try:
        with Progress(2 if args.cpu else 3, "mandelbrot") as progress:
            out = run(args.width, args.height, args.iterations, args.loop, args.cpu, args.require_gpu,
                      args.allow_software_adapter, args.tolerance, progress)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out.device)
    print(f"image {args.width}x{args.height}, {args.iterations} iterations, "
          f"{'loop kernel (render_loop)' if args.loop else 'step kernel (render)'}")
    for r in out.renders:
        print(r.line())
    for d in out.differences:
        print(d.line())
    image = next((r for r in reversed(out.renders) if r.counts is not None), None)
    if image is not None and not args.no_image:
        try:
            write_png(image.counts, args.iterations, args.out)
        except (RuntimeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.out} ({image.name} image)")
    for problem in out.problems:
        print(f"error: {problem}", file=sys.stderr)
    if out.ok:
        print("verified: the CPU images are identical" + ("" if args.cpu else ", the GPU image is within tolerance"))
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(main())
