"""The SAXPY guest in WAT, C, Zig and AssemblyScript: y := 2.5*x + y, on the GPU when it can.

Run: python3 -m examples.saxpy [--guest wat|c|zig|as|all] [--n N] [--cpu] [--require-gpu]
     [--allow-software-adapter]

Prints, per guest, what run(n) returned, which path the dispatch took and why, and whether y is
right (checked by the guest and again here). Exits 1 if any guest is wrong or, with --require-gpu,
ran on the CPU.
"""
from __future__ import annotations

import sys

from examples.common import base_parser, check_flags, device_line, status_name
from examples.saxpy import LABELS, MAX_N, SAXPY, Language, SaxpyRun, run
from wagogpu import Config, Host
from wagogpu.errors import GpuRequiredError


def path_line(r: SaxpyRun) -> str:
    if r.returned == 0:
        return "ran on the GPU"
    if r.returned == 1:
        return f"ran its CPU runner ({r.reason_code})"
    return f"failed: {r.returned} ({status_name(r.returned)})"


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.splitlines()[0], "python3 -m examples.saxpy")
    parser.add_argument("--guest", choices=[*Language, "all"], default="all", help="which guest (default all)")
    parser.add_argument("--n", type=int, default=1000, help=f"elements, 1..{MAX_N} (default 1000)")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if not 1 <= args.n <= MAX_N:
        parser.error(f"--n must be between 1 and {MAX_N}")
    languages = list(Language) if args.guest == "all" else [Language(args.guest)]
    config = Config(kernels=(SAXPY,), disabled=args.cpu, require_gpu=args.require_gpu,
                    allow_software_adapter=args.allow_software_adapter)
    try:
        host = Host(config)
    except GpuRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    failed = False
    with host:
        print(device_line(host))
        for language in languages:
            r = run(host, language, args.n)
            verdict = "y verified" if r.correct else "WRONG"
            print(f"{LABELS[language]}: run({args.n}) returned {r.returned}, {path_line(r)}; {verdict}")
            failed |= not r.correct or (args.require_gpu and r.returned != 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
