"""CPU kernels (Config.cpu_kernels) on the CPU-only path: every answer is the guest's own runner's,
bit for bit (NaN payloads, i64, f64, gathers, guest-memory loads, READ_WRITE); a trap or a loop
past its budget publishes nothing and answers 1 with KERNEL_TRAP, after which the runner gives the
reference's answer (or traps as Wasm does); cpu_kernels=False keeps the reference's statuses."""
from __future__ import annotations

import numpy as np
import pytest
import wasmtime

from wagogpu import Access, BindingConfig, Config, ConfigError, ElementType, Host, KernelConfig
from wagogpu.abi import unpack_result
from wagogpu.compiler.reader import Reader
from wagogpu.host import cputhreads
from wagogpu.host.cputhreads import Schedule

from ..gpu_support import Guest
from ..guests import abi_module, looped_kernel

E, A = ElementType, Access


def rd(t: str, slot: int, index: str = "(local.get $i)") -> str:
    return f"(call $readBuffer{t} (call $getBuffer (i32.const {slot})) {index})"


def wr(t: str, slot: int, value: str) -> str:
    return f"(call $writeBuffer{t} (call $getBuffer (i32.const {slot})) (local.get $i) {value})"


X32 = rd("F32", 0)
KERNELS = {
    # name: (bindings, body)
    "fnan": ([(0, E.F32, A.READ), (1, E.F32, A.WRITE)],
             wr("F32", 1, f"(f32.add (f32.mul {X32} (f32.const -1.5)) (f32.div (f32.max {X32} (f32.const 0.25))"
                          f" (f32.sub {X32} (f32.const 0.5))))")),
    "f64": ([(0, E.F64, A.READ), (1, E.F64, A.WRITE)],
            wr("F64", 1, f"(f64.add (f64.mul {rd('F64', 0)} {rd('F64', 0)}) (f64.sqrt {rd('F64', 0)}))")),
    "hash": ([(0, E.U64, A.READ_WRITE)],
             f"(local $x i64) (local.set $x (i64.mul {rd('U64', 0)} (i64.const 0x9E3779B97F4A7C15)))"
             f" {wr('U64', 0, '(i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 29)))')}"),
    "gather": ([(0, E.I32, A.READ), (1, E.F32, A.READ), (2, E.F32, A.WRITE)],
               wr("F32", 2, rd("F32", 1, rd("I32", 0)))),
    "divide": ([(0, E.I32, A.READ_WRITE)],
               wr("I32", 0, f"(i32.div_s (i32.const 1000000) {rd('I32', 0)})")),
    "loop": ([(0, E.I32, A.READ), (1, E.I32, A.WRITE)],
             f"(local $j i32) (local $s i32) (local $n i32) (local.set $n {rd('I32', 0)})"
             " (block $done (loop $next (br_if $done (i32.ge_u (local.get $j) (local.get $n)))"
             " (local.set $s (i32.add (local.get $s) (i32.mul (local.get $j) (local.get $j))))"
             " (local.set $j (i32.add (local.get $j) (i32.const 1))) (br $next)))"
             f" {wr('I32', 1, '(local.get $s)')}"),
    "table": ([(0, E.I32, A.READ), (1, E.I32, A.WRITE)],
              wr("I32", 1, f"(i32.load offset=4096 (i32.shl (i32.and {rd('I32', 0)} (i32.const 7)) (i32.const 2)))")),
    "grows": ([(0, E.I32, A.READ), (1, E.I32, A.WRITE)], wr("I32", 1, "(memory.grow (i32.const 0))")),
    "half": ([(0, E.F16, A.READ), (1, E.F16, A.WRITE)],
             wr("F16", 1, f"(f32.add (f32.mul {rd('F16', 0)} (f32.const 3.3)) (f32.const 0.1))")),
}
IDS = {name: i for i, name in enumerate(KERNELS, start=1)}
EXTRA = '(data (i32.const 4096) "\\01\\00\\00\\00\\02\\00\\00\\00\\03\\00\\00\\00\\05\\00\\00\\00' \
        '\\08\\00\\00\\00\\0d\\00\\00\\00\\15\\00\\00\\00\\22\\00\\00\\00")'
