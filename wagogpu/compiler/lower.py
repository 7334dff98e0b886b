"""Table-driven lowering of one kernel body to WGSL statements (compiler.md §1.3.5-1.3.6, §2.1.3-2.1.4).

One forward pass over the body moves immutable value records through an operand stack and the
locals. A record is a tuple (kind, wasm type byte, value):

* NUMBER n   - value node n: a load (emitted at once) or a deferred arithmetic node;
* CONSTANT b - an i32 value or f32 bit pattern (locals start as zero constants);
* INDEX      - the original invocation index (param 0 and unchanged copies of it);
* HANDLE s   - the buffer selected by getBuffer(constant s).

Because records are copied, never mutated, `x + (x := 2)` sees the old x, and the index keeps its
identity through locals. Accesses require an INDEX element and a HANDLE handle, which makes
neighbour, gather and scatter access impossible by construction.

OPCODES holds exactly the reference's subset, so kernels inside it keep the reference's WGSL
byte for byte. At the first instruction outside it that the extended subset accepts (control flow,
integer arithmetic, more f32 operations, conversions, a read at a computed element, a return
before the end), the lowering raises NeedsFlow and lower_body starts the body again with
flow.FlowLowering, whose table (flow.FLOW_OPCODES, ops.NUMERIC) has one row per instruction.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

from ..abi.table import SLOT_COUNT, TYPE_INFO, Access, ElementType
from . import reader as lim
from .contract import CompileError, CompileErrorKind
from .decoder import DecodedModule
from .intrinsics import F32, I32, Intrinsic, IntrinsicKind
from .reader import Reader, ReaderError
from .wgsl import LOAD_EXPR, STORE_WRAP

INVALID = CompileErrorKind.INVALID_CONTRACT
UNSUPPORTED = CompileErrorKind.UNSUPPORTED
LIMIT = CompileErrorKind.LIMIT

NUMBER, CONSTANT, INDEX, HANDLE = 0, 1, 2, 3
Record = tuple[int, int, int]

OP_END = 0x0B
MAX_LINE_BYTES = 100  # no emitted statement is longer (the longest, an I8 load, is about 80 bytes)
FLOAT_SCALARS = frozenset(("f32", "f64"))
_U32_LE = struct.Struct("<I")


def _err(kind: CompileErrorKind, message: str) -> CompileError:
    return CompileError(kind, message)


class NeedsFlow(Exception):
    """The body leaves the reference subset for the extended one: lower it with flow.FlowLowering."""


def _outside_reference(opcode: int) -> Exception:
    """The exception for an opcode with no reference row: NeedsFlow if the extended subset has it."""
    from .flow import FLOW_TABLE

    if FLOW_TABLE[opcode] is not None:
        return NeedsFlow()
    return _err(UNSUPPORTED, f"unsupported opcode 0x{opcode:02x}")


# Per Wasm type: the WGSL type of an arithmetic node; how a load or constant of that type is written
# when it feeds arithmetic (loads and constants are u32 bit patterns); how an arithmetic node of
# that type is written as the bits a store needs.
NODE_TYPE = {F32: "f32"}
OPERAND_LOAD = {F32: "bitcast<f32>(v%d)", I32: "v%d"}
OPERAND_CONST = {F32: "bitcast<f32>(0x%08xu)", I32: "0x%08xu"}
NODE_AS_BITS = {F32: "bitcast<u32>(v%d)"}


class _Names:
    """Grow-only tables of numbered texts ("v12", "  let v12: f32 = ", ...), shared by all lowerings.

    String formatting is a large part of lowering time, so each numbered text is made once per
    process. A table is replaced, never mutated, so concurrent lowerings never see a short one.
    """

    def __init__(self, template: str):
        self.template = template
        self.table: list[str] = []

    def upto(self, n: int) -> list[str]:
        table = self.table
        if len(table) <= n:
            size = max(n + 1, 2 * len(table), 256)
            self.table = table = [self.template % i for i in range(size)]
        return table


V_NAMES = _Names("v%d")
LET_PREFIX = {t: _Names(f"  let v%d: {name} = ") for t, name in NODE_TYPE.items()}
LOAD_OPERAND = {t: _Names(text) for t, text in OPERAND_LOAD.items()}


class BinaryOp:
    """A pure two-operand instruction lowered to one infix WGSL operator."""

    __slots__ = ("operand", "result", "wgsl", "is_float", "infix")

    def __init__(self, operand: int, result: int, wgsl: str, is_float: bool):
        self.operand = operand  # Wasm type byte of both operands
        self.result = result  # Wasm type byte of the result
        self.wgsl = wgsl  # infix operator
        self.is_float = is_float  # marks the kernel float (abi.md §5.5)
        self.infix = f" {wgsl} "

    def __repr__(self) -> str:
        return f"BinaryOp({self.operand:#x}, {self.result:#x}, {self.wgsl!r})"


@dataclass(frozen=True, slots=True)
class LoweredBody:
    code: str  # statements, two-space indented, one per line
    reads: int  # bit mask of slots actually read
    writes: int  # bit mask of slots actually written
    read_before_write: int  # slots read before their first write (or written only conditionally)
    is_float: bool
    error_word: bool = False  # the code uses the error word `err` (traps, loop budget, gathers)
    helpers: tuple[str, ...] = ()  # ops.HELPERS the code calls
    loop_budget: int = 0  # the fuel the code starts with; 0 when it has no loop


class Lowering:
    """Workspace of one body lowering; bounded by the limits checked at each loop head.

    Value nodes live in parallel lists indexed by node number: `nodes[n]` is None for a load or
    (op, left, right) for arithmetic; `depth[n]` is the deferred chain depth, 0 once emitted
    (loads are always 0), so "un-emitted" is simply depth[n] > 0; `optext[n]` is how the node is
    written when it feeds arithmetic (fixed by its type, which equals the consuming op's operand
    type). `code` collects statement pieces; joined once at the end.
    """

    __slots__ = ("module", "r", "stack", "locals", "local_types", "nodes", "depth", "optext", "code",
                 "pending", "reads", "writes", "rbw", "is_float", "slot_type", "can_read", "can_write",
                 "frames", "const_text", "names", "let_prefix", "emit_node")

    def __init__(self, module: DecodedModule, start: int, end: int):
        self.module = module
        self.r = Reader(module.source, start, end)
        self.stack: list[Record] = []
        self.locals: list[Record] = [(INDEX, I32, 0)]
        self.local_types: list[int] = [I32]
        self.nodes: list[tuple[BinaryOp, Record, Record] | None] = []
        self.depth: list[int] = []
        self.optext: list[str] = []
        self.code: list[str] = []
        self.pending: CompileError | None = None
        self.reads = self.writes = self.rbw = 0
        self.is_float = False
        self.slot_type: dict[int, ElementType] = {}
        self.can_read = self.can_write = 0
        self.frames: list[int] = [0]  # control frames: only the function body here (see flow.py)
        self.const_text: dict[Record, str] = {}  # constant record -> operand text
        # Every instruction makes at most one node, so the body length bounds the node numbers.
        most = min(end - start, lim.MAX_INSTRUCTIONS) + 1
        self.names = V_NAMES.upto(most)
        self.let_prefix = {t: table.upto(most) for t, table in LET_PREFIX.items()}
        self.emit_node = self._node_emitter()

    @property
    def code_len(self) -> int:
        return sum(map(len, self.code))

    # ---- operand stack -------------------------------------------------------------------------
    def pop(self, want: int) -> Record:
        """Pop a value of type `want`; problems become a pending error so explicit checks still run."""
        stack = self.stack
        if not stack:
            if self.pending is None:
                self.pending = _err(INVALID, "operand stack underflow")
            return (NUMBER, want, 0)
        rec = stack.pop()
        if rec[1] != want and self.pending is None:
            self.pending = _err(INVALID, "operand type mismatch")
        return rec

    # ---- emission ------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.code.append(line)

    def new_node(self, op: BinaryOp, left: Record, right: Record) -> int:
        """Create a deferred node; an operand chain already MAX_DEPTH deep is emitted first.

        Lowering.run inlines this for the common case; both must stay identical.
        """
        depth = self.depth
        max_depth = lim.MAX_DEPTH
        d = 0
        if left[0] == NUMBER:
            ld = depth[left[2]]
            if ld >= max_depth:
                self.materialise(left[2])
            elif ld > d:
                d = ld
        if right[0] == NUMBER:
            rd = depth[right[2]]
            if rd >= max_depth:
                self.materialise(right[2])
            elif rd > d:
                d = rd
        n = len(depth)
        self.nodes.append((op, left, right))
        depth.append(d + 1)
        self.optext.append(self.names[n])
        return n

    def new_load(self, wtype: int) -> int:
        n = len(self.depth)
        self.nodes.append(None)
        self.depth.append(0)
        self.optext.append(LOAD_OPERAND[wtype].upto(n)[n])
        return n

    def materialise(self, n: int) -> None:
        """Emit un-emitted node n after its un-emitted operands, left before right, each once."""
        self.emit_node(n)

    def _node_emitter(self) -> Callable[[int], None]:
        """The recursive emitter as a closure over this workspace (it is on the hot path).

        Recursion depth is at most MAX_DEPTH: the depth rule emits deeper chains early.
        """
        depth, nodes, optext, const_text = self.depth, self.nodes, self.optext, self.const_text
        let_prefix, extend, const_operand = self.let_prefix, self.code.extend, self.const_operand

        def emit_node(n: int) -> None:
            op, left, right = nodes[n]  # type: ignore[misc]
            if left[0] == NUMBER:
                if depth[left[2]]:
                    emit_node(left[2])
                ltext = optext[left[2]]
            else:
                ltext = const_text.get(left) or const_operand(left)
            if right[0] == NUMBER:
                if depth[right[2]]:
                    emit_node(right[2])
                rtext = optext[right[2]]
            else:
                rtext = const_text.get(right) or const_operand(right)
            depth[n] = 0
            extend((let_prefix[op.result][n], ltext, op.infix, rtext, ";\n"))

        return emit_node

    def const_operand(self, rec: Record) -> str:
        """A constant feeding arithmetic (cached: kernels repeat their constants)."""
        text = self.const_text[rec] = OPERAND_CONST[rec[1]] % rec[2]
        return text

    def as_bits(self, rec: Record) -> str:
        """A value as the u32 bit pattern a store writes; exact copies never pass through a float."""
        kind, wtype, value = rec
        if kind == CONSTANT:
            return f"0x{value:08x}u"
        if kind == INDEX:
            return "index"
        node = self.nodes[value]
        if node is None:
            return self.names[value]
        if self.depth[value]:
            self.materialise(value)
        return NODE_AS_BITS[node[0].result] % value

    # ---- buffer access -------------------------------------------------------------------------
    def access_operands(self, gather: bool = False) -> int:
        """Pop (handle, element) of a read/write and return the slot (compiler.md §1.3.5 steps 2-5).

        With `gather` (a read), an element other than the index hands the body to the extended
        lowering, which can read at a computed element."""
        element = self.pop(I32)
        handle = self.pop(I32)
        if handle[0] != HANDLE:
            raise _err(UNSUPPORTED, "handle is not a selected buffer slot")
        if element[0] != INDEX:
            if gather:
                raise NeedsFlow()
            raise _err(UNSUPPORTED, "element must be the original invocation index")
        if self.pending is not None:
            raise self.pending
        return handle[2]

    # ---- driver --------------------------------------------------------------------------------
    def declare_locals(self) -> None:
        r = self.r
        max_locals = lim.MAX_LOCALS
        for _ in range(r.count()):
            n = r.u32()
            wtype = r.byte()
            if n > max_locals - len(self.locals):
                raise _err(LIMIT, "expanded local limit")
            if wtype != I32 and wtype != F32:
                raise _err(UNSUPPORTED, "local type is unsupported")
            if wtype == F32:
                self.is_float = True
            self.locals.extend([(CONSTANT, wtype, 0)] * n)
            self.local_types.extend([wtype] * n)

    def run(self) -> None:
        """Run the instruction loop: the fast one when the workspace limits provably cannot fire.

        Every instruction takes at least one byte and adds at most one stack entry, one node and
        two statements of at most MAX_LINE_BYTES each. So when the remaining body has no more bytes
        than MAX_INSTRUCTIONS and the other limits are at least as large, no per-iteration check
        can fail and run_fast skips them; otherwise run_checked tests all four at every head.
        """
        max_pc = lim.MAX_INSTRUCTIONS
        if (self.r.end - self.r.pos <= max_pc and lim.MAX_NODES >= max_pc and lim.MAX_STACK >= max_pc
                and lim.MAX_BODY_CODE >= 2 * MAX_LINE_BYTES * max_pc):
            self.run_fast()
        else:
            self.run_checked()

    def run_checked(self) -> None:
        """The plain table-driven loop with every workspace limit tested at each head."""
        r = self.r
        data = r.data
        table = OPCODE_TABLE
        max_pc, max_nodes, max_stack, max_code = lim.MAX_INSTRUCTIONS, lim.MAX_NODES, lim.MAX_STACK, lim.MAX_BODY_CODE
        pc = 0
        while r.pos < r.end:
            if pc >= max_pc or len(self.depth) >= max_nodes or len(self.stack) > max_stack or self.code_len > max_code:
                raise _err(LIMIT, "kernel workspace limit")
            opcode = data[r.pos]
            row = table[opcode]
            if row is None:
                raise _outside_reference(opcode)
            r.pos += 1
            pc += 1
            if row[0](self, row[1]):
                return
            if self.pending is not None:
                raise self.pending
        raise _err(INVALID, "missing function end")

    def run_fast(self) -> None:
        """The same loop without limit checks (see run).

        Rows whose handler is one of the simple ones (FAST_KIND: local.get/set/tee, i32.const,
        f32.const, binary ops) run inline with the handler's semantics whenever no error can arise; anything
        else calls the row's handler. A value-producing local.get or f32.const directly followed by
        a binary op hands its value straight to that op (no push/pop, one loop turn less). A pending
        error (set only by handlers and Lowering.pop) is raised right after the instruction that
        set it, which is the reference's "stop at the next iteration".
        """
        r = self.r
        data = r.data
        end = r.end
        stack = self.stack
        push = stack.append
        local_records = self.locals
        local_types = self.local_types
        fast_locals = min(len(local_records), 0x80)  # one-byte LEB index that is in range
        depth = self.depth
        nodes = self.nodes
        optext = self.optext
        names = self.names
        table = OPCODE_TABLE
        kinds = FAST_KIND
        max_depth = lim.MAX_DEPTH
        materialise = self.emit_node
        unpack_u32 = _U32_LE.unpack_from
        # module constants as locals: the loop below is the compiler's hot path
        k_get, k_const, k_binary, k_set, k_tee, k_slow, k_i32 = (K_LOCAL_GET, K_F32_CONST, K_BINARY, K_LOCAL_SET,
                                                                 K_LOCAL_TEE, K_SLOW, K_I32_CONST)
        number, constant, f32, i32 = NUMBER, CONSTANT, F32, I32
        saw_float = False  # folded into self.is_float on every exit
        pos = r.pos
        try:
            while pos < end:
                opcode = data[pos]
                pos += 1
                kind = kinds[opcode]
                if kind == k_get:
                    if pos >= end or data[pos] >= fast_locals:
                        kind = k_slow
                    else:
                        right = local_records[data[pos]]
                        pos += 1
                        if pos >= end or kinds[data[pos]] != k_binary:
                            push(right)
                            continue
                        opcode = data[pos]
                        pos += 1
                elif kind == k_const:
                    if end - pos < 4:
                        kind = k_slow
                    else:
                        right = (constant, f32, unpack_u32(data, pos)[0])
                        pos += 4
                        saw_float = True
                        if pos >= end or kinds[data[pos]] != k_binary:
                            push(right)
                            continue
                        opcode = data[pos]
                        pos += 1
                elif kind == k_binary:
                    if stack:
                        right = stack.pop()
                    else:
                        kind = k_slow
                elif kind == k_i32:
                    if pos < end and data[pos] < 0x40:  # one-byte signed LEB128, non-negative
                        push((constant, i32, data[pos]))
                        pos += 1
                        continue
                    kind = k_slow
                elif kind == k_set or kind == k_tee:
                    if pos < end and stack:
                        i = data[pos]
                        if i < fast_locals and stack[-1][1] == local_types[i]:
                            pos += 1
                            local_records[i] = stack[-1]
                            if kind == k_set:
                                del stack[-1]
                            continue
                    kind = k_slow
                if kind != k_slow:
                    # a binary op `opcode` whose right operand is `right` (left still on the stack)
                    op = table[opcode][1]  # type: ignore[index]
                    want = op.operand
                    if stack and right[1] == want and stack[-1][1] == want:  # Lowering.new_node, inline
                        left = stack[-1]
                        d = 0
                        if left[0] == number:
                            ld = depth[left[2]]
                            if ld >= max_depth:
                                materialise(left[2])
                            elif ld:
                                d = ld
                        if right[0] == number:
                            rd = depth[right[2]]
                            if rd >= max_depth:
                                materialise(right[2])
                            elif rd > d:
                                d = rd
                        n = len(depth)
                        stack[-1] = (number, op.result, n)
                        nodes.append((op, left, right))
                        depth.append(d + 1)
                        optext.append(names[n])
                        if op.is_float:
                            saw_float = True
                        continue
                    push(right)  # the handler reports the underflow or type mismatch
                row = table[opcode]
                if row is None:
                    raise _outside_reference(opcode)
                r.pos = pos
                if row[0](self, row[1]):
                    return
                if self.pending is not None:
                    raise self.pending
                pos = r.pos
            raise _err(INVALID, "missing function end")
        finally:
            if saw_float:
                self.is_float = True


Handler = Callable[[Lowering, object], "bool | None"]


# ---- instruction handlers ----------------------------------------------------------------------
def _end(st: Lowering, _: object) -> bool:
    r = st.r
    if st.stack or r.pos != r.end:
        raise _err(INVALID, "nonempty final stack or trailing code")
    return True


def _return(st: Lowering, _: object) -> bool:
    r = st.r
    if st.stack or r.end - r.pos != 1 or r.data[r.pos] != OP_END:
        raise NeedsFlow()  # a return anywhere else is control flow
    r.pos = r.end
    return True


def _local_index(st: Lowering) -> int:
    i = st.r.u32()
    if i >= len(st.locals):
        raise _err(INVALID, "local index out of range")
    return i


def _local_get(st: Lowering, _: object) -> None:
    st.stack.append(st.locals[_local_index(st)])


def _local_set(st: Lowering, tee: object) -> None:
    i = _local_index(st)
    value = st.pop(st.local_types[i])
    st.locals[i] = value
    if tee:
        st.stack.append(value)


def _i32_const(st: Lowering, _: object) -> None:
    st.stack.append((CONSTANT, I32, st.r.leb(32, True) & 0xFFFFFFFF))


def _f32_const(st: Lowering, _: object) -> None:
    st.is_float = True
    st.stack.append((CONSTANT, F32, st.r.u32_le()))


def _binary(st: Lowering, op: BinaryOp) -> None:  # type: ignore[misc]
    right = st.pop(op.operand)
    left = st.pop(op.operand)
    if op.is_float:
        st.is_float = True
    if st.pending is None:
        st.stack.append((NUMBER, op.result, st.new_node(op, left, right)))


def _call(st: Lowering, _: object) -> None:
    f = st.r.u32()
    imports = st.module.func_imports
    if f >= len(imports):
        raise _err(UNSUPPORTED, "only buffer intrinsic calls are supported")
    imp = imports[f]
    if not imp.in_namespace:
        raise _err(UNSUPPORTED, "call is not a buffer intrinsic")
    intrinsic = imp.intrinsic
    if intrinsic is None:
        raise _err(UNSUPPORTED, "unknown intrinsic")
    if imp.bad_signature:
        raise _err(INVALID, "intrinsic signature mismatch")
    st.intrinsic_handlers[intrinsic.kind](st, intrinsic)


# ---- intrinsic handlers (after classification, compiler.md §1.3.3) ------------------------------
def _get_buffer(st: Lowering, _: Intrinsic) -> None:
    slot = st.pop(I32)
    if slot[0] != CONSTANT:
        raise _err(UNSUPPORTED, "slot must be constant")
    if slot[2] >= SLOT_COUNT or slot[2] not in st.slot_type:
        raise _err(INVALID, "undeclared slot")
    st.stack.append((HANDLE, I32, slot[2]))


def _management(st: Lowering, _: Intrinsic) -> None:
    raise _err(UNSUPPORTED, "management call in kernel")


def _check_slot(st: Lowering, slot: int, intrinsic: Intrinsic, allowed: int) -> None:
    if st.slot_type[slot] != intrinsic.elem:
        raise _err(INVALID, "intrinsic type does not match declared slot")
    if not allowed >> slot & 1:
        raise _err(INVALID, "intrinsic violates slot access")


def _read(st: Lowering, intrinsic: Intrinsic) -> None:
    if not intrinsic.gpu:
        raise _err(UNSUPPORTED, "intrinsic type unsupported on GPU")
    slot = st.access_operands(True)
    _check_slot(st, slot, intrinsic, st.can_read)
    bit = 1 << slot
    if not st.writes & bit:
        st.rbw |= bit
    st.reads |= bit
    n = st.new_load(intrinsic.scalar)
    st.emit(f"  let v{n}: u32 = {LOAD_EXPR[intrinsic.elem].format(slot)};\n")  # type: ignore[index]
    st.stack.append((NUMBER, intrinsic.scalar, n))


def _write(st: Lowering, intrinsic: Intrinsic) -> None:
    if not intrinsic.gpu:
        raise _err(UNSUPPORTED, "intrinsic type unsupported on GPU")
    data = st.pop(intrinsic.scalar)
    if data[0] == HANDLE:
        raise _err(INVALID, "buffer handle cannot be stored as data")
    slot = st.access_operands()
    _check_slot(st, slot, intrinsic, st.can_write)
    bits = st.as_bits(data)
    st.emit(f"  slot{slot}[index] = {STORE_WRAP[intrinsic.elem].format(bits)};\n")  # type: ignore[index]
    st.writes |= 1 << slot


INTRINSIC_HANDLERS: dict[IntrinsicKind, Callable[[Lowering, Intrinsic], None]] = {
    IntrinsicKind.GET: _get_buffer,
    IntrinsicKind.READ: _read,
    IntrinsicKind.WRITE: _write,
    IntrinsicKind.MANAGEMENT: _management,
}
Lowering.intrinsic_handlers = INTRINSIC_HANDLERS  # type: ignore[attr-defined]

# The accepted subset (abi.md §6.4): opcode -> (handler, argument). Everything else is Unsupported.
OPCODES: dict[int, tuple[Handler, object]] = {
    0x0B: (_end, None),
    0x0F: (_return, None),
    0x10: (_call, None),
    0x20: (_local_get, None),
    0x21: (_local_set, False),
    0x22: (_local_set, True),
    0x41: (_i32_const, None),
    0x43: (_f32_const, None),
    0x92: (_binary, BinaryOp(F32, F32, "+", True)),
    0x93: (_binary, BinaryOp(F32, F32, "-", True)),
    0x94: (_binary, BinaryOp(F32, F32, "*", True)),
}
OPCODE_TABLE: list[tuple[Handler, object] | None] = [OPCODES.get(op) for op in range(256)]

# Which rows Lowering.run may execute inline, derived from the table (never set by hand).
K_SLOW, K_LOCAL_GET, K_LOCAL_SET, K_LOCAL_TEE, K_F32_CONST, K_BINARY, K_I32_CONST = range(7)


def _fast_kind(row: tuple[Handler, object] | None) -> int:
    if row is None:
        return K_SLOW
    handler, arg = row
    if handler is _local_get:
        return K_LOCAL_GET
    if handler is _local_set:
        return K_LOCAL_TEE if arg else K_LOCAL_SET
    if handler is _f32_const:
        return K_F32_CONST
    if handler is _binary:
        return K_BINARY
    if handler is _i32_const:
        return K_I32_CONST
    return K_SLOW


FAST_KIND = bytes(_fast_kind(row) for row in OPCODE_TABLE)


@dataclass(frozen=True, slots=True)
class BindingFacts:
    """What the binding scan (compiler.md §1.3.5 step 2) derives from a kernel's declarations."""

    slot_type: dict[int, ElementType]  # read-only once built
    can_read: int  # slot bit masks
    can_write: int
    is_float: bool  # an F16, F32 or F64 binding
    f16: bool  # an F16 binding: the shader carries the helper
    problem: tuple[CompileErrorKind, str] | None  # the scan's first rejection


