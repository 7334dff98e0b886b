"""The wago_gpu_v1 import table, loaded once from abi_v1.json (the single source of truth).

The closed sets (ElementType, Status, LegacyStatus) are declared as classes so that type checkers
and readers see their members, and checked against the JSON at import: a table that disagrees
stops the import rather than letting two definitions drift.
"""
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



class ElementType(enum.IntEnum):
    """Buffer element type IDs as they travel on the wire (u32)."""

    I8 = 1
    U8 = 2
    I16 = 3
    U16 = 4
    I32 = 5
    U32 = 6
    F16 = 7
    F32 = 8
    I64 = 9
    U64 = 10
    F64 = 11


class Status(enum.IntEnum):
    """wago_gpu_v1 status codes returned (or trapped with) by the imports."""

    OK = 0
    CPU_FALLBACK = 1
    INVALID_HANDLE = 2
    INVALID_RANGE = 3
    TYPE_MISMATCH = 4
    INVALID_BINDING = 5
    LIMIT_EXCEEDED = 6
    DEVICE_ERROR = 7
    CONTENTS_LOST = 8
    CANCELLED = 9
    INVALID_KERNEL = 10
    UNSUPPORTED_STORAGE = 11
    INVALID_STATE = 12


class LegacyStatus(enum.IntEnum):
    """Statuses of the legacy wago_gpu.run / run_batch imports."""

    SUCCESS = 0
    FALLBACK = 1
    INVALID_RANGE = 2
    INVALID_BATCH = 3


def _check_members(cls: type[enum.IntEnum], rows: list[dict[str, object]], key: str) -> None:
    declared = {m.name: int(m) for m in cls}
    listed = {str(r["name"]): r[key] for r in rows}
    if declared != listed:
        raise ImportError(f"abi_v1.json and {cls.__name__} disagree: {listed} against {declared}")


_check_members(ElementType, _TABLE["element_types"], "id")
_check_members(Status, _TABLE["statuses"], "value")
_check_members(LegacyStatus, _TABLE["legacy"]["statuses"], "value")


class Access(enum.IntEnum):
    """Declared binding permission of a kernel slot."""

    READ = 1
    WRITE = 2
    READ_WRITE = 3


class NumberKind(enum.Enum):
    """What an element's bits mean."""

    INT = "int"
    UINT = "uint"
    FLOAT = "float"


@dataclass(frozen=True)
class TypeInfo:
    """One element type's row of abi_v1.json: every layer reads its facts from here (the accessor's
    Wasm, the compiler's WGSL, the host's numpy views, the buffers' device stride, the test corpus)."""

    type: ElementType
    stored_bytes: int
    scalar: str  # Wasm value type used by readBuffer*/writeBuffer*
    gpu: bool  # the original subset's GPU types (one 32-bit word each); the 64-bit types also run on the
    # GPU, as two words each (docs/design/abi.md §1.2), past that subset
    kind: NumberKind
    numpy: str  # numpy dtype name of the stored form (F16: float16, i.e. binary16 bits), little-endian
    wasm_load: str  # memory load of the stored form into `scalar` (F16: its bits, then half_to_f32)
    wasm_store: str
    gpu_words: int  # u32 words per element on the device: 1, or 2 (a vec2<u32>) for 64-bit types
    wgsl_load: str  # WGSL load of one element's bits (u32; vec2<u32> if 64-bit; {} is the slot number)
    wgsl_store: str  # WGSL wrapping of those bits stored as one element ({} is the value)

    @property
    def half(self) -> bool:
        """Binary16: converted to and from f32 on every access."""
        return self.kind is NumberKind.FLOAT and self.stored_bytes == 2


def _type_info(e: dict[str, object]) -> TypeInfo:
    """A TypeInfo from its JSON row (the fields in the dataclass's order, id as the ElementType)."""
    fields = {name: e[name] for name in TypeInfo.__dataclass_fields__ if name != "type"}
    fields["kind"] = NumberKind(e["kind"])
    return TypeInfo(ElementType(e["id"]), **fields)  # type: ignore[arg-type]


TYPE_INFO: dict[ElementType, TypeInfo] = {ElementType(e["id"]): _type_info(e) for e in _TABLE["element_types"]}


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