WAT_KERNELS = "".join(looped_kernel(name, body) for name, (_, body) in KERNELS.items())
CONFIGS = [KernelConfig(IDS[name], f"wago_gpu.kernel.{name}", f"wago_gpu.cpu.{name}",
                        [BindingConfig(*b) for b in binds]) for name, (binds, _) in KERNELS.items()]
DTYPES = {E.F32: np.float32, E.F64: np.float64, E.U64: np.uint64, E.I32: np.int32, E.F16: np.float16}


@pytest.fixture(scope="module")
def hosts():
    ref = Host(Config(kernels=CONFIGS, disabled=True))
    cpu = Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True))
    yield ref, cpu
    ref.close()
    cpu.close()


def run(host: Host, name: str, inputs: list[np.ndarray]):
    """(status, last dispatch, each bound buffer's bytes after the dispatch and, on 1, the runner)."""
    g = Guest(host, kernels=WAT_KERNELS, extra=EXTRA)
    binds, _ = KERNELS[name]
    n = len(inputs[-1])
    handles = [g.create(t, len(data)) for (_, t, _), data in zip(binds, inputs)]
    for h, data in zip(handles, inputs):
        g.inst.write_buffer(h, data)
    g.bind(*handles)
    status = g.dispatch(IDS[name], n)
    last = host.buffer_snapshot().last_dispatch
    trap = ""
    if status == 1:
        try:
            g.inst.call(f"wago_gpu.cpu.{name}", n)
        except wasmtime.Trap as exc:
            trap = str(exc).splitlines()[0]
    return status, last, [g.inst.read_buffer(h).tobytes() for h in handles], trap


def same_as_runner(hosts, name: str, inputs: list[np.ndarray], expect: str = "CPU"):
    ref, cpu = hosts
    want_status, _, want, want_trap = run(ref, name, inputs)
    status, last, got, trap = run(cpu, name, inputs)
    assert want_status == 1
    if expect == "CPU":
        assert (status, str(last.outcome), str(last.reason_code)) == (0, "CPU", "NONE"), last.reason
    else:
        assert (status, str(last.reason_code)) == (1, expect), last.reason
    assert got == want
    assert trap == want_trap
    return last


def floats32() -> np.ndarray:
    bits = np.array([0x7FC00001, 0xFFA00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x80000000, 0, 1, 0x807FFFFF,
                     0x3F000000, 0x3E800000], dtype=np.uint32)
    rng = np.random.default_rng(1)
    return np.concatenate([bits.view(np.float32), rng.uniform(-4, 4, 989).astype(np.float32)])


def test_float_nan_payloads_match_the_runner(hosts):
    same_as_runner(hosts, "fnan", [floats32(), np.zeros(1000, np.float32)])


def test_f64_matches_the_runner(hosts):
    x = np.concatenate([[np.nan, -np.nan, np.inf, -1.0, -0.0, 2.0 ** 1000], np.linspace(-3, 9, 994)])
    same_as_runner(hosts, "f64", [x, np.zeros(1000)])


def test_i64_read_write_matches_the_runner(hosts):
    x = np.random.default_rng(3).integers(0, 2 ** 63, 1000, dtype=np.uint64) * np.uint64(3)
    same_as_runner(hosts, "hash", [x])


def test_gather_matches_the_runner(hosts):
    src = np.arange(1000, dtype=np.float32) * np.float32(0.5)
    idx = np.random.default_rng(4).integers(0, 1000, 1000).astype(np.int32)
    same_as_runner(hosts, "gather", [idx, src, np.full(1000, 7, np.float32)])


def test_gather_out_of_range_traps_and_publishes_nothing(hosts):
    idx = np.arange(1000, dtype=np.int32)
    idx[600] = 1000
    last = same_as_runner(hosts, "gather", [idx, np.ones(1000, np.float32), np.full(1000, 7, np.float32)],
                          expect="KERNEL_TRAP")
    assert "CPU kernel trapped" in last.reason


