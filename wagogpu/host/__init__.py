"""The host layer: Host, Module and Instance, the runtime context handed to the import functions
(grouped: management, dispatch, transfers, accessor hooks), the legacy runner, engine set-up, module
sources (source.py), the host's own imports (definitions.py), WASI (wasi.py), host-side buffer
access (access.py), exports read on first use (exports.py), memory exports and the wasmtime edge
(_wasmtime.py, the one user of wasmtime-py's internals)."""
from ..errors import GpuRequiredError, ModuleError
from .context import RuntimeContext
from .host import Host
from .instance import Instance
from .module import Module

__all__ = ["Host", "Instance", "Module", "RuntimeContext", "GpuRequiredError", "ModuleError"]
