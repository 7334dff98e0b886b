"""Hypothesis strategy: random kernels of the extended subset, as WAT (see watkit.kernel_wat).

A program has fixed bindings (FLOW_BINDINGS): slot 0 I32 READ and slot 1 F32 READ (inputs),
slot 2 I32 WRITE and slot 3 F32 READ_WRITE (outputs), slot 4 U8 READ_WRITE. Its statements mix
straight-line code with if/else, blocks left early by br_if (also to outer labels, so branches
cross several constructs), br_table, bounded loops, early returns and conditional traps; its
integer expressions use every i32 operator, select, blocks with results, blocks, ifs and loops with
parameters and two results (a branch carrying both), gathers (in range or not), and conversions
from f32 inputs. Everything the Wasm CPU runner can do, traps included, the
GPU must reproduce: traps become the error word.

Float results must agree only within a tolerance (relaxed_float), so floats are kept where a
small rounding difference cannot change an integer or a branch: f32 comparisons, conversions to
i32, reinterpretation and the rounding functions only ever see exact values (inputs and
constants), inputs are small multiples of 1/4 (or ±0, ±Inf, NaN), divisors are constants, and
integers converted to f32 are small. Programs with `floats=False` use no f32 at all, so the GPU
must match them bit for bit.

Loops run a constant number of times (at most 3, nested at most twice) with their own counter
local, so the default loop budget is never reached; branches only ever leave loops.

`flow_programs(extended=True)` (the differential fuzzer, fuzz/differential.py) adds, over
EXTENDED_BINDINGS (three more slots: 5 I16 READ_WRITE, 6 F16 READ, 7 F16 WRITE): loops whose trip
count comes from the data (for two elements up to 2^21 - 1 trips: past 65,535 and past the loop
budget),
left by `br_if` and continued by an unconditional `br` to the loop label, unconditional `br` out of
blocks, `local.tee`, typed `select`, narrow loads and stores (I16, U8, F16) and exact
`f32.reinterpret_i32` stores.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from wagogpu.abi.table import Access, ElementType
from wagogpu.config import BindingConfig, KernelConfig

FLOW_BINDINGS = [BindingConfig(0, ElementType.I32, Access.READ), BindingConfig(1, ElementType.F32, Access.READ),
                 BindingConfig(2, ElementType.I32, Access.WRITE), BindingConfig(3, ElementType.F32, Access.READ_WRITE),
                 BindingConfig(4, ElementType.U8, Access.READ_WRITE)]
LOCALS = "(local $a i32) (local $b i32) (local $c i32) (local $x f32) (local $y f32) (local $k0 i32) (local $k1 i32)"
INT_LOCALS = ("$a", "$b", "$c")
FLOAT_LOCALS = ("$x", "$y")
INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 31, 32, 33, 255, 256, -256, 0x7FFFFFFF, -0x80000000, 0x12345678, -5]
NICE_FLOATS = ["0", "-0", "1", "-1", "0.5", "-0.5", "1.5", "2.5", "-2.5", "3.75", "-4", "inf", "-inf", "nan"]

I_BINARY = ["add", "sub", "mul", "and", "or", "xor", "shl", "shr_s", "shr_u", "rotl", "rotr", "eq", "ne", "lt_s",
            "lt_u", "gt_s", "gt_u", "le_s", "le_u", "ge_s", "ge_u"]
I_DIVISION = ["div_s", "div_u", "rem_s", "rem_u"]
I_UNARY = ["eqz", "clz", "ctz", "popcnt", "extend8_s", "extend16_s"]
F_COMPARE = ["eq", "ne", "lt", "gt", "le", "ge"]
F_ROUND = ["ceil", "floor", "trunc", "nearest", "abs", "neg"]
F_BINARY = ["add", "sub", "mul", "min", "max", "copysign"]


EXTENDED_BINDINGS = FLOW_BINDINGS + [BindingConfig(5, ElementType.I16, Access.READ_WRITE),
                                     BindingConfig(6, ElementType.F16, Access.READ),
                                     BindingConfig(7, ElementType.F16, Access.WRITE)]
# trip-count masks of data-dependent loops: mostly short, now and then past 65,535 trips (lavapipe's
# silent cut) or past the loop budget (2^20); long loops run only for elements 0 and 1
TRIP_MASKS = [1, 3, 7, 15, 3, 7, 0xFFFF, 0x1FFFF, 0x1FFFFF]
BIG_TRIPS = 0xFFFF


def flow_kernel(name: str = "k", extended: bool = False) -> KernelConfig:
    bindings = EXTENDED_BINDINGS if extended else FLOW_BINDINGS
    return KernelConfig(1, f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}", bindings, relaxed_float=True)


@dataclass
class FlowProgram:
    body: str  # the kernel body, folded WAT
    floats: bool  # uses f32 at all (outputs then compare within a tolerance)

    @property
    def locals(self) -> str:
        return LOCALS


def _read(slot: int, t: str, element: str = "(local.get $i)") -> str:
    return f"(call $readBuffer{t} (call $getBuffer (i32.const {slot})) {element})"


def _write(slot: int, t: str, value: str) -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


class _Gen:
    def __init__(self, draw, floats: bool, extended: bool = False, long_loops: bool = True):
        self.draw = draw
        self.floats = floats
        self.extended = extended
        self.long_loops = long_loops  # data loops may run past 65,535 trips
        self.big_loop = False  # inside a long data loop: no data loop nests there
        self.data_loops = 0  # enclosing data loops (a long loop only where there is none)
        self.labels: list[str] = []  # enclosing block labels a branch may leave (never loop labels)
        self.loops = 0
        self.serial = 0

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def label(self) -> str:
        self.serial += 1
        return f"$L{self.serial}"

    # -- i32 ------------------------------------------------------------------------------------
    def ileaf(self) -> str:
        kinds = ["const", "local", "index", "load", "load"]
        if self.floats:
            kinds.append("from_float")
        kind = self.pick(kinds)
        if kind == "const":
            value = self.draw(st.one_of(st.sampled_from(INTERESTING_INTS), st.integers(-(1 << 31), (1 << 31) - 1)))
            return f"(i32.const {value})"
        if kind == "local":
            return f"(local.get {self.pick(INT_LOCALS)})"
        if kind == "index":
            return "(local.get $i)"
        if kind == "load":
            if self.extended and self.draw(st.integers(0, 2)) == 0:
                return _read(5, "I16")
            return _read(0, "I32") if self.draw(st.booleans()) else _read(4, "U8")
        op = self.pick(["trunc_f32_s", "trunc_f32_u", "trunc_sat_f32_s", "trunc_sat_f32_u", "reinterpret_f32",
                        "compare"])
        if op == "compare":
            return f"(f32.{self.pick(F_COMPARE)} {self.fatom()} {self.fatom()})"
        return f"(i32.{op} {self.fatom()})"

    def iexpr(self, depth: int) -> str:
        if depth <= 0 or self.draw(st.integers(0, 4)) == 0:
            return self.ileaf()
        extra = ["tee", "typed_select"] if self.extended else []
        kinds = ["binary"] * 5 + ["unary", "division", "select", "gather", "block", "if", "mv_block", "mv_if"] + extra
        kind = self.pick(kinds + ["mv_loop"] if self.loops < 2 else kinds)
        d = depth - 1
        if kind == "tee":
            return f"(local.tee {self.pick(INT_LOCALS)} {self.iexpr(d)})"
        if kind == "typed_select":
            return f"(select (result i32) {self.iexpr(d)} {self.iexpr(d)} {self.iexpr(d)})"
        if kind == "binary":
            return f"(i32.{self.pick(I_BINARY)} {self.iexpr(d)} {self.iexpr(d)})"
        if kind == "unary":
            return f"(i32.{self.pick(I_UNARY)} {self.iexpr(d)})"
        if kind == "division":
            divisor = self.iexpr(d)
            if self.draw(st.integers(0, 3)):  # mostly a divisor that cannot be zero
                divisor = f"(i32.or {divisor} (i32.const 1))"
            return f"(i32.{self.pick(I_DIVISION)} {self.iexpr(d)} {divisor})"
        if kind == "select":
            return f"(select {self.iexpr(d)} {self.iexpr(d)} {self.iexpr(d)})"
        if kind == "gather":
            element = self.iexpr(d)
            if self.draw(st.integers(0, 3)):  # mostly in range: the tests use at least 64 elements
                element = f"(i32.and {element} (i32.const 63))"
            return _read(0, "I32", element)
        if kind == "block":  # a block whose result may leave early through br_if
            return f"(block (result i32) (drop (br_if 0 {self.iexpr(d)} {self.iexpr(d)})) {self.iexpr(d)})"
        if kind.startswith("mv_"):
            return self.multi_value(kind, d)
        return f"(if (result i32) {self.iexpr(d)} (then {self.iexpr(d)}) (else {self.iexpr(d)}))"

    def multi_value(self, kind: str, d: int) -> str:
        """Constructs with parameters and two results; a branch carries both values."""
        a, b, c = self.iexpr(d), self.iexpr(d), self.iexpr(d)
        combine = f"(i32.{self.pick(I_BINARY)})"
        if kind == "mv_block":  # the parameters leave through br_if, or two new values through the end
            return (f"(block (result i32) {a} {b} (block (param i32 i32) (result i32 i32) (br_if 0 {c})"
                    f" (drop) (drop) {self.iexpr(d)} {self.iexpr(d)}) {combine})")
        if kind == "mv_if":
            then, other = self.pick(I_BINARY), self.pick(I_BINARY)
            return (f"(block (result i32) {a} {b} (if (param i32 i32) (result i32) {c} (then (i32.{then}))"
                    f" (else (i32.{other}))))")
        counter, label = f"$k{self.loops}", self.label()  # a loop re-entered with its two parameters
        self.loops += 1
        body = self.iexpr(d)
        self.loops -= 1
        return (f"(block (result i32) {a} {b} (local.set {counter} (i32.const {self.draw(st.integers(1, 3))}))"
                f" (loop {label} (param i32 i32) (result i32 i32) (i32.{self.pick(I_BINARY)}) {body}"
                f" (br_if {label} (local.tee {counter} (i32.sub (local.get {counter}) (i32.const 1))))) {combine})")

    # -- f32 ------------------------------------------------------------------------------------
    def fatom(self) -> str:
        """An exact f32: a constant or an input."""
        if self.draw(st.booleans()):
            return f"(f32.const {self.pick(NICE_FLOATS)})"
        if self.extended and self.draw(st.integers(0, 2)) == 0:
            return _read(6, "F16")  # halves of small quarters, +-0, +-Inf, NaN: exact in f32
        return _read(1, "F32")

    def fexpr(self, depth: int) -> str:
        if depth <= 0 or self.draw(st.integers(0, 3)) == 0:
            kind = self.pick(["atom", "atom", "local", "round", "sqrt", "convert"])
            if kind == "atom":
                return self.fatom()
            if kind == "local":
                return f"(local.get {self.pick(FLOAT_LOCALS)})"
            if kind == "round":
                return f"(f32.{self.pick(F_ROUND)} {self.fatom()})"
            if kind == "sqrt":
                return f"(f32.sqrt (f32.abs {self.fatom()}))"
            small = f"(i32.shr_s {self.iexpr(1)} (i32.const 28))"  # -8..7: exact, and products stay small
            if self.draw(st.booleans()):
                return f"(f32.convert_i32_s {small})"
            return f"(f32.convert_i32_u (i32.and {small} (i32.const 7)))"
        d = depth - 1
        kind = self.pick(["binary", "binary", "div", "select"])
        if kind == "binary":
            return f"(f32.{self.pick(F_BINARY)} {self.fexpr(d)} {self.fexpr(d)})"
        if kind == "div":
            return f"(f32.div {self.fexpr(d)} (f32.const {self.pick(['2', '-4', '0.25', '3'])}))"
        return f"(select {self.fexpr(d)} {self.fexpr(d)} {self.iexpr(1)})"

    # -- statements -------------------------------------------------------------------------------
    def statements(self, depth: int, most: int = 4) -> str:
        return " ".join(self.statement(depth) for _ in range(self.draw(st.integers(1, most))))

    def statement(self, depth: int) -> str:
        kinds = ["set", "write", "write"]
        if self.floats:
            kinds += ["fset", "fwrite"]
        if depth > 0:
            kinds += ["if", "block", "table", "loop"] if self.loops < 2 else ["if", "block", "table"]
        if self.labels:
            kinds.append("leave")
        kinds += ["return", "trap", "drop"]
        if self.extended:
            kinds += ["narrow", "narrow"] + (["fnarrow", "reinterpret"] if self.floats else [])
            kinds += ["br_out"] * bool(self.labels) + ["data_loop"] * (depth > 0 and self.loops < 2 and not self.big_loop)
        kind = self.pick(kinds)
        d = depth - 1
        if kind in EXTENDED_STATEMENTS:
            return EXTENDED_STATEMENTS[kind](self, d)
        if kind == "set":
            return f"(local.set {self.pick(INT_LOCALS)} {self.iexpr(3)})"
        if kind == "fset":
            return f"(local.set {self.pick(FLOAT_LOCALS)} {self.fexpr(2)})"
        if kind == "write":
            return _write(2, "I32", self.iexpr(3)) if self.draw(st.integers(0, 3)) else _write(4, "U8", self.iexpr(2))
        if kind == "fwrite":
            return _write(3, "F32", self.fexpr(2))
        if kind == "if":
            other = f" (else {self.statements(d)})" if self.draw(st.booleans()) else ""
            return f"(if {self.iexpr(2)} (then {self.statements(d)}){other})"
        if kind == "block":
            label = self.label()
            self.labels.append(label)
            inner = f"{self.statements(d)} (br_if {label} {self.iexpr(2)}) {self.statements(d)}"
            self.labels.pop()
            return f"(block {label} {inner})"
        if kind == "table":
            outer, mid, inner = self.label(), self.label(), self.label()
            self.labels += [outer, mid]
            first = self.statements(d, 2)
            self.labels.pop()
            second = self.statements(d, 2)
            self.labels.pop()
            return (f"(block {outer} (block {mid} (block {inner} (br_table {inner} {mid} {outer} "
                    f"{self.iexpr(2)})) {first}) {second})")
        if kind == "loop":
            counter = f"$k{self.loops}"
            self.loops += 1
            label = self.label()
            trips = self.draw(st.integers(1, 3))
            body = self.statements(d, 3)
            self.loops -= 1
            return (f"(local.set {counter} (i32.const {trips})) (loop {label} {body} "
                    f"(br_if {label} (local.tee {counter} (i32.sub (local.get {counter}) (i32.const 1)))))")
        if kind == "leave":
            return f"(br_if {self.pick(self.labels)} {self.iexpr(2)})"
        if kind == "return":
            return f"(if {self.iexpr(2)} (then (return)))"
        if kind == "trap":
            return f"(if (i32.eq {self.iexpr(1)} (i32.const 12345)) (then unreachable))"
        return f"(drop {self.iexpr(2)})"


def _narrow(gen: _Gen, d: int) -> str:
    if gen.draw(st.booleans()):
        return _write(5, "I16", gen.iexpr(2))
    return _write(4, "U8", gen.iexpr(2))


def _fnarrow(gen: _Gen, d: int) -> str:
    return _write(7, "F16", gen.fexpr(2))


def _reinterpret(gen: _Gen, d: int) -> str:
    """Any bit pattern stored through f32 unchanged (a copy: exact on every adapter)."""
    return _write(3, "F32", f"(f32.reinterpret_i32 {gen.iexpr(2)})")


def _br_out(gen: _Gen, d: int) -> str:
    """Leave an enclosing block unconditionally from inside an if."""
    return f"(if {gen.iexpr(2)} (then {gen.statements(max(d, 0), 2)} (br {gen.pick(gen.labels)})))"


def _data_loop(gen: _Gen, d: int) -> str:
    """A loop whose trip count is a masked input: br_if leaves it, br continues it."""
    counter = f"$k{gen.loops}"
    mask = gen.pick(TRIP_MASKS if gen.long_loops and not gen.data_loops else TRIP_MASKS[:6])
    big = mask >= BIG_TRIPS
    gen.loops += 1
    gen.data_loops += 1
    exit_label, loop_label = gen.label(), gen.label()
    gen.big_loop, was_big = gen.big_loop or big, gen.big_loop
    body = gen.statements(0 if big else d, 1 if big else 3)  # a long loop keeps a light body
    gen.big_loop = was_big
    gen.loops -= 1
    gen.data_loops -= 1
    trips = f"(i32.and {_read(0, 'I32')} (i32.const {mask}))"
    if big:  # only elements 0 and 1 loop long
        trips = f"(select {trips} (i32.const 0) (i32.lt_u (local.get $i) (i32.const 2)))"
    # every trip counts into $c, so a loop cut short changes what is written
    body += " (local.set $c (i32.add (local.get $c) (i32.const 1)))"
    after = " " + _write(2, "I32", "(local.get $c)") if big else ""
    return (f"(local.set {counter} {trips}) (block {exit_label} (loop {loop_label} "
            f"(br_if {exit_label} (i32.eqz (local.get {counter}))) {body} "
            f"(local.set {counter} (i32.sub (local.get {counter}) (i32.const 1))) (br {loop_label})))"
            + after)


EXTENDED_STATEMENTS = {"narrow": _narrow, "fnarrow": _fnarrow, "reinterpret": _reinterpret, "br_out": _br_out,
                       "data_loop": _data_loop}


@st.composite
def flow_programs(draw, floats: bool | None = None, depth: int = 3, extended: bool = False,
                  long_loops: bool = True) -> FlowProgram:
    """A random kernel of the extended subset (see the module docstring)."""
    use_floats = draw(st.booleans()) if floats is None else floats
    gen = _Gen(draw, use_floats, extended, long_loops)
    body = gen.statements(depth, 5)
    # one unconditional write first now and then, so some slots are not read_before_write
    if draw(st.booleans()):
        body = _write(2, "I32", gen.iexpr(2)) + " " + body
    return FlowProgram(body, use_floats)


def flow_inputs(draw, count: int) -> dict[int, "list[int]"]:
    """Input words for the FLOW_BINDINGS slots (old contents for the outputs)."""
    import struct

    ints = draw(st.lists(st.one_of(st.sampled_from(INTERESTING_INTS), st.integers(-(1 << 31), (1 << 31) - 1)),
                         min_size=count, max_size=count))
    quarters = draw(st.lists(st.one_of(st.integers(-16, 16).map(lambda q: q / 4),
                                       st.sampled_from([float("inf"), float("-inf"), float("nan"), -0.0])),
                             min_size=count, max_size=count))
    floats = [struct.unpack("<I", struct.pack("<f", v))[0] for v in quarters]
    old = draw(st.integers(0, 0xFFFFFFFF))
    return {0: [v & 0xFFFFFFFF for v in ints], 1: floats, 2: [old] * count, 3: [0x3F800000] * count,
            4: [(v * 7) & 0xFF for v in range(count)]}


def extended_inputs(draw, count: int) -> dict[int, "list[int]"]:
    """Stored values for every EXTENDED_BINDINGS slot: flow_inputs plus I16 words, F16 halves that
    are exact in f32 (small quarters, +-0, +-Inf, NaN) and old contents of the F16 output."""
    import numpy as np

    values = flow_inputs(draw, count)
    values[5] = draw(st.lists(st.integers(0, 0xFFFF), min_size=count, max_size=count))
    quarters = draw(st.lists(st.one_of(st.integers(-16, 16).map(lambda q: q / 4),
                                       st.sampled_from([float("inf"), float("-inf"), float("nan"), -0.0])),
                             min_size=count, max_size=count))
    values[6] = [int(h) for h in np.array(quarters, dtype=np.float16).view(np.uint16)]
    values[7] = [draw(st.integers(0, 0xFFFF))] * count
    return values
