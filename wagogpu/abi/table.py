"""The wago_gpu_v1 import table, loaded once from abi_v1.json (the single source of truth)."""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from importlib import resources

_TABLE = json.loads(resources.files(__package__).joinpath("abi_v1.json").read_text())

ABI_MODULE: str = _TABLE["abi"]
LEGACY_MODULE: str = _TABLE["legacy"]["module"]
SLOT_COUNT: int = _TABLE["slots_per_instance"]
LEGACY_MAX_PASSES: int = _TABLE["legacy"]["max_passes"]
SCALAR_TRAP_FORMAT: str = _TABLE["scalar_trap_format"]

ElementType = enum.IntEnum("ElementType", {e["name"]: e["id"] for e in _TABLE["element_types"]})
ElementType.__doc__ = "Buffer element type IDs as they travel on the wire (u32)."
Status = enum.IntEnum("Status", {s["name"]: s["value"] for s in _TABLE["statuses"]})
Status.__doc__ = "wago_gpu_v1 status codes returned (or trapped with) by the imports."
LegacyStatus = enum.IntEnum("LegacyStatus", {s["name"]: s["value"] for s in _TABLE["legacy"]["statuses"]})


class Access(enum.IntEnum):
    """Declared binding permission of a kernel slot."""

    READ = 1
    WRITE = 2
    READ_WRITE = 3


@dataclass(frozen=True)
class TypeInfo:
    type: ElementType
    stored_bytes: int
    scalar: str  # Wasm value type used by readBuffer*/writeBuffer*
    gpu: bool  # one 32-bit word per element on the GPU; 64-bit types stay on the CPU


TYPE_INFO: dict[ElementType, TypeInfo] = {
    ElementType(e["id"]): TypeInfo(ElementType(e["id"]), e["stored_bytes"], e["scalar"], e["gpu"])
    for e in _TABLE["element_types"]
}


@dataclass(frozen=True)
class ImportSpec:
    module: str
    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    gpu_intrinsic: bool = False
    phase: str = ""

    def wat_import(self, local: str | None = None) -> str:
        """The WAT import declaration a guest writes for this import, bound to $local."""
        params = f" (param {' '.join(self.params)})" if self.params else ""
        results = f" (result {' '.join(self.results)})" if self.results else ""
        return f'(import "{self.module}" "{self.name}" (func ${local or self.name}{params}{results}))'

    @property
    def scalar_type(self) -> ElementType | None:
        """Element type of a readBuffer*/writeBuffer* import, else None."""
        for prefix in ("readBuffer", "writeBuffer"):
            if self.name.startswith(prefix):
                return ElementType[self.name[len(prefix):]]
        return None


IMPORTS: tuple[ImportSpec, ...] = tuple(
    ImportSpec(ABI_MODULE, i["name"], tuple(i["params"]), tuple(i["results"]), i["gpu_intrinsic"], i["phase"])
    for i in _TABLE["imports"]
)
IMPORTS_BY_NAME: dict[str, ImportSpec] = {i.name: i for i in IMPORTS}
LEGACY_IMPORTS: tuple[ImportSpec, ...] = tuple(
    ImportSpec(LEGACY_MODULE, i["name"], tuple(i["params"]), tuple(i["results"])) for i in _TABLE["legacy"]["imports"]
)

# Imports served by the generated accessor module (Wasm speed); the rest are Python host functions.
SCALAR_IMPORTS: tuple[str, ...] = tuple(
    i.name for i in IMPORTS if i.name == "getBuffer" or i.scalar_type is not None
)
GC_IMPORTS: tuple[str, ...] = tuple(i.name for i in IMPORTS if "anyref" in i.params)

_PACKED = _TABLE["packed_result"]
_HANDLE_SHIFT = _PACKED["handle_bits"][0]
_STATUS_SHIFT = _PACKED["status_bits"][0]


def pack_result(status: int, handle: int) -> int:
    """createBufferPacked's i64: status in the high half, handle (never sign-extended) low."""
    return ((status & 0xFFFFFFFF) << _STATUS_SHIFT) | ((handle & 0xFFFFFFFF) << _HANDLE_SHIFT)


def unpack_result(packed: int) -> tuple[int, int]:
    """(status, handle) from a packed result, accepting the signed i64 Wasm hands back."""
    packed &= 0xFFFFFFFFFFFFFFFF
    return (packed >> _STATUS_SHIFT) & 0xFFFFFFFF, (packed >> _HANDLE_SHIFT) & 0xFFFFFFFF


def scalar_trap_message(status: int) -> str:
    return SCALAR_TRAP_FORMAT.format(status=int(status))
