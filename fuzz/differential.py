"""Differential fuzzer of random kernels: the GPU path, the CPU path and plain wasmtime must agree.

Every example is a random kernel of the extended GPU subset (tests/compiler/flowgen.py with
`extended=True`: control flow, br_table, traps, data-dependent loops past 65,535 trips and past
the loop budget, gathers in and out of range, conversions, select, narrow and F16 slots), random
inputs and a count, run three ways:

  gpu    Host(allow_software_adapter=True): dispatch, and on status 1 the guest's CPU runner
  cpu    Host(disabled=True): dispatch answers 1, the guest's CPU runner does the work
  plain  wasmtime alone: the same kernel function called per element over plain memory
         (fuzz/plainmem.py), no wagogpu at all

Properties: the CPU path and plain wasmtime agree bit for bit (every slot, floats included) and
trap alike (same message, same partial writes); when Wasm traps the GPU path answers 1 and the CPU
runner then traps alike; otherwise the GPU path answers 0 (or 1, a fallback: then bit-exact), its
integer and copied slots are bit-exact and its float slots differ only within the relaxed_float
classes of fuzz/floatcmp.py. A kernel outside the reference subset (its WGSL hides float operands
behind the run-time zero, compiler/valuetext.py) on a software adapter, which neither flushes
subnormals nor rounds division or square root differently, must give Wasm's floats: only NaNs
may differ (sign or payload). The driver's folding classes there are a compiler bug.

    python fuzz/differential.py --minutes 10
    python fuzz/differential.py --examples 500 --seed 1

The last line is `FUZZ-RESULT {json}`; a failure is shrunk by hypothesis and kept as JSON in
fuzz/results/differential-failure-<digest>.json (replay: `--replay FILE`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (ROOT, HERE, ROOT / "tests" / "compiler"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import numpy as np  # noqa: E402
import wasmtime  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import seed as fixed_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from abitable import ELEMENTS_BY_ID, import_decls, kernel_funcs, trap_text  # noqa: E402
from floatcmp import FloatClass, classify_f16, classify_f32  # noqa: E402
from flowgen import EXTENDED_BINDINGS, LOCALS, extended_inputs, flow_kernel, flow_programs  # noqa: E402
from plainmem import PlainRun, PlainRunner  # noqa: E402
from fuzz_result import FuzzResult, first_of  # noqa: E402
from wagogpu import CompileError, Config, Host, compile_buffer_wgsl  # noqa: E402
from wagogpu.compiler.valuetext import OPAQUE_ZERO  # noqa: E402

KERNEL = flow_kernel(extended=True)
TYPES = {b.slot: int(b.type) for b in EXTENDED_BINDINGS}
DTYPES = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<u8"}
FLOAT_SLOTS = {3: classify_f32, 7: classify_f16}  # outputs written with f32 arithmetic
#: What an opaque kernel's float may differ by on a software adapter (module docstring).
OPAQUE_ON_SOFTWARE = frozenset((FloatClass.EXACT, FloatClass.NAN_QUIETING))
COUNTS = [1, 5, 64, 80, 300]
RECYCLE_EVERY = 150  # fresh hosts now and then, so no cache grows without bound
RUN_TIMEOUT = 60.0  # lavapipe on a loaded machine can take seconds for one dispatch; the default is 5 s
HELPERS = """
  (func (export "put") (param i32 i32 i32) (result i32)
    (call $setBuffer32 (local.get 0) (i32.const 0) (i32.const 0) (local.get 1) (local.get 2)))
  (func (export "get") (param i32 i32 i32) (result i32)
    (call $copyBuffer32 (local.get 0) (i32.const 0) (i32.const 0) (local.get 1) (local.get 2)))
  (func (export "create") (param i32 i32) (result i64) (call $createBufferPacked (local.get 0) (local.get 1)))
  (func (export "bind") (param i32 i32) (result i32) (call $bindBuffer (local.get 0) (local.get 1)))
  (func (export "dispatch") (param i32 i32) (result i32) (call $dispatch (local.get 0) (local.get 1)))"""


def guest_wat(body: str) -> str:
    return f"(module\n{import_decls()}\n  (memory (export \"memory\") 1)\n{kernel_funcs(body, LOCALS)}\n{HELPERS})"


@dataclass
class Case:
    """One example: a kernel body, the dispatch count, the buffers' length and their stored values."""

    body: str
    floats: bool
    count: int
    length: int
    inputs: dict[int, list[int]]

    def arrays(self) -> dict[int, np.ndarray]:
        width = {s: ELEMENTS_BY_ID[t].stored_bytes for s, t in TYPES.items()}
        return {s: np.array(self.inputs[s][:self.length], dtype=np.uint64).astype(DTYPES[width[s]])
                for s in TYPES}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Case":
        record = json.loads(text)
        record["inputs"] = {int(k): v for k, v in record["inputs"].items()}
        return cls(**record)


