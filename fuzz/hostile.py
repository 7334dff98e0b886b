"""Hostile-guest fuzzer of the 34 wago_gpu_v1 imports, checked against a model of the spec.

Each sequence is a random list of import calls with mostly hostile arguments: bad, zero, stale
(freed), not-yet-allocated and other-instance handles, huge counts, overlapping and out-of-range
ranges and offsets, memory indices past the module's memories, the wrong memory kind (64-bit,
shared), GC references of the wrong kind (null, i31, struct, other arrays, immutable), slots out of
range, one handle in two slots, dispatches with unbound, mistyped or too-short buffers, frees in
the middle, scalar reads and writes out of range or of the wrong type, and the guest's CPU runner
called with any count. Every call goes through the guest of fuzz/hostile_guest.py, as a guest
makes it.

The sequence runs on a CPU host (disabled=True) and a GPU host (lavapipe), each beside a fresh
fuzz/hostile_model.py that predicts every status, trap message, value read back and guest-memory byte
copied out; after the sequence every live buffer's contents and both guest memories are compared
too, and both hosts must have seen the same (handles renumbered, a dispatch's 0 and 1 both
counting as "ran"). Any difference fails; hypothesis shrinks the sequence, which is kept as JSON
under fuzz/results/hostile-failure-*.json (replay with --replay; regression tests in
tests/host/test_hostile_regressions.py).

    python fuzz/hostile.py --minutes 10
    python fuzz/hostile.py --sequences 300 --seed 1

The last line is `FUZZ-RESULT {json}` (executions = sequences; detail counts import calls).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (HERE.parent, HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import seed as fixed_seed  # noqa: E402

from hostile_ops import Op, execute, predict, resolve, sequences  # noqa: E402
from hostile_guest import guest_wat  # noqa: E402
from hostile_kernels import KERNELS  # noqa: E402
from hostile_model import MEMORIES, Ambiguous, Limits, Model  # noqa: E402
from fuzz_result import FuzzResult, first_of  # noqa: E402
from wagogpu import Config, Host, Instance  # noqa: E402

LIMITS = Limits(max_buffers=6, max_elements=4096, instance_bytes=12 * 1024)
RECYCLE_EVERY = 200


def host_config(gpu: bool) -> Config:
    kernels = [k.config() for k in KERNELS.values()]
    common = dict(kernels=kernels, max_buffers_per_instance=LIMITS.max_buffers, max_elements=LIMITS.max_elements,
                  max_instance_buffer_bytes=LIMITS.instance_bytes)
    return Config(**common, allow_software_adapter=True) if gpu else Config(**common, disabled=True)


class Failure(AssertionError):
    def __init__(self, what: str, ops: list[Op]) -> None:
        super().__init__(f"{what}\nsequence: {json.dumps(ops)}")
        self.ops = ops


@dataclass
class Trace:
    """What one host did with a sequence: per op an observation (None: skipped), and the end state."""

    observations: list
    handles: list[int]  # the handles created in instance A, in order
    other: int  # instance B's handle
    buffers: dict[int, bytes] = field(default_factory=dict)
    memories: list[bytes] = field(default_factory=list)


def _handle_name(value: int, trace: Trace) -> int | str:
    """A handle as the index of its creation (handle numbers differ between the hosts)."""
    if value in trace.handles:
        return f"h{trace.handles.index(value)}"
    return "other" if value == trace.other else value


def _normal(op: Op, value: Any, trace: Trace) -> Any:
    """An observation with its handle fields (create, packed, getBuffer) renumbered."""
    if value is None:
        return None
    if op[0] == "create":
        return [_handle_name(value[0], trace), value[1]]
    if op[0] == "packed":
        return [_handle_name(value & 0xFFFFFFFF, trace), value >> 32]
    if op[0] == "get" and isinstance(value, int):
        return _handle_name(value, trace)
    return value


def run_sequence(host: Host, module: Any, ops: list[Op], gpu: bool, skip: set[int]) -> Trace:
    """Run `ops` on a fresh instance of `host` beside a fresh model; raise Failure on the first
    disagreement. Ops in `skip`, and those the model calls Ambiguous, are not run (added to skip)."""
    other_inst = host.instantiate(module)
    inst = host.instantiate(module)
    try:
        other = other_inst.call("createBufferPacked", 5, 4) & 0xFFFFFFFF
        model = Model(LIMITS, gpu, next_handle=other + 1)
        trace = Trace([], [], other)
        for index, op in enumerate(ops):
            if index in skip:
                trace.observations.append(None)
                continue
            args = resolve(op, model, trace.handles, other)
            try:
                want = predict(model, op, args)
            except Ambiguous:
                skip.add(index)
                trace.observations.append(None)
                continue
            got = execute(inst, op, args)
            if got != want:
                raise Failure(f"{'GPU' if gpu else 'CPU'} host, op {index} {op[0]}{tuple(args)}: host {got!r}, "
                              f"model {want!r}", ops)
            trace.observations.append(got)
            OUTCOMES[(op[0], _kind(op, got))] += gpu
            _note_handles(op, got, trace)
        _compare_state(inst, model, trace, ops, gpu)
        return trace
    finally:
        inst.close()
        other_inst.close()


def _kind(op: Op, observation: Any) -> str:
    """A short name of an observation for the outcome counts: status N, trap N, done, value."""
    if isinstance(observation, list) and observation and observation[0] == "trap":
        return "trap " + observation[1].rsplit(" ", 1)[-1] if "status" in observation[1] else observation[1]
    if op[0] == "create":
        return f"status {observation[1]}"
    if op[0] == "packed":
        return f"status {observation >> 32}"
    if op[0] == "dispatch":
        return f"status {observation[0]}" + (" then runner trap" if observation[1] else "")
    if observation is None:
        return "done"
    return "value" if op[0] in ("read", "get") else f"status {observation}"


OUTCOMES: Counter = Counter()  # (op, outcome) on the GPU host, for the report


def _note_handles(op: Op, got: Any, trace: Trace) -> None:
    if op[0] == "create" and got[1] == 0:
        trace.handles.append(got[0])
    elif op[0] == "packed" and got >> 32 == 0:
        trace.handles.append(got & 0xFFFFFFFF)


def contents(inst: Instance, handle: int, length: int, size: int) -> bytes:
    """A buffer's stored bytes: Instance.read_buffer (DESIGN.md) where the host has it, else a
    copyBuffer32 through guest memory 0 whose bytes are put back afterwards."""
    if hasattr(inst, "read_buffer"):
        return inst.read_buffer(handle).tobytes()
    saved = inst.read_memory(0, size)
    if inst.call("copyBuffer32", handle, 0, 0, 0, length) != 0:
        raise AssertionError(f"copyBuffer32 of live buffer {handle} failed")
    data = inst.read_memory(0, size)
    inst.write_memory(0, saved)
    return data


def _compare_state(inst: Instance, model: Model, trace: Trace, ops: list[Op], gpu: bool) -> None:
    """Every live buffer's contents (read_buffer) and the guest memories, against the model."""
    for handle, buf in sorted(model.buffers.items()):
        got = contents(inst, handle, buf.length, len(buf.data))
        if got != bytes(buf.data):
            raise Failure(f"{'GPU' if gpu else 'CPU'} host: buffer {handle} holds {got[:32].hex()}, model "
                          f"{bytes(buf.data[:32]).hex()}", ops)
        trace.buffers[trace.handles.index(handle)] = got
    for index, mem in enumerate(MEMORIES):
        if mem.shared:
            continue
        got = inst.read_memory(0, mem.size, memory=index)
        if got != bytes(model.memories[index]):
            where = next(i for i in range(mem.size) if got[i] != model.memories[index][i])
            raise Failure(f"{'GPU' if gpu else 'CPU'} host: memory {index} byte {where} is {got[where]}, model "
                          f"{model.memories[index][where]}", ops)
        trace.memories.append(got)


