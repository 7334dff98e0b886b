"""The `wagogpu` command (also `python -m wagogpu`).

  wagogpu info [--json] [--probe [--adapter INDEX|NAME] [--backend API]]   adapters (numbered), the
                                                               one the plugin would choose, and why not
  wagogpu compile MODULE --kernel NAME --binding SLOT:TYPE:ACCESS ...   the kernel's WGSL and its dispatch rules
  wagogpu compile MODULE --legacy EXPORT                       WGSL of a legacy (f32) -> f32 kernel
  wagogpu run MODULE --config FILE.json [--call EXPORT ARG...]  run a guest under a JSON Config
  wagogpu demo [--cpu] [--allow-software-adapter] [--adapter ...]   the start, buffers and compiled examples
  wagogpu bench [NAME [ARG...]]                                list or run a benchmark from bench/
  wagogpu --version

Exit status: 0 success; 1 the work itself failed (a CompileError, a trap, a failed check, no GPU
with --require-gpu); 2 a usage error (bad flags, missing file, bad module, bad config, an adapter
that matches nothing), reported as one line on stderr (a WAT syntax error adds wasmtime's source
line and caret below it).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from .common import PROG, Failure, Parser, UsageError, adapter_arg, count_arg, parse_binding, report, seconds_arg
from .compile import cmd_compile
from .info import cmd_info
from .run import DEFAULT_CALL_TIMEOUT, cmd_run
from .tools import cmd_bench, cmd_demo

__all__ = ["main", "build_parser", "UsageError", "Failure"]

POWER_PREFERENCES = ("high-performance", "low-power")
Flag = tuple[tuple[str, ...], dict[str, Any]]


def switch(*names: str, help: str) -> Flag:  # noqa: A002 - argparse's own word
    return names, {"action": "store_true", "help": help}


MODULE = (("module",), {"metavar": "MODULE", "help": ".wasm or .wat file"})
POWER = (("--power-preference",), {"choices": POWER_PREFERENCES, "default": "high-performance"})
JSON = switch("--json", help="machine-readable output")
ADAPTER = (("--adapter",), {"type": adapter_arg, "metavar": "INDEX|NAME",
                            "help": "Config.adapter: an index as `wagogpu info` lists them, or a piece of the name"})
BACKEND = (("--backend",), {"choices": ("vulkan", "metal", "dx12", "gl"), "type": str.lower,
                            "help": "Config.backend: restrict the adapter choice to one graphics API"})
CONFIG_HELP = ('Config as JSON: {"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F32", "read"], '
               '[1, "F32", "write"]], "relaxed_float": true}], ...any Config field}')

LIMIT_FLAGS: list[Flag] = [
    (("--timeout",), {"type": seconds_arg, "metavar": "S",
                      "help": f"Config.call_timeout: stop the start function and the call after S seconds each "
                              f"(default: the config's call_timeout, else {DEFAULT_CALL_TIMEOUT:g}; 0: no limit)"}),
    (("--fuel",), {"type": count_arg(1), "metavar": "N", "help": "Config.fuel: wasmtime fuel per call"}),
    (("--max-memory",), {"type": count_arg(0), "metavar": "BYTES",
                         "help": "Config.max_memory_bytes: the most bytes each guest memory may have"}),
]

#: name -> (help, description, function, flags): every subcommand, as data.
COMMANDS: dict[str, tuple[str, str, Callable[[argparse.Namespace], int], list[Flag]]] = {
    "info": ("GPU adapters and the one the plugin would use",
             "List GPU adapters (numbered as Config(adapter=N) counts them), the one the plugin would choose and "
             "why it would run CPU-only.", cmd_info,
             [JSON, switch("--verbose", "-v", help="list every adapter feature"),
              switch("--probe", help="also open (and close) the chosen device"),
              switch("--allow-software-adapter", help="probe with software adapters allowed"), POWER, ADAPTER, BACKEND]),
    "compile": ("print the WGSL of a guest's kernel",
                "Print the WGSL wagogpu generates for one kernel of a .wasm or .wat module; on stderr, the dispatch "
                "rules it can see for that kernel, or why it cannot compile.", cmd_compile,
                [MODULE, (("--kernel",), {"metavar": "NAME",
                                          "help": "kernel name (double) or export (wago_gpu.kernel.double)"}),
                 (("--binding",), {"metavar": "SLOT:TYPE:ACCESS", "type": parse_binding, "action": "append",
                                   "default": [], "help": "a declared binding, e.g. 0:F32:read 1:f32:write "
                                                          "(ACCESS read, write or rw); repeat"}),
                 (("--id",), {"type": int, "default": 1, "help": "kernel ID (default 1)"}),
                 switch("--relaxed-float", help="declare float consent (relaxed_float=True)"),
                 switch("--strict-float", help="exact integer-coded f32 arithmetic (strict_float=True)"),
                 (("--legacy",), {"metavar": "EXPORT", "help": "compile a legacy (f32) -> f32 export instead"}),
                 switch("--explain", help="when the kernel stays on the CPU, name the first blocker and every "
                                          "instruction of it and of the functions it calls that never runs on "
                                          "the GPU")]),
    "run": ("run a guest under a JSON config",
            "Instantiate MODULE under the Config in FILE.json, call one export and print the result, the device, "
            "the last operation and the last dispatch.", cmd_run,
            [MODULE, (("--config",), {"metavar": "FILE.json", "required": True, "help": CONFIG_HELP}),
             (("--call",), {"nargs": "+", "metavar": ("EXPORT", "ARG"), "help": "export to call and its arguments"}),
             switch("--cpu", help="disabled=True"), switch("--allow-software-adapter", help="allow_software_adapter=True"),
             switch("--require-gpu", help="require_gpu=True"), ADAPTER, BACKEND, *LIMIT_FLAGS]),
    "demo": ("run the start, buffers and compiled examples",
             "Run the start, buffers and compiled (Zig, C) examples and say per kernel which path ran (GPU or CPU, "
             "and why), with timings.", cmd_demo,
             [switch("--cpu", help="never open a GPU"),
              switch("--require-gpu", help="fail unless every kernel ran on a hardware GPU"),
              switch("--allow-software-adapter", help="let the GPU path run on lavapipe/llvmpipe"), POWER, JSON,
              ADAPTER, BACKEND, switch("--cpu-kernels", help="cpu_kernels=True: eligible kernels off the GPU run "
                                                               "as compiled Wasm"),
              (("--placement",), {"choices": ("threshold", "measured"), "default": "threshold",
                                  "help": "where a dispatch runs: min_elements (threshold) or the predicted faster "
                                          "device (measured)"})]),
    "bench": ("list or run a benchmark from bench/",
              "Without NAME, list the benchmarks in bench/; with NAME, run python -m bench.NAME with the remaining "
              "arguments (from the source checkout).", cmd_bench,
              [(("name",), {"nargs": "?", "metavar": "NAME"}),
               (("args",), {"nargs": argparse.REMAINDER, "metavar": "ARG"})]),
}


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = Parser(prog=PROG, description="Run WebAssembly guests with GPU-offloaded element kernels (wago_gpu_v1).",
                    epilog="exit status: 0 ok, 1 the work failed, 2 usage error")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (summary, description, func, flags) in COMMANDS.items():
        p = sub.add_parser(name, help=summary, description=description)
        for names, options in flags:
            p.add_argument(*names, **options)
        p.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `wagogpu` command; returns the exit status."""
    from ..gpu.driver_noise import silence_wayland_log

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            raise UsageError("choose a command: info, compile, run, demo or bench (wagogpu --help)")
        silence_wayland_log()
        return int(args.func(args))
    except UsageError as exc:
        report(exc)
        return 2
    except Failure as exc:
        report(exc)
        return 1
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
