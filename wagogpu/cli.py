"""The `wagogpu` command (also `python -m wagogpu`).

  wagogpu info [--json] [--probe] [--allow-software-adapter]   adapters, the one the plugin would choose, and why not
  wagogpu compile MODULE --kernel NAME --binding SLOT:TYPE:ACCESS ...   the kernel's WGSL
  wagogpu compile MODULE --legacy EXPORT                       WGSL of a legacy (f32) -> f32 kernel
  wagogpu run MODULE --config FILE.json [--call EXPORT ARG...]  run a guest under a JSON Config
  wagogpu demo [--cpu] [--allow-software-adapter]              the start, buffers and compiled examples
  wagogpu bench [NAME [ARG...]]                                list or run a benchmark from bench/

Exit status: 0 success; 1 the work itself failed (a CompileError, a trap, a failed check, no GPU
with --require-gpu); 2 a usage error (bad flags, missing file, bad module, bad config), reported
as one line on stderr.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import wasmtime

    from .config import BindingConfig, Config
    from .gpu.adapters import AdapterInfo
    from .diagnostics import BufferOperation
    from .host import Host

PROG = "wagogpu"
KEY_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size", "max-compute-workgroups-per-dimension",
              "max-compute-invocations-per-workgroup")


class UsageError(Exception):
    """The user asked for something impossible: exit status 2, one line on stderr."""


class Failure(Exception):
    """The work itself failed: exit status 1, one line on stderr."""


class _Parser(argparse.ArgumentParser):
    """argparse whose errors become one `wagogpu: error: ...` line (subcommand parsers inherit this)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _one_line(text: str) -> str:
    from .host.engine import first_line

    return first_line(Exception(text)) if "\n" in text else text.strip()


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _load_module(path: str) -> bytes:
    """Binary Wasm from a .wasm or .wat file, validated with the host's engine settings."""
    import wasmtime

    from .errors import ModuleError
    from .host.engine import first_line, new_engine, to_wasm

    try:
        wasm = to_wasm(_read(path))
    except ModuleError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    try:
        wasmtime.Module.validate(new_engine(), wasm)
    except wasmtime.WasmtimeError as exc:
        raise UsageError(f"{path}: invalid module: {first_line(exc)}") from exc
    return wasm


# -- kernel descriptions ------------------------------------------------------------------------------
def parse_binding(spec: str) -> BindingConfig:
    """SLOT:TYPE:ACCESS, e.g. 0:F32:read or 1:f32:rw, as a BindingConfig (argparse type)."""
    from .config import BindingConfig, access_from_json, element_type_from_json, slot_from_json

    parts = spec.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{spec!r} is not SLOT:TYPE:ACCESS (e.g. 0:F32:read)")
    try:
        return BindingConfig(slot_from_json(parts[0], spec), element_type_from_json(parts[1], spec),
                             access_from_json(parts[2], spec))
    except ValueError as exc:  # ConfigError names the binding
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _load_config(path: str) -> Config:
    from .config import config_from_json

    text = _read(path)
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: invalid JSON: {exc}") from exc
    try:
        return config_from_json(data)
    except (ValueError, TypeError) as exc:  # ConfigError is a ValueError naming the field
        raise UsageError(f"{path}: {exc}") from exc


# -- info -------------------------------------------------------------------------------------------
def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _wgpu_problem() -> str:
    """Why the GPU stack cannot load here ("" when it can): GpuDevice loads wgpu and its native library."""
    try:
        from .gpu import GpuDevice  # noqa: F401
    except Exception as exc:  # a missing wheel or native library
        return f"wgpu failed to load: {_one_line(str(exc)) or type(exc).__name__}"
    return ""


def _choice(adapters: list[AdapterInfo], power_preference: str, allow_software: bool,
            wgpu_problem: str) -> dict[str, object]:
    from .gpu.adapters import rank_adapters

    ranked, why = rank_adapters([(i, a) for i, a in enumerate(adapters)], power_preference, allow_software)
    if ranked:
        index, info = ranked[0]
        return {"adapter": index, "name": info.name, "summary": info.summary(), "cpu_only_reason": ""}
    return {"adapter": None, "name": "", "summary": "", "cpu_only_reason": wgpu_problem or why}


