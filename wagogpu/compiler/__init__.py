"""Wasm -> WGSL compilers: the buffer-kernel compiler, the legacy scalar compiler, and the module
inspection the host runs at compile time. Imports neither wasmtime nor wgpu.
"""
from .buffer import compile_buffer_wgsl
from .explain import Blocker, BlockerKind, explain_kernel, in_words
from .contract import CompileError, CompileErrorKind, KernelClass, KernelPlan, MemoryDecl, ModuleContract
from .inspect import inspect_module
from .legacy import compile_wgsl
from .wgsl import parameter_block, workgroup_grid

__all__ = ["compile_buffer_wgsl", "compile_wgsl", "CompileError", "CompileErrorKind", "inspect_module",
           "workgroup_grid", "parameter_block", "KernelClass", "KernelPlan", "MemoryDecl", "ModuleContract",
           "explain_kernel", "in_words", "Blocker", "BlockerKind"]
