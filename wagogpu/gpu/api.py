"""Which backend module opens a device: the raw one (wgpu-native's C API, _native.py) unless asked
otherwise, the environment sets WAGOGPU_PUBLIC_WGPU=1, or it refuses the installed wgpu.

Kept apart from backend.py, the interface both backends implement, so that the interface imports
neither backend (each backend module imports the interface).
"""

from __future__ import annotations

import logging
import os

from .backend import PUBLIC_ENV, BackendModule, DeviceApi
from .errors import GpuUnavailable

__all__ = ["load_api"]

_log = logging.getLogger("wagogpu.gpu")


def load_api(requested: DeviceApi | str | None) -> tuple[DeviceApi, BackendModule]:
    """The backend module to open a device with: the raw one unless asked otherwise, the
    environment sets WAGOGPU_PUBLIC_WGPU=1 or it refuses the installed wgpu (its import checks
    the version it was tested with)."""
    api = DeviceApi(requested) if requested is not None else None
    if api is None and os.environ.get(PUBLIC_ENV) == "1":
        api = DeviceApi.PUBLIC
    if api is not DeviceApi.PUBLIC:
        try:
            from . import _native

            return DeviceApi.RAW, _native
        except ImportError as exc:
            if api is DeviceApi.RAW:
                raise GpuUnavailable(f"the raw wgpu-native path is unavailable: {exc}") from exc
            _log.info("wgpu-native's C API is not usable (%s); using wgpu-py's public API", exc)
    from . import _public

    return DeviceApi.PUBLIC, _public
