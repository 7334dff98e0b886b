"""Raw access to wgpu-native through wgpu-py's cffi handle.

wgpu-py's object layer costs tens of microseconds per dispatch (Python
wrappers, descriptor dicts, a poll thread and promises per map).  The hot
paths here call the C API directly with pre-built structs; wgpu-py is used
only to find adapters.  Everything is written against wgpu-py 0.32
(wgpu-native 29), whose C API this module's struct names follow.
"""

from __future__ import annotations

import itertools
from typing import Any

from wgpu.backends.wgpu_native._ffi import ffi, lib
from wgpu.backends.wgpu_native._helpers import get_wgpu_instance

__all__ = ["ffi", "lib", "get_wgpu_instance", "MapCell", "map_callback_info", "string_view", "c_str"]

# WebGPU constants (webgpu.h; static consts are not reachable through cffi ABI mode).
USAGE_MAP_READ = 0x1
USAGE_MAP_WRITE = 0x2
USAGE_COPY_SRC = 0x4
USAGE_COPY_DST = 0x8
USAGE_UNIFORM = 0x40
USAGE_STORAGE = 0x80
USAGE_QUERY_RESOLVE = 0x200
MAP_READ = 0x1
MAP_WRITE = 0x2
STAGE_COMPUTE = 0x4
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
STATUS_SUCCESS = 1  # WGPUMapAsyncStatus_Success, WGPUPopErrorScopeStatus_Success, WGPUStatus_Success
ERROR_NONE = 1  # WGPUErrorType_NoError
ERROR_NAMES = {2: "validation", 3: "out-of-memory", 4: "internal", 5: "unknown"}


def c_str(view: Any) -> str:
    """Python str from a WGPUStringView (empty for NULL)."""
    if view.data == ffi.NULL:
        return ""
    n = view.length
    raw = ffi.string(view.data) if n == 0xFFFFFFFFFFFFFFFF else ffi.unpack(view.data, n)
    return raw.decode("utf-8", "replace")


def string_view(target: Any, text: str | bytes) -> Any:
    """Point WGPUStringView ``target`` at ``text``; returns the buffer to keep alive."""
    data = text.encode() if isinstance(text, str) else text
    buf = ffi.new("char[]", data)
    target.data = buf
    target.length = len(data)
    return buf


class MapCell:
    """Result slot of one wgpuBufferMapAsync: ``status`` 0 until the callback ran."""

    __slots__ = ("key", "status", "message")

    def __init__(self, key: int) -> None:
        self.key = key
        self.status = 0
        self.message = ""


_cells: dict[int, MapCell] = {}
_keys = itertools.count(1)


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def _on_map(status: int, message: Any, userdata1: Any, userdata2: Any) -> None:
    # Runs inside wgpuDevicePoll on the polling thread; must never raise.
    cell = _cells.pop(int(ffi.cast("uintptr_t", userdata1)), None)
    if cell is not None:
        if status != STATUS_SUCCESS:
            try:
                cell.message = c_str(message) or f"map status {int(status)}"
            except Exception:
                cell.message = f"map status {int(status)}"
        cell.status = int(status)


def new_cell() -> MapCell:
    """A registered cell; pass ``cell_userdata(cell)`` as userdata1 of a map or work-done callback info."""
    key = next(_keys)
    cell = MapCell(key)
    _cells[key] = cell
    return cell


def cell_userdata(cell: MapCell) -> Any:
    return ffi.cast("void *", cell.key)


def new_map_info() -> Any:
    """A reusable WGPUBufferMapCallbackInfo (set userdata1 per call; it is copied by value)."""
    info = ffi.new("WGPUBufferMapCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowSpontaneous
    info.callback = _on_map
    return info


def new_work_done_info() -> Any:
    """A reusable WGPUQueueWorkDoneCallbackInfo (set userdata1 per call)."""
    info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowSpontaneous
    info.callback = _on_work_done
    return info


def map_callback_info() -> tuple[MapCell, Any]:
    """A fresh MapCell and a WGPUBufferMapCallbackInfo of its own that fills it (one-off use)."""
    cell = new_cell()
    info = new_map_info()
    info.userdata1 = cell_userdata(cell)
    return cell, info


@ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
def _on_work_done(status: int, message: Any, userdata1: Any, userdata2: Any) -> None:
    # wgpu-py's on_submitted_work_done_sync fails on 0.32 (callback signature); this one matches the header.
    _on_map(status, message, userdata1, userdata2)


def work_done_callback_info() -> tuple[MapCell, Any]:
    """A fresh cell and a WGPUQueueWorkDoneCallbackInfo of its own that fills it when all submitted
    work is done: the completion fence (wgpuDevicePoll's non-blocking "queue empty" is not reliable
    on wgpu-native 29; it reports true while a dispatch is still running)."""
    cell = new_cell()
    info = new_work_done_info()
    info.userdata1 = cell_userdata(cell)
    return cell, info


def forget_cell(cell: MapCell) -> None:
    """Drop a cell whose callback will never be needed (buffer released)."""
    _cells.pop(cell.key, None)
