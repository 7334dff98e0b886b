"""`wagogpu info`: the adapters wgpu sees, numbered as Config(adapter=N) counts them, the one the
plugin would choose and why it would run CPU-only; --probe opens the device it would open."""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from importlib import metadata
from typing import TYPE_CHECKING, Any

from .common import UsageError, one_line

if TYPE_CHECKING:  # pragma: no cover
    from ..gpu.adapters import AdapterInfo

KEY_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size", "max-compute-workgroups-per-dimension",
              "max-compute-invocations-per-workgroup")
SETTINGS = (("default settings", "default"), ("with --allow-software-adapter", "allow_software_adapter"))


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def wgpu_problem() -> str:
    """Why the GPU stack cannot load here ("" when it can): GpuDevice loads wgpu and its native library."""
    try:
        from ..gpu import GpuDevice  # noqa: F401
    except Exception as exc:  # a missing wheel or native library
        return f"wgpu failed to load: {one_line(str(exc)) or type(exc).__name__}"
    return ""


def choice(adapters: list[AdapterInfo], power_preference: str, allow_software: bool, problem: str) -> dict[str, object]:
    from ..gpu.adapters import rank_adapters

    ranked, why = rank_adapters([(i, a) for i, a in enumerate(adapters)], power_preference, allow_software)
    if ranked:
        index, info = ranked[0]
        return {"adapter": index, "name": info.name, "summary": info.summary(), "cpu_only_reason": ""}
    return {"adapter": None, "name": "", "summary": "", "cpu_only_reason": problem or why}


def probe(args: argparse.Namespace) -> dict[str, object]:
    """Open (and close) the device the plugin would open with these settings."""
    from ..gpu import AdapterNotFound, GpuDevice

    t0 = time.perf_counter()
    try:
        device = GpuDevice.open(power_preference=args.power_preference,
                                allow_software_adapter=args.allow_software_adapter,
                                adapter=args.adapter, backend=args.backend)
    except AdapterNotFound as exc:
        raise UsageError(f"--adapter/--backend: {one_line(str(exc))}") from None
    except Exception as exc:
        return {"opened": False, "adapter": "", "reason": one_line(str(exc)), "seconds": time.perf_counter() - t0}
    try:
        opened = time.perf_counter() - t0
        return {"opened": True, "adapter": device.info.summary(), "timestamps": bool(device.has_timestamps),
                "reason": "", "seconds": opened, "loop_limits": asdict(device.loop_limits)}
    finally:
        device.close()


def loop_limits_line(limits: dict[str, Any]) -> str:
    """What the adapter does to long loops, and the budget a one-loop kernel gets there."""
    if limits["error"]:
        return f"{limits['error']}; loop kernels fall back to the CPU"
    if limits["cut"] is None:
        return f"no cut seen in {limits['probed_passes']:,} passes; budget: the compiler's"
    return (f"cut after {limits['cut']:,} passes shared by {limits['lanes']} invocations; a one-loop kernel "
            f"may make {limits['budget']:,} passes (measured in {limits['seconds'] * 1e3:.0f} ms)")


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    from .. import __version__
    from ..gpu import list_adapters
    from ..host.cputhreads import cpu_thread_count

    problem = wgpu_problem()
    adapters = [] if problem else list_adapters()
    report: dict[str, Any] = {
        "wagogpu": __version__, "wasmtime": version("wasmtime"), "wgpu": version("wgpu"),
        "numpy": version("numpy"), "power_preference": args.power_preference, "wgpu_problem": problem,
        "adapters": [dict(asdict(a), index=i, timestamp_query="timestamp-query" in a.features, f64_kernels=a.has_f64)
                     for i, a in enumerate(adapters)],
        "choice": {key: choice(adapters, args.power_preference, key != "default", problem) for _, key in SETTINGS},
        "cpu_threads": cpu_thread_count(0),
    }
    if args.probe:
        report["probe"] = dict(probe(args), allow_software_adapter=args.allow_software_adapter,
                               asked_adapter=args.adapter, asked_backend=args.backend)
    return report


def print_adapter(index: int, a: dict[str, Any], verbose: bool) -> None:
    print(f"  [{index}] {a['name']}")
    print(f"      vendor {a['vendor']}, backend {a['backend']}, type {a['adapter_type']}, driver {a['driver'] or '?'}, "
          f"software: {'yes' if a['is_software'] else 'no'}")
    features = a["features"]
    flags = ", ".join(f"{f}: {'yes' if f in features else 'no'}"
                      for f in ("timestamp-query", "shader-f16", "shader-f64", "shader-int64"))
    print(f"      {flags}; {len(features)} features" + ("" if verbose else " (--verbose lists them)"))
    print(f"      f64 arithmetic in kernels: "
          f"{'on the GPU' if a['f64_kernels'] else 'CPU only (needs shader-f64 and shader-int64)'}")
    if verbose:
        print(f"      features: {', '.join(features)}")
    limits = ", ".join(f"{k} {a['limits'][k]}" for k in KEY_LIMITS if k in a["limits"])
    if limits:
        print(f"      limits: {limits}")


def print_report(report: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"wagogpu {report['wagogpu']} (wasmtime {report['wasmtime']}, wgpu {report['wgpu']}, "
          f"numpy {report['numpy']})")
    print(f"CPU threads: {report['cpu_threads']} (Config(cpu_kernels=True, cpu_threads=0) splits a CPU kernel's "
          "range across this many)")
    if report["wgpu_problem"]:
        print(report["wgpu_problem"])
    adapters = report["adapters"]
    print(f"adapters ({len(adapters)}; Config(adapter=INDEX) or --adapter INDEX picks one):" if adapters
          else "adapters: none")
    for a in adapters:
        print_adapter(a["index"], a, args.verbose)
    for label, key in SETTINGS:
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
            print(f"  loops: {loop_limits_line(p['loop_limits'])}")
        else:
            print(f"probe ({setting}): no device: {p['reason']}")


def cmd_info(args: argparse.Namespace) -> int:
    if (args.adapter is not None or args.backend is not None) and not args.probe:
        raise UsageError("--adapter and --backend choose the device --probe opens; add --probe")
    report = build_report(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, args)
    return 0