def _probe(power_preference: str, allow_software: bool) -> dict[str, object]:
    """Open (and close) the device the plugin would open."""
    from .gpu import GpuDevice

    t0 = time.perf_counter()
    try:
        device = GpuDevice.open(power_preference=power_preference, allow_software_adapter=allow_software)
    except Exception as exc:
        return {"opened": False, "adapter": "", "reason": _one_line(str(exc)), "seconds": time.perf_counter() - t0}
    try:
        return {"opened": True, "adapter": device.info.summary(), "timestamps": bool(device.has_timestamps),
                "reason": "", "seconds": time.perf_counter() - t0}
    finally:
        device.close()


def cmd_info(args: argparse.Namespace) -> int:
    from . import __version__
    from .gpu import list_adapters

    problem = _wgpu_problem()
    adapters = [] if problem else list_adapters()
    report: dict[str, Any] = {
        "wagogpu": __version__, "wasmtime": _version("wasmtime"), "wgpu": _version("wgpu"),
        "numpy": _version("numpy"), "power_preference": args.power_preference, "wgpu_problem": problem,
        "adapters": [dict(asdict(a), timestamp_query="timestamp-query" in a.features, f64_kernels=a.has_f64)
                     for a in adapters],
        "choice": {"default": _choice(adapters, args.power_preference, False, problem),
                   "allow_software_adapter": _choice(adapters, args.power_preference, True, problem)},
    }
    if args.probe:
        report["probe"] = dict(_probe(args.power_preference, args.allow_software_adapter),
                               allow_software_adapter=args.allow_software_adapter)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"wagogpu {report['wagogpu']} (wasmtime {report['wasmtime']}, wgpu {report['wgpu']}, "
          f"numpy {report['numpy']})")
    if problem:
        print(problem)
    print(f"adapters ({len(adapters)}):" if adapters else "adapters: none")
    for i, a in enumerate(adapters):
        print(f"  [{i}] {a.name}")
        print(f"      vendor {a.vendor}, backend {a.backend}, type {a.adapter_type}, driver {a.driver or '?'}, "
              f"software: {'yes' if a.is_software else 'no'}")
        flags = ", ".join(f"{f}: {'yes' if f in a.features else 'no'}"
                          for f in ("timestamp-query", "shader-f16", "shader-f64", "shader-int64"))
        print(f"      {flags}; {len(a.features)} features" + ("" if args.verbose else " (--verbose lists them)"))
        print(f"      f64 arithmetic in kernels: {'on the GPU' if a.has_f64 else 'CPU only (needs shader-f64 and shader-int64)'}")
        if args.verbose:
            print(f"      features: {', '.join(a.features)}")
        limits = ", ".join(f"{k} {a.limits[k]}" for k in KEY_LIMITS if k in a.limits)
        if limits:
            print(f"      limits: {limits}")
    for label, key in (("default settings", "default"), ("with --allow-software-adapter", "allow_software_adapter")):
        c = report["choice"][key]
        if c["adapter"] is not None:
            print(f"{label}: adapter [{c['adapter']}] {c['summary']}")
        else:
            print(f"{label}: CPU only: {c['cpu_only_reason']}")
    if report["choice"]["default"]["adapter"] is None:
        print("CPU only means every dispatch answers 1 and guests run their own CPU runners: same answers, "
              "no GPU speed-up")
    if args.probe:
        p = report["probe"]
        setting = "with --allow-software-adapter" if args.allow_software_adapter else "default settings"
        if p["opened"]:
            print(f"probe ({setting}): opened {p['adapter']} in {p['seconds'] * 1e3:.1f} ms; GPU timestamps: "
                  f"{'yes' if p['timestamps'] else 'no'}")
        else:
            print(f"probe ({setting}): no device: {p['reason']}")
    return 0