@st.composite
def cases(draw, long_loops: bool = True) -> Case:
    program = draw(flow_programs(extended=True, long_loops=long_loops))
    count = draw(st.sampled_from(COUNTS))
    length = max(64, count) + draw(st.sampled_from([0, 0, 1, 3]))
    return Case(program.body, program.floats, count, length, extended_inputs(draw, length))


@dataclass
class HostRun:
    """What one wagogpu host did with a case."""

    status: int
    outcome: str
    reason: str
    trap: str | None
    slots: dict[int, np.ndarray]


def run_host(host: Host, wasm: bytes, case: Case) -> HostRun:
    """Buffers filled, bound and dispatched as a guest does; the CPU runner on status 1."""
    module = host.compile(wasm)
    inst = host.instantiate(module)
    try:
        arrays, handles = case.arrays(), {}
        for slot, data in arrays.items():
            packed = inst.call("create", TYPES[slot], case.length)
            handles[slot] = packed & 0xFFFFFFFF
            inst.write_memory(0, data.tobytes())
            assert packed >> 32 == 0 and inst.call("put", handles[slot], 0, case.length) == 0
            assert inst.call("bind", slot, handles[slot]) == 0
        status = inst.call("dispatch", KERNEL.id, case.count)
        last = host.buffer_snapshot().last_dispatch
        trap = None
        if status == 1:
            try:
                inst.call(KERNEL.cpu_export, case.count)
            except wasmtime.Trap as exc:
                trap = trap_text(exc)
        slots = {}
        for slot, data in arrays.items():
            assert inst.call("get", handles[slot], 0, case.length) == 0
            slots[slot] = np.frombuffer(inst.read_memory(0, data.nbytes), dtype=data.dtype).copy()
        return HostRun(status, last.outcome, last.reason_code, trap, slots)
    finally:
        inst.close()
        module.close()


def opaque_floats(wasm: bytes) -> bool:
    """Whether the kernel is outside the reference subset: its WGSL hides float operands from the
    driver (compiler/valuetext.py). False when it does not compile (the GPU path falls back)."""
    try:
        return OPAQUE_ZERO in compile_buffer_wgsl(wasm, KERNEL)
    except CompileError:
        return False


class Mismatch(AssertionError):
    """A property failed; the message says which, the case is attached for the regression file."""

    def __init__(self, what: str, case: Case) -> None:
        super().__init__(f"{what}\nkernel body (count {case.count}, length {case.length}): {case.body}")
        self.case = case


@dataclass
class Stats:
    examples: int = 0
    gpu_ran: int = 0
    traps: int = 0
    trap_kinds: Counter = field(default_factory=Counter)  # plain wasmtime's trap messages
    fallbacks: Counter = field(default_factory=Counter)  # reason code of non-trapping status-1 dispatches
    timeouts: int = 0  # GPU dispatches past run_timeout (CANCELLED, nothing published, host quarantined)
    floats: Counter = field(default_factory=Counter)  # FloatClass of every differing float word
    exact_floats: int = 0  # GPU runs held to Wasm's floats (opaque kernels on a software adapter)

    def line(self, seconds: float) -> str:
        return (f"{self.examples} examples in {seconds:.1f} s ({self.examples / max(seconds, 1e-9):.2f}/s): "
                f"{self.gpu_ran} on the GPU, {self.timeouts} past run_timeout, {self.traps} trapping {dict(self.trap_kinds)}, fallbacks {dict(self.fallbacks)}, "
                f"differing float words {dict(self.floats)}, {self.exact_floats} held to Wasm's floats")


