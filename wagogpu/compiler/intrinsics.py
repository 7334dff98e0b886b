"""The wago_gpu_v1 imports as the compiler sees them, derived from the ABI table (abi_v1.json).

No import name is written here: getBuffer is the one GPU intrinsic without an element type, reads
are the typed intrinsics with a result, writes the typed ones without. Signatures are kept as the
Wasm value-type bytes a decoder compares against (docs/design/compiler.md §1.3.3).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..abi.table import ABI_MODULE, IMPORTS, TYPE_INFO, ElementType, ImportSpec

# Wasm binary encodings of the value types the ABI table names.
VALUE_TYPE_BYTE: dict[str, int] = {"i32": 0x7F, "i64": 0x7E, "f32": 0x7D, "f64": 0x7C, "anyref": 0x6E}
I32 = VALUE_TYPE_BYTE["i32"]
F32 = VALUE_TYPE_BYTE["f32"]
I64 = VALUE_TYPE_BYTE["i64"]
F64 = VALUE_TYPE_BYTE["f64"]

ABI_MODULE_BYTES = ABI_MODULE.encode()


class IntrinsicKind(enum.IntEnum):
    GET = 1  # getBuffer: selects a slot's buffer
    READ = 2  # readBuffer<T>
    WRITE = 3  # writeBuffer<T>
    MANAGEMENT = 4  # create/free/bind/dispatch/bulk transfers: never inside a kernel


@dataclass(frozen=True, slots=True)
class Intrinsic:
    spec: ImportSpec
    kind: IntrinsicKind
    elem: ElementType | None  # element type of a read/write
    scalar: int  # Wasm value-type byte of the element (0 when not read/write)
    gpu: bool  # the reference runs it on the GPU (false for the 64-bit types, two words each here)
    params: bytes  # canonical parameter value-type bytes
    results: bytes  # canonical result value-type bytes


def _classify(spec: ImportSpec) -> Intrinsic:
    elem = spec.scalar_type
    if elem is not None:
        info = TYPE_INFO[elem]
        kind = IntrinsicKind.READ if spec.results else IntrinsicKind.WRITE
        scalar, gpu = VALUE_TYPE_BYTE[info.scalar], info.gpu
    else:
        kind = IntrinsicKind.GET if spec.gpu_intrinsic else IntrinsicKind.MANAGEMENT
        scalar, gpu = 0, False
    return Intrinsic(spec, kind, elem, scalar, gpu,
                     bytes(VALUE_TYPE_BYTE[t] for t in spec.params),
                     bytes(VALUE_TYPE_BYTE[t] for t in spec.results))


INTRINSICS_BY_NAME: dict[bytes, Intrinsic] = {s.name.encode(): _classify(s) for s in IMPORTS}

if sum(1 for i in INTRINSICS_BY_NAME.values() if i.kind is IntrinsicKind.GET) != 1:  # pragma: no cover
    raise RuntimeError("the ABI table must have exactly one slot-selecting GPU intrinsic")
