"""The kernel contract every layer shares: what a kernel declares, the codes its shader reports,
the parameter block and the dispatch grid (docs/design/abi.md §6-7, docs/design/compiler.md §1.3).

The compiler, the buffer layer and the host all need these facts, so they live here, below all of
them. KernelConfig and BindingConfig only record what the user wrote (checked by type, so that a
bad kernel can still be reported by compile_buffer_wgsl as CompileError(INVALID_CONTRACT));
kernel_contract_problem says what is wrong with a contract.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .table import SLOT_COUNT, TYPE_INFO, Access, ElementType

KERNEL_PREFIX = "wago_gpu.kernel."
CPU_PREFIX = "wago_gpu.cpu."
MAX_EXPORT_NAME_BYTES = 256

WORKGROUP_SIZE = 256
MAX_GROUPS_PER_DIMENSION = 65535  # WebGPU's guaranteed maxComputeWorkgroupsPerDimension
ROW_INVOCATIONS = MAX_GROUPS_PER_DIMENSION * WORKGROUP_SIZE  # 16,776,960 invocations per grid row
# Largest count whose every invocation index (id.x + id.y * ROW_INVOCATIONS) still fits in a u32:
# y <= 256 rows of ROW_INVOCATIONS, i.e. 65535 * 65536 = 4,294,901,760 elements.
MAX_GRID_COUNT = ROW_INVOCATIONS * 256
PARAMETER_BLOCK_BYTES = 16
# Word 1 of the parameter block: the loop budget, loop-head passes one invocation may make. It is
# set per device and kernel at run time (the adapter's measured loop limits decide it, see
# gpu/probe.py), so the WGSL does not depend on the device. The shader's Params struct keeps the
# reference's field names, so kernels of the reference subset keep their exact text.
LOOP_BUDGET_FIELD = "pad0"
# u32 words per element on the GPU (an extension of the reference, whose 64-bit types stay on the
# CPU): one for the types up to 32 bits (narrow ones zero-extended into the low bits), two for the
# 64-bit types I64, U64 and F64, whose raw bits travel as they are stored (low word first).
GPU_WORDS: dict[ElementType, int] = {t: info.gpu_words for t, info in TYPE_INFO.items()}
ERROR_WORD_BYTES = 16  # array<atomic<u32>, 4>: word 0 holds the first KernelError raised


class KernelError(enum.IntEnum):
    """Codes a shader writes into its error word (a kernel that can trap, loop or gather)."""

    NONE = 0
    TRAP = 1  # a Wasm trap: integer division by zero, signed overflow, trapping truncation
    LOOP_BUDGET = 2  # a loop ran out of its iteration budget
    INDEX_RANGE = 3  # a gather read outside its buffer


#: Short spellings of an access, beside the member names (any case): the same in Python, JSON and
#: the command line's SLOT:TYPE:ACCESS.
ACCESS_ALIASES = {"R": Access.READ, "W": Access.WRITE, "RW": Access.READ_WRITE, "READWRITE": Access.READ_WRITE}
_ALIASES: dict[type, dict[str, Any]] = {Access: ACCESS_ALIASES, ElementType: {}}
_WHAT = {Access: "access", ElementType: "element type"}


def _enum_member(enum_type: Any, value: Any, field_name: str) -> Any:
    """An ElementType/Access from a member, its integer value or its name (any case; an access also
    as r, w, rw or readwrite).

    Unknown integers are kept as plain ints: the contract check reports them (so that
    compile_buffer_wgsl can answer INVALID_CONTRACT, as the reference does for an unknown type).
    """
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        key = value.strip().upper()
        if key in enum_type.__members__:
            return enum_type[key]
        aliases = _ALIASES[enum_type]
        if key in aliases:
            return aliases[key]
        names = ", ".join([*enum_type.__members__, *(a.lower() for a in aliases)])
        raise ConfigError(field_name, f"unknown {_WHAT[enum_type]} {value!r} (one of {names})")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field_name, f"expected an integer or a name, got {value!r}")
    return enum_type(value) if value in enum_type._value2member_map_ else value


@dataclass(frozen=True)
class BindingConfig:
    """One declared slot of a kernel: type and access as enum members, integers or names."""

    slot: int
    type: int
    access: int

    def __post_init__(self) -> None:
        if isinstance(self.slot, bool) or not isinstance(self.slot, int):
            raise ConfigError("slot", f"expected an integer, got {self.slot!r}")
        object.__setattr__(self, "type", _enum_member(ElementType, self.type, "type"))
        object.__setattr__(self, "access", _enum_member(Access, self.access, "access"))


@dataclass(frozen=True)
class KernelConfig:
    """A kernel as the user declared it: ID, the two export names, bindings and its consent.

    strict_float (an extension): the kernel's f32 arithmetic, comparisons, roundings and
    conversions run as exact integer code on the GPU, so they give Wasm's answer on every adapter
    and the kernel needs no relaxed_float consent for them (about 6x the cost of native floats).
    """

    id: int
    export: str
    cpu_export: str
    bindings: tuple[BindingConfig, ...]
    relaxed_float: bool = False
    min_elements: int = 0
    strict_float: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "bindings", tuple(self.bindings))
        for b in self.bindings:
            if not isinstance(b, BindingConfig):
                raise ConfigError("bindings", f"expected BindingConfig, got {type(b).__name__}")
        for name in ("export", "cpu_export"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(name, "expected a string")
        for name in ("id", "min_elements"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"expected an integer, got {value!r}")
        for name in ("relaxed_float", "strict_float"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"expected a bool, got {getattr(self, name)!r}")

    @property
    def suffix(self) -> str:
        return self.export[len(KERNEL_PREFIX):]


def kernel_contract_problem(kernel: KernelConfig, max_bindings: int = SLOT_COUNT) -> tuple[str, str] | None:
    """First reason (field, message) the kernel's declared contract is invalid, or None.

    Shared by Config validation and compile_buffer_wgsl (which reports it as INVALID_CONTRACT).
    """
    if not 0 < kernel.id <= 0xFFFFFFFF:
        return "id", "kernel ID must be a non-zero u32"
    if not kernel.export.startswith(KERNEL_PREFIX) or len(kernel.export) == len(KERNEL_PREFIX):
        return "export", f"kernel export must be {KERNEL_PREFIX!r} followed by a name"
    if kernel.cpu_export != CPU_PREFIX + kernel.suffix:
        return "cpu_export", f"CPU export must be {CPU_PREFIX + kernel.suffix!r}"
    for name in ("export", "cpu_export"):
        if len(getattr(kernel, name).encode()) > MAX_EXPORT_NAME_BYTES:
            return name, f"export name longer than {MAX_EXPORT_NAME_BYTES} bytes"
    if not 1 <= len(kernel.bindings) <= max_bindings:
        return "bindings", f"a kernel declares 1 to {max_bindings} bindings"
    seen: set[int] = set()
    for i, b in enumerate(kernel.bindings):
        if not 0 <= b.slot < SLOT_COUNT:
            return f"bindings[{i}].slot", f"slot must be below {SLOT_COUNT}"
        if b.slot in seen:
            return f"bindings[{i}].slot", f"slot {b.slot} declared twice"
        seen.add(b.slot)
        if not isinstance(b.type, ElementType):
            return f"bindings[{i}].type", f"unknown element type {b.type}"
        if not isinstance(b.access, Access):
            return f"bindings[{i}].access", f"unknown access {b.access}"
    return None


def workgroup_grid(count: int) -> tuple[int, int]:
    """Workgroups (x, y) to dispatch for `count` elements; z is always 1.

    groups = ceil(count / 256); x = min(groups, 65535); y = ceil(groups / 65535).
    The shader computes `index = id.x+id.y*16776960u` (16776960 = 65535 * 256 invocations per
    row of the grid) and returns when index >= params.count, so the partial last row and the
    spare groups of a full row do nothing. Up to 16,776,960 elements this is (groups, 1) and
    id.y is 0. count 0 gives (0, 0): a zero-count dispatch must not reach the GPU. Raises
    ValueError above MAX_GRID_COUNT, where indices would wrap around in u32.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_GRID_COUNT:
        raise ValueError(f"count must be an integer in 0..{MAX_GRID_COUNT}, got {count!r}")
    groups = -(-count // WORKGROUP_SIZE)
    return min(groups, MAX_GROUPS_PER_DIMENSION), -(-groups // MAX_GROUPS_PER_DIMENSION)


def parameter_block(count: int, loop_budget: int = 0) -> bytes:
    """The 16 bytes the uniform `params` holds for a dispatch of `count`: {count, loop_budget, 0, 0}.

    The reference's block is {count, 0, 0, 0} (docs/design/abi.md §4.6); its kernels read only the count. A
    kernel with loops starts its `fuel` at params.pad0 (LOOP_BUDGET_FIELD), so a budget of 0 makes
    its first loop pass raise KernelError.LOOP_BUDGET: the dispatch then falls back to the CPU.
    The two zero words are the run-time zeros of opaque float operands (params.pad1, params.pad2:
    compiler/valuetext.py): they must stay 0."""
    return struct.pack("<4I", count, loop_budget, 0, 0)