def _same(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> list[int]:
    return [s for s in a if not np.array_equal(a[s], b[s])]


def check_cpu(cpu: HostRun, plain: PlainRun, case: Case) -> None:
    if cpu.status != 1:
        raise Mismatch(f"CPU host dispatch answered {cpu.status}, not 1", case)
    if cpu.trap != plain.trap:
        raise Mismatch(f"CPU path trap {cpu.trap!r} but plain wasmtime {plain.trap!r}", case)
    if bad := _same(cpu.slots, plain.slots):
        raise Mismatch(f"CPU path and plain wasmtime differ in slots {bad}", case)


def check_gpu(gpu: HostRun, plain: PlainRun, case: Case, stats: Stats, exact_floats: bool = False) -> None:
    """The GPU path against plain wasmtime; ``exact_floats``: an opaque kernel on a software adapter
    (only NaNs may differ)."""
    if gpu.status == 9:  # past run_timeout: CANCELLED is the spec's answer, and nothing may be published
        if bad := _same(gpu.slots, case.arrays()):
            raise Mismatch(f"a CANCELLED dispatch changed slots {bad}", case)
        stats.timeouts += 1
        return
    if plain.trap is not None or gpu.status == 1:
        if gpu.status != 1:
            raise Mismatch(f"GPU path answered {gpu.status} where Wasm traps ({plain.trap})", case)
        if gpu.trap != plain.trap:
            raise Mismatch(f"after status 1 the runner trapped {gpu.trap!r}, plain wasmtime {plain.trap!r}", case)
        if bad := _same(gpu.slots, plain.slots):
            raise Mismatch(f"GPU host after fallback differs from plain wasmtime in slots {bad}", case)
        if plain.trap is None:
            stats.fallbacks[gpu.reason] += 1
        return
    if gpu.status != 0:
        raise Mismatch(f"GPU path answered {gpu.status} (outcome {gpu.outcome}, reason {gpu.reason})", case)
    stats.gpu_ran += 1
    stats.exact_floats += exact_floats
    for slot, got in gpu.slots.items():
        want = plain.slots[slot]
        classify = FLOAT_SLOTS.get(slot) if case.floats else None
        if classify is None:
            if not np.array_equal(got, want):
                where = int(np.flatnonzero(got != want)[0])
                raise Mismatch(f"GPU slot {slot} element {where}: {int(got[where]):#x}, Wasm {int(want[where]):#x}",
                               case)
            continue
        for where in np.flatnonzero(got != want):
            cls = classify(int(got[where]), int(want[where]))
            stats.floats[cls.value] += 1
            if cls is FloatClass.OTHER:
                raise Mismatch(f"GPU slot {slot} element {int(where)}: {int(got[where]):#x}, Wasm "
                               f"{int(want[where]):#x}: outside the relaxed_float classes", case)
            if exact_floats and cls not in OPAQUE_ON_SOFTWARE:
                raise Mismatch(f"GPU slot {slot} element {int(where)}: {int(got[where]):#x}, Wasm "
                               f"{int(want[where]):#x}: {cls.value} in a kernel whose float operands are "
                               f"opaque, on a software adapter", case)


class Differential:
    """The two hosts and the plain runner, reused across examples."""

    def __init__(self) -> None:
        self.plain = PlainRunner()
        self.cpu: Host | None = None
        self.gpu: Host | None = None
        self.software = False  # the GPU host's adapter is a software one (lavapipe)
        self.used = 0

    def hosts(self) -> tuple[Host, Host]:
        if self.cpu is None or self.gpu is None or self.used >= RECYCLE_EVERY:
            self.close()
            self.cpu = Host(Config(kernels=[KERNEL], disabled=True))
            self.gpu = Host(Config(kernels=[KERNEL], allow_software_adapter=True, run_timeout=RUN_TIMEOUT))
            if self.gpu.buffer_snapshot().device_state != "USABLE":
                raise RuntimeError(f"no GPU adapter opened: {self.gpu.buffer_snapshot().reason}")
            self.software = self.gpu.device.info.is_software
        self.used += 1
        return self.cpu, self.gpu

    def check(self, case: Case, stats: Stats) -> None:
        cpu, gpu = self.hosts()
        wasm = wasmtime.wat2wasm(guest_wat(case.body))
        plain = self.plain.run(wasm, KERNEL.export, case.count, TYPES, case.arrays())
        stats.examples += 1
        stats.traps += plain.trap is not None
        if plain.trap is not None:
            stats.trap_kinds[plain.trap] += 1
        check_cpu(run_host(cpu, wasm, case), plain, case)
        gpu_run = run_host(gpu, wasm, case)
        check_gpu(gpu_run, plain, case, stats, case.floats and self.software and opaque_floats(wasm))
        if gpu_run.status == 9:
            self.used = RECYCLE_EVERY  # the timeout quarantined the device: fresh hosts next time
        elif gpu.buffer_snapshot().device_state != "USABLE":
            raise Mismatch(f"the GPU host was quarantined: {gpu.buffer_snapshot().reason}", case)

    def close(self) -> None:
        for host in (self.cpu, self.gpu):
            if host is not None:
                host.close()
        self.cpu = self.gpu = None
        self.used = 0


def fuzz(seconds: float, examples: int | None, verbose: bool = False, seed: int | None = None,
         stats: Stats | None = None, long_loops: bool = True) -> Stats:
    """Check random cases until `seconds` pass or `examples` ran; raise Mismatch (shrunk) on a failure."""
    stats = stats if stats is not None else Stats()
    diff = Differential()
    deadline = time.monotonic() + seconds
    limit = examples if examples is not None else float("inf")

    def done() -> bool:
        return stats.examples >= limit or time.monotonic() > deadline

    @settings(max_examples=25, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(long_loops))
    def one(case: Case) -> None:
        if not done():
            diff.check(case, stats)

    chunk = 0
    start = time.monotonic()
    try:
        while not done():
            runner = one if seed is None else fixed_seed(seed + chunk)(one)
            runner()
            chunk += 1
            if verbose:
                print(stats.line(time.monotonic() - start), flush=True)
    finally:
        diff.close()
    return stats


def keep(case: Case) -> Path:
    """The failing case as JSON under fuzz/results (the regression tests read such files)."""
    text = case.to_json()
    path = HERE / "results" / f"differential-failure-{hashlib.sha1(text.encode()).hexdigest()[:12]}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text + "\n")
    return path


def replay(path: str) -> int:
    case = Case.from_json(Path(path).read_text())
    stats, diff = Stats(), Differential()
    try:
        diff.check(case, stats)
    finally:
        diff.close()
    print("PASS:", stats.line(0.0))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None, help="derandomise: the same examples every run")
    parser.add_argument("--replay", default=None, help="check one saved case (JSON) and exit")
    parser.add_argument("--no-long-loops", action="store_true",
                        help="keep data loops under 65,536 trips (past a known lavapipe loop cut)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    minutes = args.minutes if args.minutes is not None else (1.0 if args.examples is None else 1e9)
    t0 = time.monotonic()
    stats, failures = Stats(), 0
    try:
        fuzz(minutes * 60, args.examples, verbose=not args.quiet, seed=args.seed, stats=stats,
             long_loops=not args.no_long_loops)
        print("PASS:", stats.line(time.monotonic() - t0))
    except (Mismatch, BaseExceptionGroup) as raised:
        exc = first_of(raised, Mismatch)
        if exc is None:
            raise
        failures = 1
        print(f"FAIL: {exc}\nkept in {keep(exc.case)}")
    seconds = time.monotonic() - t0
    print(FuzzResult("differential", stats.examples, seconds, failures,
                     {"gpu_ran": stats.gpu_ran, "timeouts": stats.timeouts, "traps": dict(stats.trap_kinds), "fallbacks": dict(stats.fallbacks),
                      "float_classes": dict(stats.floats), "exact_floats": stats.exact_floats}).line(), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    sys.exit(main())
