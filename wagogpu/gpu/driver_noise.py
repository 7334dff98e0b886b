"""Silences the "error: XDG_RUNTIME_DIR is invalid or not set in the environment." lines.

Where they come from: wgpu's GL backend (wgpu-hal, EGL) checks for a Wayland display when it
starts, by loading libwayland-client and calling ``wl_display_connect``. Without XDG_RUNTIME_DIR
(a container, a CI job, ssh without a login session) libwayland logs that line to stderr through
its client log handler, once per GL instance wgpu makes: four to eight lines on every command.
Nothing is wrong: there is no Wayland display to use, and GL adapters open without one.

libwayland lets a program replace that handler (``wl_log_set_handler_client``). It is replaced
here by one that drops the message, and only when the message's own condition holds (XDG_RUNTIME_DIR
unset or not an absolute path, and WAYLAND_DISPLAY not an absolute socket path): then no Wayland
client in this process can connect anyway, so nothing of use is lost. Where libwayland-client is
not installed nothing is loaded and nothing changes. ``WAGOGPU_KEEP_DRIVER_LOG=1`` keeps the lines.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["KEEP_ENV", "silence_wayland_log", "wayland_cannot_connect"]

KEEP_ENV = "WAGOGPU_KEEP_DRIVER_LOG"
_LIBRARY = "libwayland-client.so.0"
# void (*)(const char *format, va_list args): va_list is passed as a pointer on every ABI we run on.
_HANDLER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)
_installed: list[object] = []  # the handler, kept alive for the process's life once installed


def wayland_cannot_connect(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether libwayland would refuse to connect for want of XDG_RUNTIME_DIR (and say so)."""
    runtime_dir = environ.get("XDG_RUNTIME_DIR", "")
    display = environ.get("WAYLAND_DISPLAY", "")
    return not runtime_dir.startswith("/") and not display.startswith("/")


def _drop(_format: bytes | None, _args: int | None) -> None:
    return None


def silence_wayland_log() -> bool:
    """Install the silent handler where the message would be printed; True once it is installed."""
    if _installed:
        return True
    if os.environ.get(KEEP_ENV) == "1" or not wayland_cannot_connect():
        return False
    try:
        library = ctypes.CDLL(_LIBRARY)
        setter = library.wl_log_set_handler_client
    except (OSError, AttributeError):  # no libwayland here: wgpu will not print through it either
        return False
    handler = _HANDLER_TYPE(_drop)
    setter.argtypes = [_HANDLER_TYPE]
    setter.restype = None
    setter(handler)
    _installed.append(handler)
    return True
