"""ABI facts (from abi_v1.json), F16 rules and the generated Wasm adapter modules."""
from .table import (ABI_MODULE, GC_IMPORTS, IMPORTS, IMPORTS_BY_NAME, LEGACY_IMPORTS, LEGACY_MODULE,
                    SCALAR_IMPORTS, SLOT_COUNT, TYPE_INFO, Access, ElementType, ImportSpec, LegacyStatus,
                    Status, pack_result, scalar_trap_message, unpack_result)
from .f16 import f32_bits_to_half, half_to_f32_bits

__all__ = ["ABI_MODULE", "GC_IMPORTS", "IMPORTS", "IMPORTS_BY_NAME", "LEGACY_IMPORTS", "LEGACY_MODULE",
           "SCALAR_IMPORTS", "SLOT_COUNT", "TYPE_INFO", "Access", "ElementType", "ImportSpec", "LegacyStatus",
           "Status", "pack_result", "scalar_trap_message", "unpack_result", "f32_bits_to_half", "half_to_f32_bits"]