def _ran(value: Any) -> Any:
    """A dispatch's 0 (ran on the GPU) and 1 (the runner ran after it) count the same across hosts."""
    return "ran" if value in (0, 1) else value


def compare_hosts(cpu: Trace, gpu: Trace, ops: list[Op]) -> None:
    for index, (op, a, b) in enumerate(zip(ops, cpu.observations, gpu.observations)):
        na, nb = _normal(op, a, cpu), _normal(op, b, gpu)
        if op[0] == "dispatch" and na is not None and nb is not None:
            na, nb = _ran(na[0]), _ran(nb[0])
        if na != nb:
            raise Failure(f"op {index} {op[0]}: CPU host {a!r}, GPU host {b!r}", ops)
    if cpu.buffers != gpu.buffers or cpu.memories != gpu.memories:
        raise Failure("the hosts end with different buffers or guest memories", ops)


class Hostile:
    """Both hosts and the compiled guest, reused across sequences."""

    def __init__(self) -> None:
        self.wat = guest_wat()
        self.pair: tuple | None = None
        self.used = 0
        self.sequences = 0  # checked (the failing one included)
        self.calls = 0
        self.skipped = 0

    def hosts(self) -> tuple[Host, Any, Host, Any]:
        if self.pair is None or self.used >= RECYCLE_EVERY:
            self.close()
            cpu, gpu = Host(host_config(False)), Host(host_config(True))
            if gpu.buffer_snapshot().device_state != "USABLE":
                raise RuntimeError(f"no GPU adapter opened: {gpu.buffer_snapshot().reason}")
            self.pair = (cpu, cpu.compile(self.wat), gpu, gpu.compile(self.wat))
        self.used += 1
        return self.pair

    def check(self, ops: list[Op]) -> None:
        cpu, cpu_module, gpu, gpu_module = self.hosts()
        self.sequences += 1
        skip: set[int] = set()
        gpu_trace = run_sequence(gpu, gpu_module, ops, True, skip)
        cpu_trace = run_sequence(cpu, cpu_module, ops, False, skip)
        compare_hosts(cpu_trace, gpu_trace, ops)
        if gpu.buffer_snapshot().device_state != "USABLE":
            raise Failure(f"the GPU host was quarantined: {gpu.buffer_snapshot().reason}", ops)
        self.calls += len(ops) - len(skip)
        self.skipped += len(skip)

    def close(self) -> None:
        if self.pair is not None:
            self.pair[0].close()
            self.pair[2].close()
        self.pair, self.used = None, 0


