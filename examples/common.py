"""Small helpers the examples share: flags, and saying which path ran and why."""
from __future__ import annotations

import argparse

from wagogpu import Host, KernelConfig, Module, Status


def base_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--cpu", action="store_true", help="never open a GPU (disabled=True)")
    parser.add_argument("--require-gpu", action="store_true", help="fail unless a hardware GPU adapter opens")
    parser.add_argument("--allow-software-adapter", action="store_true",
                        help="let the GPU path run on a CPU Vulkan/GL implementation (lavapipe, llvmpipe)")
    return parser


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--cpu and --require-gpu contradict each other (as in the reference's examples)."""
    if args.cpu and args.require_gpu:
        parser.error("--require-gpu cannot be combined with --cpu")


def device_line(host: Host) -> str:
    snap = host.buffer_snapshot()
    if snap.device:
        return f"device: {snap.device} ({snap.state})"
    return f"device: none ({snap.state}: {snap.reason})"


def status_name(status: int) -> str:
    try:
        return Status(status).name
    except ValueError:
        return f"status {status}"


def record_reason(reason_code: str, reason: str) -> str:
    """A dispatch record's reason; a missing device is explained once, on the device line."""
    if reason_code == "NO_DEVICE":
        return "NO_DEVICE: see the device line"
    return f"{reason_code}: {reason}"


def fallback_reason(host: Host, module: Module, kernel: KernelConfig, count: int) -> str:
    """Why a dispatch that returned 1 ran on the CPU, from what the host shows after the guest returned.

    For dispatches made inside a start function or a guest's own run(), buffer_snapshot().last has
    moved on to a later import, so this follows the host's decision order with the public
    diagnostics instead: disabled, the kernel itself (outside the GPU subset, no float consent),
    the min_elements threshold, a failed pipeline, no device.
    """
    snap = host.buffer_snapshot()
    if snap.state == "DISABLED":
        return "GPU disabled"
    diag = next((d for d in snap.kernels if d.module == module.id and d.kernel_id == kernel.id), None)
    if diag is not None and diag.state == "CPU_ONLY" and diag.reason and diag.reason != snap.reason:
        return diag.reason  # the kernel itself: outside the GPU subset, or no relaxed_float consent
    if count < kernel.min_elements:
        return f"count {count} below min_elements {kernel.min_elements}"
    if diag is not None and diag.state == "PIPELINE_FAILED":
        return f"pipeline failed: {diag.reason}"
    return "no usable GPU device, see the device line"


def explain(host: Host, module: Module, kernel: KernelConfig, status: int, count: int) -> str:
    """'GPU', 'CPU fallback (why)' or 'error <STATUS>' for a dispatch status the guest saved."""
    if status == Status.OK:
        return "GPU"
    if status == Status.CPU_FALLBACK:
        return f"CPU fallback ({fallback_reason(host, module, kernel, count)})"
    return f"error {status_name(status)}"