# -- compile ----------------------------------------------------------------------------------------
def cmd_compile(args: argparse.Namespace) -> int:
    from . import CompileError, compile_buffer_wgsl, compile_wgsl
    from .config import KernelConfig, kernel_exports

    if args.legacy and (args.kernel or args.binding):
        raise UsageError("--legacy takes no --kernel or --binding")
    if not args.legacy and not args.kernel:
        raise UsageError("give --kernel NAME with --binding SLOT:TYPE:ACCESS ..., or --legacy EXPORT")
    if args.kernel and not args.binding:
        raise UsageError("--kernel needs at least one --binding SLOT:TYPE:ACCESS")
    wasm = _load_module(args.module)
    try:
        if args.legacy:
            wgsl = compile_wgsl(wasm, args.legacy)
        else:
            export, cpu_export = kernel_exports(args.kernel)
            wgsl = compile_buffer_wgsl(wasm, KernelConfig(args.id, export, cpu_export, tuple(args.binding),
                                                          relaxed_float=args.relaxed_float,
                                                          strict_float=args.strict_float))
    except CompileError as exc:
        print(f"CompileError {exc.kind.name}: {_one_line(exc.message)}", file=sys.stderr)
        return 1
    sys.stdout.write(wgsl if wgsl.endswith("\n") else wgsl + "\n")
    return 0


# -- run --------------------------------------------------------------------------------------------
def _trap_text(exc: BaseException) -> str:
    """The trap itself (e.g. "wasm trap: wasm `unreachable` instruction executed"), without backtrace frames."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        if "trap" in line or "wago_gpu" in line:
            return line
    return lines[-1] if lines else type(exc).__name__


def _convert_args(compiled: wasmtime.Module, export: str, raw: Sequence[str]) -> list[int | float]:
    """Command-line words as values for the export's parameters (a UsageError names what is wrong)."""
    import wasmtime

    functype = None
    names = []
    for e in compiled.exports:
        if isinstance(e.type, wasmtime.FuncType):
            names.append(e.name)
            if e.name == export:
                functype = e.type
    if functype is None:
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise UsageError(f"no exported function {export!r} (exported: {shown or 'none'})")
    params = [str(p) for p in functype.params]
    if len(raw) != len(params):
        raise UsageError(f"{export} takes {len(params)} argument(s) ({' '.join(params) or 'none'}), got {len(raw)}")
    values: list[int | float] = []
    for i, (text, kind) in enumerate(zip(raw, params)):
        try:
            if kind in ("i32", "i64"):
                bits = 32 if kind == "i32" else 64
                value = int(text, 0)
                if not -(1 << (bits - 1)) <= value < (1 << bits):
                    raise ValueError(f"out of range for {kind}")
                values.append(value - (1 << bits) if value >= (1 << (bits - 1)) else value)
            elif kind in ("f32", "f64"):
                values.append(float(text))
            else:
                raise ValueError(f"a {kind} parameter cannot be given on the command line")
        except ValueError as exc:
            raise UsageError(f"argument {i + 1} of {export} ({kind}): {text!r}: {exc}") from exc
    return values


def _format_result(result: object) -> str:
    if result is None:
        return "(no result)"
    if isinstance(result, (tuple, list)):
        return " ".join(_format_result(r) for r in result)
    if isinstance(result, float):
        return repr(result)
    return str(result)


def _last_line(last: BufferOperation) -> str:
    if not last.import_name:
        return "last operation: none"
    text = f"last operation: {last.import_name}"
    if last.import_name == "dispatch":
        text += f" kernel {last.kernel_id} count {last.count}"
    text += f", status {last.status}, outcome {last.outcome}"
    if last.reason_code != "NONE":
        text += f" ({last.reason_code}: {last.reason})"
    return text + f", {last.total * 1e3:.3f} ms"


def _device_line(host: Host) -> str:
    snap = host.buffer_snapshot()
    if snap.device:
        return f"device: {snap.device} ({snap.state})"
    return f"device: none ({snap.state}: {snap.reason})"


