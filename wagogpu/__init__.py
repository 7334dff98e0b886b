"""wagogpu: run WebAssembly guests on wasmtime and offload their element kernels to a GPU (wago_gpu_v1)."""
from .abi.table import Access, ElementType, Status
from .compiler.contract import CompileError, CompileErrorKind
from .config import BindingConfig, Config, KernelConfig
from .host import Host, Instance, Module


def compile_buffer_wgsl(source: bytes, kernel: KernelConfig) -> str:
    """WGSL for one buffer kernel of a module; raises CompileError."""
    from .compiler import compile_buffer_wgsl as _compile

    return _compile(source, kernel)


def compile_wgsl(source: bytes, export: str) -> str:
    """WGSL for a legacy (f32) -> f32 kernel; raises CompileError."""
    from .compiler import compile_wgsl as _compile

    return _compile(source, export)


__all__ = ["Host", "Config", "KernelConfig", "BindingConfig", "Module", "Instance", "ElementType", "Access",
           "Status", "CompileError", "CompileErrorKind", "compile_buffer_wgsl", "compile_wgsl"]
__version__ = "0.1.0"