def fuzz(seconds: float, limit: int | None, hostile: Hostile, verbose: bool, seed: int | None) -> int:
    """Check random sequences until `seconds` pass or `limit` ran; the number checked."""
    deadline = time.monotonic() + seconds
    done = lambda: (limit is not None and hostile.sequences >= limit) or time.monotonic() > deadline  # noqa: E731

    @settings(max_examples=50, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sequences())
    def one(ops: list[Op]) -> None:
        if not done():
            hostile.check(ops)

    chunk, start = 0, time.monotonic()
    while not done():
        (one if seed is None else fixed_seed(seed + chunk)(one))()
        chunk += 1
        if verbose:
            print(f"{hostile.sequences} sequences, {hostile.calls} calls in {time.monotonic() - start:.0f} s", flush=True)
    return hostile.sequences


def keep(ops: list[Op]) -> Path:
    text = json.dumps(ops)
    path = HERE / "results" / f"hostile-failure-{hashlib.sha1(text.encode()).hexdigest()[:12]}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text + "\n")
    return path


def load(text: str) -> list[Op]:
    return [tuple(op) if not isinstance(op, str) else op for op in json.loads(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--sequences", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--replay", default=None, help="check one saved sequence (JSON) and exit")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    hostile, failures = Hostile(), 0
    minutes = args.minutes if args.minutes is not None else (1.0 if args.sequences is None else 1e9)
    t0 = time.monotonic()
    try:
        if args.replay:
            hostile.check(load(Path(args.replay).read_text()))
        else:
            fuzz(minutes * 60, args.sequences, hostile, not args.quiet, args.seed)
        print(f"PASS: {hostile.sequences} sequences, {hostile.calls} import calls ({hostile.skipped} skipped as ambiguous)")
    except (Failure, BaseExceptionGroup) as raised:
        exc = first_of(raised, Failure)
        if exc is None:
            raise
        failures = 1
        print(f"FAIL: {exc}\nkept in {keep(exc.ops)}")
    finally:
        hostile.close()
    outcomes = {f"{op}: {kind}": n for (op, kind), n in sorted(OUTCOMES.items())}
    print(FuzzResult("hostile", hostile.sequences, time.monotonic() - t0, failures,
                     {"calls": hostile.calls, "skipped": hostile.skipped, "outcomes": outcomes}).line(), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    sys.exit(main())