def cmd_run(args: argparse.Namespace) -> int:
    import wasmtime

    from .errors import GpuRequiredError, ModuleError
    from .host import Host
    from .host.engine import first_line, new_engine

    config = _load_config(args.config)
    changes = {}
    if args.cpu:
        changes["disabled"] = True
    if args.allow_software_adapter:
        changes["allow_software_adapter"] = True
    if args.require_gpu:
        changes["require_gpu"] = True
    if changes:
        config = config.with_changes(**changes)
    wasm = _load_module(args.module)
    export, raw_args = (args.call[0], args.call[1:]) if args.call else (None, [])
    # Check the export and its arguments before a device is opened (that can take a second).
    values = _convert_args(wasmtime.Module(new_engine(), wasm), export, raw_args) if export else []
    try:
        host = Host(config)
    except GpuRequiredError as exc:
        raise Failure(str(exc)) from exc
    with host:
        try:
            module = host.compile(wasm)
        except ModuleError as exc:
            raise UsageError(f"{args.module}: {exc}") from exc
        t0 = time.perf_counter()
        try:
            inst = host.instantiate(module)
        except wasmtime.Trap as exc:
            raise Failure(f"trap in the start function: {_trap_text(exc)}") from exc
        except ModuleError as exc:
            raise UsageError(f"{args.module}: {exc}") from exc
        except wasmtime.WasmtimeError as exc:
            raise Failure(f"the start function failed: {first_line(exc)}") from exc
        result = None
        if export:
            try:
                result = inst.call(export, *values)
            except wasmtime.Trap as exc:
                raise Failure(f"trap in {export}: {_trap_text(exc)}") from exc
        seconds = time.perf_counter() - t0
        if export:
            print(f"result: {_format_result(result)}")
        else:
            print("instantiated (start function ran); no --call given")
        print(_device_line(host))
        print(_last_line(host.buffer_snapshot().last))
        print(f"wall clock: {seconds * 1e3:.3f} ms (instantiate{' and call' if export else ''})")
    return 0


# -- demo -------------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import report_lines, run_demo
    from .errors import GpuRequiredError

    if args.cpu and args.require_gpu:
        raise UsageError("--require-gpu cannot be combined with --cpu")
    try:
        report = run_demo(args.cpu, args.require_gpu, args.allow_software_adapter, args.power_preference)
    except GpuRequiredError as exc:
        raise Failure(str(exc)) from exc
    if args.json:
        print(json.dumps(dict(asdict(report), ok=report.ok, problems=report.problems), indent=2))
    else:
        print("\n".join(report_lines(report)))
    return 0 if report.ok else 1


# -- bench ------------------------------------------------------------------------------------------
def bench_dir() -> Path | None:
    """bench/ of the source checkout: under the working directory, or beside an editable install."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        candidate = root / "bench"
        if candidate.is_dir() and any(candidate.glob("*.py")):
            return candidate
    return None


def benchmarks(directory: Path) -> dict[str, str]:
    """Runnable benchmark modules in bench/ (those with a __main__ block) and their first docstring line."""
    out = {}
    for path in sorted(directory.glob("*.py")):
        if path.stem.startswith("_") or path.stem == "common":
            continue
        text = path.read_text(errors="replace")
        if "__main__" not in text:
            continue
        try:
            doc = ast.get_docstring(ast.parse(text)) or ""
        except SyntaxError:
            doc = ""
        out[path.stem] = _summary(doc)
    return out


def _summary(doc: str, width: int = 100) -> str:
    """A docstring's first sentence (or first paragraph, shortened), on one line."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    if 0 < end < width:
        return paragraph[:end + 1]
    return paragraph if len(paragraph) <= width else paragraph[:width - 3].rstrip() + "..."