_FACTS: dict[int, tuple[object, BindingFacts]] = {}  # id(bindings tuple) -> (that tuple, facts)


def binding_facts(bindings: "tuple[object, ...]") -> BindingFacts:
    """The scan of a (validated, immutable) bindings tuple; memoised by identity, bounded."""
    hit = _FACTS.get(id(bindings))
    if hit is not None and hit[0] is bindings:
        return hit[1]
    slot_type: dict[int, ElementType] = {}
    can_read = can_write = 0
    is_float = f16 = False
    problem = None
    for b in bindings:
        slot, etype, access = b.slot, b.type, b.access  # type: ignore[attr-defined]
        if not 0 <= slot < SLOT_COUNT:
            problem = (INVALID, "invalid slot")
            break
        info = TYPE_INFO[etype]
        if info.scalar in FLOAT_SCALARS:
            is_float = True
        if not info.gpu:
            problem = (UNSUPPORTED, "64-bit GPU buffers are unsupported")
            break
        slot_type[slot] = ElementType(etype)
        f16 = f16 or etype == ElementType.F16
        if access & Access.READ:
            can_read |= 1 << slot
        if access & Access.WRITE:
            can_write |= 1 << slot
    facts = BindingFacts(slot_type, can_read, can_write, is_float, f16, problem)
    if isinstance(bindings, tuple):
        if len(_FACTS) >= 256:
            _FACTS.clear()
        _FACTS[id(bindings)] = (bindings, facts)
    return facts


def lower_body(module: DecodedModule, start: int, end: int, facts: BindingFacts) -> LoweredBody:
    """Lower the body source[start:end] of a kernel whose bindings passed config validation."""
    if end - start > lim.MAX_BODY_BYTES:
        raise _err(LIMIT, "kernel byte limit")
    if facts.problem is not None:
        raise _err(*facts.problem)
    try:
        try:
            st = _prepared(Lowering(module, start, end), facts)
            st.run()
        except NeedsFlow:
            from .flow import FlowLowering

            flow = _prepared(FlowLowering(module, start, end), facts)
            flow.run()
            return LoweredBody("".join(flow.code), flow.reads, flow.writes, flow.rbw, flow.is_float,
                               flow.uses_err, tuple(sorted(flow.helpers)), flow.budget)
    except ReaderError as e:
        raise _err(INVALID, e.message) from None
    return LoweredBody("".join(st.code), st.reads, st.writes, st.rbw, st.is_float)


def _prepared(st: Lowering, facts: BindingFacts) -> Lowering:
    st.slot_type = facts.slot_type
    st.can_read = facts.can_read
    st.can_write = facts.can_write
    st.is_float = facts.is_float
    st.declare_locals()
    return st
