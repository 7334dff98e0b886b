"""Small helpers the examples share: flags, and saying which path ran and why."""
from __future__ import annotations

import argparse

from wagogpu import Host


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cpu", action="store_true", help="never open a GPU (disabled=True)")
    parser.add_argument("--require-gpu", action="store_true", help="fail unless a hardware GPU adapter opens")
    parser.add_argument("--allow-software-adapter", action="store_true",
                        help="let the GPU path run on a CPU Vulkan/GL implementation (lavapipe, llvmpipe)")
    return parser


def device_line(host: Host) -> str:
    snap = host.buffer_snapshot()
    if snap.device:
        return f"device: {snap.device} ({snap.state})"
    return f"device: none ({snap.state}: {snap.reason})"


def path_name(status: int) -> str:
    return {0: "GPU", 1: "CPU (fallback)"}.get(status, f"error status {status}")