def cmd_bench(args: argparse.Namespace) -> int:
    directory = bench_dir()
    if directory is None:
        raise UsageError("no bench/ directory here: the benchmarks live in the source checkout, run from its root")
    found = benchmarks(directory)
    if not args.name:
        if args.args:
            raise UsageError("give a benchmark name before its arguments")
        print(f"benchmarks in {directory} (wagogpu bench NAME [ARG...] runs python -m bench.NAME):")
        width = max((len(n) for n in found), default=0)
        for name, doc in found.items():
            print(f"  {name:<{width}}  {doc}")
        return 0
    if args.name not in found:
        raise UsageError(f"unknown benchmark {args.name!r} (one of {', '.join(found) or 'none'})")
    sys.stdout.flush()
    return subprocess.run([sys.executable, "-m", f"bench.{args.name}", *args.args], cwd=directory.parent).returncode


# -- entry point ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Run WebAssembly guests with GPU-offloaded element kernels (wago_gpu_v1).",
                     epilog="exit status: 0 ok, 1 the work failed, 2 usage error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("info", help="GPU adapters and the one the plugin would use",
                       description="List GPU adapters, the one the plugin would choose and why it would run CPU-only.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--verbose", "-v", action="store_true", help="list every adapter feature")
    p.add_argument("--probe", action="store_true", help="also open (and close) the chosen device")
    p.add_argument("--allow-software-adapter", action="store_true", help="probe with software adapters allowed")
    p.add_argument("--power-preference", choices=("high-performance", "low-power"), default="high-performance")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("compile", help="print the WGSL of a guest's kernel",
                       description="Print the WGSL wagogpu generates for one kernel of a .wasm or .wat module.")
    p.add_argument("module", metavar="MODULE", help=".wasm or .wat file")
    p.add_argument("--kernel", metavar="NAME", help="kernel name (double) or export (wago_gpu.kernel.double)")
    p.add_argument("--binding", metavar="SLOT:TYPE:ACCESS", type=parse_binding, action="append", default=[],
                   help="a declared binding, e.g. 0:F32:read 1:f32:write (ACCESS read, write or rw); repeat")
    p.add_argument("--id", type=int, default=1, help="kernel ID (default 1)")
    p.add_argument("--relaxed-float", action="store_true", help="declare float consent (relaxed_float=True)")
    p.add_argument("--strict-float", action="store_true", help="exact integer-coded f32 arithmetic (strict_float=True)")
    p.add_argument("--legacy", metavar="EXPORT", help="compile a legacy (f32) -> f32 export instead")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a guest under a JSON config",
                       description="Instantiate MODULE under the Config in FILE.json and call one export.")
    p.add_argument("module", metavar="MODULE", help=".wasm or .wat file")
    p.add_argument("--config", metavar="FILE.json", required=True,
                   help='Config as JSON: {"kernels": [{"id": 1, "name": "double", "bindings": [[0, "F32", "read"], '
                        '[1, "F32", "write"]], "relaxed_float": true}], ...any Config field}')
    p.add_argument("--call", nargs="+", metavar=("EXPORT", "ARG"), help="export to call and its arguments")
    p.add_argument("--cpu", action="store_true", help="disabled=True")
    p.add_argument("--allow-software-adapter", action="store_true", help="allow_software_adapter=True")
    p.add_argument("--require-gpu", action="store_true", help="require_gpu=True")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="run the start, buffers and compiled examples",
                       description="Run the start, buffers and compiled (Zig, C) examples and say per kernel which "
                                   "path ran (GPU or CPU, and why), with timings.")
    p.add_argument("--cpu", action="store_true", help="never open a GPU")
    p.add_argument("--require-gpu", action="store_true", help="fail unless every kernel ran on a hardware GPU")
    p.add_argument("--allow-software-adapter", action="store_true", help="let the GPU path run on lavapipe/llvmpipe")
    p.add_argument("--power-preference", choices=("high-performance", "low-power"), default="high-performance")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="list or run a benchmark from bench/",
                       description="Without NAME, list the benchmarks in bench/; with NAME, run python -m bench.NAME "
                                   "with the remaining arguments (from the source checkout).")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARG")
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `wagogpu` command; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            raise UsageError("choose a command: info, compile, run, demo or bench (wagogpu --help)")
        return args.func(args)
    except UsageError as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except Failure as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
