"""Whether a failed job may run again: the import modules of a Wasm binary, read without compiling it.

A pool job runs on a fresh instance whose memory and buffers no one else sees and which closes
with the job, so a failed attempt leaves nothing behind: the result object, published only by an
attempt that succeeded, is the job's one visible effect. That holds while the guest can reach
nothing but the wago_gpu_v1 (and legacy wago_gpu) imports. A pool defines no host functions, so
the only other imports a module can link against are WASI's, which write to the actor's stdout
and stderr: a job whose module imports anything else is never retried.

The compiler's bounded reader walks the import section only and answers None for anything it does not understand
(a newer encoding, a truncated binary), which counts as "not retry-safe".
"""
from __future__ import annotations

import wasmtime

from ..compiler.reader import Reader, ReaderError

ISOLATED_IMPORT_MODULES = frozenset({"wago_gpu_v1", "wago_gpu"})
_IMPORT_SECTION = 2
_REF_PREFIXES = (0x63, 0x64)  # (ref null ht) / (ref ht): a heap type follows


def _name(r: Reader) -> str:
    return r.take(r.u32()).decode("utf-8")


def _value_type(r: Reader) -> None:
    if r.byte() in _REF_PREFIXES:
        r.leb(33, True)  # heap type: an abbreviation or a type index (s33)


def _limits(r: Reader) -> None:
    flags = r.byte()
    r.leb(64, False)  # minimum (64-bit for memory64)
    if flags & 0x01:
        r.leb(64, False)  # maximum
    if flags & 0x08:
        r.u32()  # custom page size (log2)


def _skip_descriptor(r: Reader) -> None:
    kind = r.byte()
    if kind == 0x00:  # function: type index
        r.u32()
    elif kind == 0x01:  # table: reference type, limits
        _value_type(r)
        _limits(r)
    elif kind == 0x02:  # memory: limits
        _limits(r)
    elif kind == 0x03:  # global: value type, mutability
        _value_type(r)
        r.byte()
    elif kind == 0x04:  # tag: attribute, type index
        r.byte()
        r.u32()
    else:
        raise ValueError(f"unknown import kind {kind:#x}")


def import_modules(wasm: bytes) -> frozenset[str] | None:
    """The module names a core Wasm binary imports from; None if it cannot be read."""
    if wasm[:8] != b"\0asm\x01\0\0\0":
        return None
    r = Reader(wasm, 8)
    try:
        while r.pos < r.end:
            section, size = r.byte(), r.u32()
            start = r.pos
            if start + size > r.end:
                return None  # a section runs past the end: the binary is cut short
            if section == _IMPORT_SECTION:
                body = Reader(wasm, start, start + size)
                modules = set()
                for _ in range(body.u32()):
                    modules.add(_name(body))
                    _name(body)
                    _skip_descriptor(body)
                return frozenset(modules)
            r.pos = start + size
        return frozenset()
    except (ReaderError, ValueError, UnicodeDecodeError):
        return None


def wasm_bytes(source: bytes | str) -> bytes:
    """The binary of a module given as Wasm bytes or WAT text (wasmtime's text parser)."""
    if isinstance(source, str):
        return bytes(wasmtime.wat2wasm(source))
    data = bytes(source)
    if data[:4] == b"\0asm":
        return data
    return bytes(wasmtime.wat2wasm(data.decode("utf-8")))


def retry_safe(source: bytes | str) -> bool:
    """True when the module can reach nothing outside its own instance (see the module docstring).

    Text that does not parse is not retry-safe; the actor reports the parse error when it compiles.
    """
    try:
        modules = import_modules(wasm_bytes(source))
    except (wasmtime.WasmtimeError, UnicodeDecodeError):
        return False
    return modules is not None and modules <= ISOLATED_IMPORT_MODULES