def test_division_by_zero_restores_the_read_write_buffer(hosts):
    x = np.arange(1, 1001, dtype=np.int32)
    x[500] = 0
    same_as_runner(hosts, "divide", [x], expect="KERNEL_TRAP")
    same_as_runner(hosts, "divide", [np.arange(-500, 500, dtype=np.int32) | 1])


@pytest.mark.parametrize("threads", [1, 4])
def test_a_trap_zeroes_a_fresh_output_back(threads):
    """An output never written since it was created (version 1: its zeros) is not kept but zeroed
    back on a trap; one written before is put back as it was."""
    n = 100_000
    index = np.arange(n, dtype=np.int32) % 64
    index[n - 7] = 1 << 20  # a gather past the end, after the other elements were written
    table = np.arange(n, dtype=np.float32) + 0.5  # (every bound buffer holds count elements)
    with Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True, cpu_threads=threads)) as host:
        g = Guest(host, kernels=WAT_KERNELS, extra=EXTRA)
        idx, src, fresh, old = (g.create(t, n) for t in (E.I32, E.F32, E.F32, E.F32))
        g.inst.write_buffer(idx, index)
        g.inst.write_buffer(src, table)
        g.inst.write_buffer(old, np.full(n, 7.0, np.float32))
        for out, want in ((fresh, np.zeros(n, np.float32)), (old, np.full(n, 7.0, np.float32))):
            version = g.version(out)
            g.bind(idx, src, out)
            assert g.dispatch(IDS["gather"], n) == 1
            assert str(host.buffer_snapshot().last_dispatch.reason_code) == "KERNEL_TRAP"
            assert g.version(out) == version and np.array_equal(g.inst.read_buffer(out), want)
        assert g.version(fresh) == 1


def test_loops_within_and_past_their_budget(hosts):
    same_as_runner(hosts, "loop", [np.arange(1000, dtype=np.int32), np.zeros(1000, np.int32)])
    long = np.zeros(4, dtype=np.int32)
    long[2] = (1 << 20) + 5  # past reader.LOOP_BUDGET: the runner finishes it
    same_as_runner(hosts, "loop", [long, np.full(4, 9, np.int32)], expect="KERNEL_TRAP")


def test_f16_matches_the_runner(hosts):
    bits = np.array([0x7E00, 0x7C01, 0xFC00, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x3C00], dtype=np.uint16)
    x = np.concatenate([bits.view(np.float16), np.linspace(-60000, 60000, 992).astype(np.float16)])
    same_as_runner(hosts, "half", [x, np.zeros(1000, np.float16)])


def test_guest_memory_loads_match_the_runner(hosts):
    same_as_runner(hosts, "table", [np.arange(1000, dtype=np.int32), np.zeros(1000, np.int32)])


def test_unsupported_kernel_still_falls_back(hosts):
    same_as_runner(hosts, "grows", [np.arange(8, dtype=np.int32), np.zeros(8, np.int32)], expect="UNSUPPORTED_KERNEL")


def test_aliasing_and_count_zero_keep_their_statuses(hosts):
    _, cpu = hosts
    g = Guest(cpu, kernels=WAT_KERNELS, extra=EXTRA)
    h = g.create(E.F32, 16)
    g.bind(h, h)
    assert g.dispatch(IDS["fnan"], 16) == 5
    g.bind(h, g.create(E.F32, 16))
    assert g.dispatch(IDS["fnan"], 0) == 0 and str(cpu.buffer_snapshot().last_dispatch.outcome) == "NOOP"


def test_versions_and_the_default_keep_the_reference(hosts):
    ref, cpu = hosts
    for host, want in ((ref, (1, 1)), (cpu, (0, 2))):
        g = Guest(host, kernels=WAT_KERNELS, extra=EXTRA)
        src, dst = g.create(E.F32, 8), g.create(E.F32, 8)
        g.bind(src, dst)
        assert (g.dispatch(IDS["fnan"], 8), g.version(dst)) == want


@pytest.mark.parametrize("field, value", [("cpu_kernels", 1), ("cpu_threads", -1), ("cpu_threads", True),
                                          ("cpu_threads", 100000), ("placement", "fastest")])
def test_bad_cpu_kernel_fields_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        Config(disabled=True, **{field: value})


@pytest.mark.parametrize("schedule", list(Schedule))
@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_every_thread_count_gives_the_runners_bits(hosts, threads, schedule, monkeypatch):
    monkeypatch.setattr(cputhreads, "SCHEDULE", schedule)
    ref, _ = hosts
    n = 100_000  # several pieces of cputhreads.MIN_PIECE, many chunks of the queue
    x64 = np.random.default_rng(5).integers(0, 2 ** 63, n, dtype=np.uint64)
    x32 = np.tile(floats32(), n // 1000)
    late, early = np.arange(1, n + 1, dtype=np.int32), np.arange(1, n + 1, dtype=np.int32)
    late[n - 7] = 0  # a trap in the last piece
    early[5] = 0  # a trap in the first chunk, while the other threads still take theirs
    with Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True, cpu_threads=threads)) as host:
        for name, inputs, expect in (("hash", [x64], "CPU"), ("fnan", [x32, np.zeros(n, np.float32)], "CPU"),
                                     ("divide", [late], "KERNEL_TRAP"), ("hash", [x64[::-1].copy()], "CPU"),
                                     ("divide", [early], "KERNEL_TRAP"), ("divide", [np.arange(n, 0, -1, dtype=np.int32)], "CPU")):
            same_as_runner((ref, host), name, inputs, expect)
        assert (host.context.cpu_pool is not None) == (threads > 1)  # the range was split across threads


def test_pool_threads_wait_in_wasm_for_the_next_dispatch_of_their_kernel(monkeypatch):
    n = 3 * cputhreads.MIN_PIECE + 5  # three threads' worth: two of the pool's
    x = np.random.default_rng(2).integers(0, 2 ** 63, n, dtype=np.uint64)
    y = np.random.default_rng(3).uniform(-4, 4, n).astype(np.float32)
    with Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True, cpu_threads=8)) as host:
        g = Guest(host, kernels=WAT_KERNELS, extra=EXTRA)
        h, a, b = g.create(E.U64, n), g.create(E.F32, n), g.create(E.F32, n)
        g.inst.write_buffer(h, x)
        g.inst.write_buffer(a, y)

        def started(kernel: str, *handles: int) -> int:
            """The pool threads this dispatch had to start (the rest were waiting for it in Wasm)."""
            g.bind(*handles)
            trace = cputhreads.Trace()
            monkeypatch.setattr(cputhreads, "TRACE", trace)
            assert g.dispatch(IDS[kernel], n) == 0
            monkeypatch.setattr(cputhreads, "TRACE", None)
            (count,) = [elements for event, _w, _ns, elements in trace.events if event == "launched"]
            return count

        assert [started("hash", h), started("hash", h), started("fnan", a, b), started("fnan", a, b),
                started("hash", h)] == [2, 0, 2, 0, 2]  # another kernel's dispatch recalls them
        z = x
        for _ in range(3):
            z = z * np.uint64(0x9E3779B97F4A7C15)
            z = z ^ (z >> np.uint64(29))
        assert np.array_equal(g.inst.read_buffer(h), z)  # three runs in place, every element once each
        ref = Host(Config(kernels=CONFIGS, disabled=True))
        try:
            want = run(ref, "fnan", [y, np.zeros(n, np.float32)])[2][1]
        finally:
            ref.close()
        assert g.inst.read_buffer(b).tobytes() == want


@pytest.mark.parametrize("limit", [{"call_timeout": 30.0}, {"fuel": 10 ** 12}])
def test_threads_under_a_call_limit_give_the_runners_bits(hosts, limit):
    """A limit arms every store per run, so each pool thread serves one dispatch and returns."""
    ref, _ = hosts
    n = 100_000
    x64 = np.random.default_rng(6).integers(0, 2 ** 63, n, dtype=np.uint64)
    bad = np.arange(1, n + 1, dtype=np.int32)
    bad[n // 2] = 0
    with Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True, cpu_threads=4, **limit)) as host:
        for name, inputs, expect in (("hash", [x64], "CPU"), ("hash", [x64[::-1].copy()], "CPU"),
                                     ("divide", [bad], "KERNEL_TRAP"), ("hash", [x64], "CPU")):
            same_as_runner((ref, host), name, inputs, expect)


def test_json_config_and_cli_surface(capsys):
    from wagogpu.cli import main
    from wagogpu.config import config_from_json

    cfg = config_from_json({"disabled": True, "cpu_kernels": True, "cpu_threads": 3, "placement": "measured"})
    assert (cfg.cpu_kernels, cfg.cpu_threads, cfg.placement) == (True, 3, "measured")
    with pytest.raises(ConfigError, match="placement"):
        config_from_json({"disabled": True, "placement": 3})
    assert main(["demo", "--cpu", "--cpu-kernels"]) == 0
    out = capsys.readouterr().out
    assert "mode: CPU kernels on" in out and "CPU kernel (compiled Wasm)" in out and "8 as CPU kernels" in out
    assert main(["info"]) == 0
    assert "CPU threads: " in capsys.readouterr().out


def squares_below(x: np.ndarray) -> np.ndarray:
    """The `loop` kernel's answer: the sum of j * j for j below each element."""
    x = x.astype(np.int64)
    return ((x - 1) * x * (2 * x - 1) // 6).astype(np.int32)


def test_the_kernel_table_follows_rebinds_frees_other_kernels_and_traps(hosts):
    """The accessor memory's kernel table is rewritten only when the kernel or its binding set
    changed (cpukernels.CpuKernelRunner._table_for): every answer stays the right buffers' after a
    rebind, another kernel's dispatch, a trap and a free followed by a buffer of another length."""
    _ref, cpu = hosts
    g = Guest(cpu, kernels=WAT_KERNELS, extra=EXTRA)
    x = np.arange(2, 66, dtype=np.int32)
    a, b = g.create(E.I32, 64), g.create(E.I32, 64)
    g.inst.write_buffer(a, x)
    g.bind(a, b)
    assert g.dispatch(IDS["loop"], 64) == 0 and np.array_equal(g.inst.read_buffer(b), squares_below(x))
    g.bind(b, a)  # swapped: the table must follow
    assert g.dispatch(IDS["loop"], 64) == 0
    assert np.array_equal(g.inst.read_buffer(a), squares_below(squares_below(x)))
    g.inst.write_buffer(a, x)
    g.bind(a)  # divide's slot 0: a (the table rewritten for another kernel)
    assert g.dispatch(IDS["divide"], 64) == 0 and np.array_equal(g.inst.read_buffer(a), 1000000 // x)
    g.bind(b, a)
    assert g.dispatch(IDS["loop"], 10) == 0
    assert np.array_equal(g.inst.read_buffer(a)[:10], squares_below(squares_below(x)[:10]))
    zeros = np.zeros(64, np.int32)
    g.inst.write_buffer(b, zeros)
    g.bind(b)
    assert g.dispatch(IDS["divide"], 64) == 1 and str(g.last.reason_code) == "KERNEL_TRAP"
    assert np.array_equal(g.inst.read_buffer(b), zeros)
    g.inst.write_buffer(a, x)
    g.bind(a, b)
    assert g.dispatch(IDS["loop"], 64) == 0  # after the trap, the same kernel and set as before it
    assert np.array_equal(g.inst.read_buffer(b), squares_below(x))
    assert g.inst.call("freeBuffer", a) == 0
    c = g.create(E.I32, 32)
    g.inst.write_buffer(c, x[:32])
    g.bind(c, b)
    assert g.dispatch(IDS["loop"], 32) == 0
    assert np.array_equal(g.inst.read_buffer(b)[:32], squares_below(x[:32]))
    assert g.dispatch(IDS["loop"], 33) != 0  # c holds 32 elements: the new set's own length counts


def _uleb_at(data: bytes, pos: int) -> tuple[int, int]:
    """The LEB128 u32 at data[pos] and the position after it (the package's own reader)."""
    r = Reader(data, pos)
    return r.u32(), r.pos


def _padded(value: int) -> bytes:
    """`value` (< 2**21) as a 3-byte LEB128, as some toolchains write counts they patch later."""
    return bytes([value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14])


def padded_local_counts(wasm: bytes) -> bytes:
    """The module with every function's local-group count, and each group's count, padded."""
    out, pos = bytearray(wasm[:8]), 8
    while pos < len(wasm):
        section = wasm[pos]
        size, start = _uleb_at(wasm, pos + 1)
        payload = wasm[start:start + size]
        if section == 10:  # code: each body's local groups written again, padded
            count, p = _uleb_at(payload, 0)
            bodies = bytearray(_padded(count))
            for _ in range(count):
                body_size, body_start = _uleb_at(payload, p)
                groups, q = _uleb_at(payload, body_start)
                entry = bytearray(_padded(groups))
                for _ in range(groups):
                    n, q = _uleb_at(payload, q)
                    entry += _padded(n) + payload[q:q + 1]
                    q += 1
                entry += payload[q:body_start + body_size]
                bodies += _padded(len(entry)) + entry
                p = body_start + body_size
            payload = bytes(bodies)
        out += bytes([section]) + _padded(len(payload)) + payload
        pos = start + size
    return bytes(out)


@pytest.mark.parametrize("name", ["hash", "loop"])
def test_padded_leb128_local_counts_still_build_a_cpu_kernel(hosts, name):
    """A kernel whose body writes its local-group counts in padded LEB128 (valid Wasm) gets its CPU
    kernel as a minimal encoding would: the groups are encoded again, not copied with a guessed width."""
    ref, cpu = hosts
    wasm = wasmtime.wat2wasm(abi_module(kernels=WAT_KERNELS, extra=EXTRA))
    padded = padded_local_counts(wasm)
    assert padded != wasm and wasmtime.Module.validate(wasmtime.Engine(), padded) is None
    n = 257
    data = np.arange(n, dtype=DTYPES[KERNELS[name][0][0][1]]) * 3 + 1
    results = []
    for host, module in ((ref, wasm), (cpu, padded)):
        inst = host.instantiate(host.compile(module))
        handles = []
        for slot, (_, etype, _) in enumerate(KERNELS[name][0]):
            status, handle = unpack_result(inst.call("createBufferPacked", etype, n))
            assert status == 0 and inst.call("bindBuffer", slot, handle) == 0
            inst.write_buffer(handle, data.astype(DTYPES[etype]))
            handles.append(handle)
        status = inst.call("dispatch", IDS[name], n)
        last = host.buffer_snapshot().last_dispatch
        if status == 1:
            inst.call(f"wago_gpu.cpu.{name}", n)
        results.append((status, str(last.outcome), [inst.read_buffer(h).tobytes() for h in handles]))
    (want_status, _, want), (status, outcome, got) = results
    assert want_status == 1 and (status, outcome) == (0, "CPU")
    assert got == want


@pytest.mark.parametrize("profile", [False, True])
def test_a_cpu_kernels_compute_time_is_kept_only_in_profile_mode(profile):
    """The CPU kernel times its run into the record's compute stage; without profile mode the
    record closes with every stage at 0.0 and profile_valid False, as any other record."""
    host = Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True, profile_stages=profile))
    try:
        status, last, _, _ = run(host, "loop", [np.arange(64, dtype=np.int32), np.zeros(64, np.int32)])
        assert (status, str(last.outcome)) == (0, "CPU"), last.reason
        assert last.profile_valid is profile
        assert (last.compute > 0) is profile
    finally:
        host.close()
