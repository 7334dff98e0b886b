"""wagogpu.ray: the HostPool on a local Ray cluster (one cluster for the module, ray.init(num_cpus=2)).

Results are checked against a plain Host; errors must cross Ray as JobError with the trap text or
the status name; a real GPU quarantine (lavapipe, a run_timeout the long kernel cannot meet) must
replace the actor's Host and rerun the job; a killed actor process must be restarted with its jobs
rerun; close() must end the actor processes.
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", exc_type=ImportError)

from examples.ray_pool.tiles import COUNTS_OFFSET, GUEST, TILE_KERNEL, Tile, cut, paste, render_plain, tile_job  # noqa: E402
from wagogpu import Config, Host, Status  # noqa: E402
from wagogpu.ray import ActorSlot, FailureKind, HostPool, JobError, wasm_trap_handlers
from wagogpu.ray.actor import JobRunner
from wagogpu.ray.jobs import WireJob
from wagogpu.ray.pool import Placement, plan_placement
from wagogpu.ray.safety import import_modules, retry_safe, wasm_bytes

from ..gpu_support import HARDWARE_REQUIRED

ROOT = Path(__file__).resolve().parents[2]
TILES = GUEST.read_text()
CPU = Config(kernels=[TILE_KERNEL], disabled=True)
GPU = dict(kernels=[TILE_KERNEL], allow_software_adapter=not HARDWARE_REQUIRED, require_gpu=HARDWARE_REQUIRED)
# Many invocations of short loops: it outlasts a 20 ms run_timeout on lavapipe, while each loop stays
# within the adapter's measured loop budget (a kernel of 60,000 passes would fall back instead). An
# H200 renders that tile well inside 20 ms, so on hardware (no loop cut, a budget of 2^20 passes) the
# tile's pixels loop up to 1,000,000 times: about 30 ms of device time.
LONG_TILE = (0, 0, 300, 300, 300, 300, 1_000_000 if HARDWARE_REQUIRED else 4000)
PROBES = """(module
  (import "wago_gpu_v1" "readBufferU32" (func $rd (param i32 i32) (result i32)))
  (memory 1)
  (func (export "boom") unreachable)
  (func (export "bad_handle") (result i32) (call $rd (i32.const 999) (i32.const 0)))
  (func (export "returns") (param i32) (result i32) (local.get 0))
  (func (export "sum") (param $p i32) (param $n i32) (result i32) (local $s i32)
    (block $d (loop $l (br_if $d (i32.eqz (local.get $n)))
      (local.set $s (i32.add (local.get $s) (i32.load (local.get $p))))
      (local.set $p (i32.add (local.get $p) (i32.const 4)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br $l)))
    (local.get $s))
  (func (export "fill") (param $p i32) (param $n i32) (param $v i32)
    (block $d (loop $l (br_if $d (i32.eqz (local.get $n)))
      (i32.store (local.get $p) (local.get $v))
      (local.set $p (i32.add (local.get $p) (i32.const 4)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br $l)))))"""

SPIN = '(module (func (export "spin") (loop $l (br $l))))'


@pytest.fixture(scope="module")
def cluster():
    started = not ray.is_initialized()
    if started:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report from a test cluster
        with wasm_trap_handlers():  # later tests in this process still trap as Wasm does
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=128 << 20)
    yield
    if started:
        with wasm_trap_handlers():
            ray.shutdown()


@pytest.fixture(scope="module")
def pool(cluster):
    with HostPool(CPU, actors=2, num_cpus=0.5, max_in_flight=2) as p:
        yield p


def plain_counts(config: Config, args: tuple[int, ...]) -> bytes:
    with Host(config) as host, host.instantiate(host.compile(TILES)) as inst:
        assert inst.call("render_tile", *args) == 0
        return inst.read_memory(COUNTS_OFFSET, 4 * args[2] * args[3])


def wait_gone(pids: list[int], seconds: float = 20.0) -> list[int]:
    """The pids still alive after waiting up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.1)
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- the optional extra -------------------------------------------------------------------------------
def test_import_wagogpu_loads_no_ray():
    code = "import sys, wagogpu; sys.exit(1 if 'ray' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_wagogpu_ray_without_ray_names_the_install_line():
    code = "import sys; sys.modules['ray'] = None\ntry:\n import wagogpu.ray\nexcept ImportError as e: print(e)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True).stdout
    assert 'pip install "wagogpu[ray]"' in out


# -- what a pool decides before it runs anything -----------------------------------------------------
def test_only_modules_limited_to_the_abi_are_retry_safe():
    assert retry_safe(TILES) and retry_safe(PROBES) and retry_safe("(module)")
    assert import_modules(wasm_bytes(TILES)) == {"wago_gpu_v1"}
    wasi = '(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32))))'
    assert not retry_safe(wasi)
    every_kind = """(module
      (import "wago_gpu_v1" "getBuffer" (func (param i32) (result i32)))
      (import "env" "t" (table 1 2 funcref))
      (import "env" "r" (table 1 (ref null func)))
      (import "env" "m" (memory i64 1 4))
      (import "env" "g" (global (mut i32)))
      (import "env" "e" (tag (param i32))))"""
    assert import_modules(wasm_bytes(every_kind)) == {"wago_gpu_v1", "env"}
    assert import_modules(wasm_bytes(TILES)[:40]) is None  # truncated inside the import section
    assert not retry_safe(b"\0asm\x0d\0\x01\0") and not retry_safe("(module (func")


@pytest.mark.parametrize("resources, actors, num_cpus, expected", [
    ({"CPU": 2.0}, None, None, Placement(2, 1.0, 0.0)),
    ({"CPU": 2.0}, 4, 0.5, Placement(4, 0.5, 0.0)),
    ({"CPU": 2.0}, 4, None, Placement(4, 0.5, 0.0)),
    ({"CPU": 16.0, "GPU": 2.0}, None, None, Placement(2, 1.0, 1.0)),
    ({"CPU": 16.0, "GPU": 2.0}, 4, None, Placement(4, 1.0, 0.5)),
])
def test_placement_is_one_actor_per_gpu_else_per_cpu(resources, actors, num_cpus, expected):
    assert plan_placement(resources, actors, num_cpus) == expected


def test_a_placement_the_cluster_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="4 actors x 1 CPU exceed the cluster's 2 CPUs"):
        plan_placement({"CPU": 2.0}, 4, 1.0)
    with pytest.raises(ValueError, match="actors: expected a positive integer"):
        plan_placement({"CPU": 2.0}, 0, None)


# -- results ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiles_equal_a_plain_host_and_the_zig_guest(pool):
    width, height, iterations = 96, 64, 50
    tiles = cut(width, height, 32)
    results = list(pool.map(tile_job(TILES, t, width, height, iterations) for t in tiles))
    image = np.zeros((height, width), dtype=np.uint32)
    for t, r in zip(tiles, results):
        assert r.value == 0 and r.reads["gpu"] == b"\0"
        paste(image, t, r.reads["counts"])
    with Host(CPU) as host:
        plain, _ = render_plain(host, TILES, tiles, width, height, iterations)
    assert np.array_equal(image, plain)
    assert {r.actor for r in results} == {0, 1}
    from examples.mandelbrot.__main__ import MANDEL, STEP, GUEST as ZIG  # render_direct: plain Wasm loops
    with Host(Config(kernels=[STEP, MANDEL], disabled=True)) as host, host.instantiate(host.compile(ZIG.read_bytes())) as inst:
        assert inst.call("render_direct", width, height, iterations) == 0
        zig = np.frombuffer(inst.read_memory(inst.call("counts_ptr"), 4 * width * height), "<u4")
    assert np.array_equal(image.ravel(), zig)


def test_submit_returns_an_object_ref_to_value_and_reads(pool):
    args = (8, 8, 16, 8, 64, 64, 40)
    ref = pool.submit(TILES, "render_tile", *args, reads={"counts": (COUNTS_OFFSET, 4 * 16 * 8)})
    assert isinstance(ref, ray.ObjectRef)
    result = ray.get(ref)
    assert result.value == 0 and result.reads == {"counts": plain_counts(CPU, args)}


def test_writes_land_before_the_call_and_reads_see_the_guest(pool):
    data = np.arange(1, 101, dtype="<u4")
    result = ray.get(pool.submit(PROBES, "sum", 64, 100, writes={64: data.tobytes()}))
    assert result.value == int(data.sum())
    filled = ray.get(pool.submit(PROBES, "fill", 256, 3, 0xABCD, reads={"a": (256, 12), "b": (252, 4)}))
    assert filled.value is None
    assert filled.reads == {"a": (0xABCD).to_bytes(4, "little") * 3, "b": bytes(4)}


def test_map_keeps_submission_order(pool):
    # heavy jobs first, so the light ones behind them finish earlier on the other actor
    iterations = [60000, 5, 5, 5, 30000, 5, 5, 1]
    args = [(150, 130, 16, 16, 300, 300, it) for it in iterations]
    jobs = [tile_job(TILES, Tile(*a[:4]), 300, 300, a[6]) for a in args]
    results = list(pool.map(jobs))
    expected = [plain_counts(CPU, a) for a in args]
    assert [r.reads["counts"] for r in results] == expected
    assert len({r.actor for r in results}) == 2


def test_each_actor_compiles_a_module_once(pool):
    before = sum(a.compiles for a in pool.actors())
    source = PROBES + " "  # new content: a module neither actor has seen
    refs = [pool.submit(bytes(source, "utf-8"), "returns", i) for i in range(8)]  # equal bytes, new objects
    assert [r.value for r in ray.get(refs)] == list(range(8))
    assert sum(a.compiles for a in pool.actors()) - before <= 2


def test_back_pressure_bounds_jobs_in_flight(pool):
    refs = []
    for i in range(10):
        refs.append(pool.submit(TILES, "render_tile", 150, 130, 16, 16, 300, 300, 60000 + i))
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        assert len(waiting) <= 2 * 2  # actors x max_in_flight
    assert [r.value for r in ray.get(refs)] == [0] * 10


# -- errors -------------------------------------------------------------------------------------------
def test_a_trap_comes_back_with_wasmtimes_message(pool):
    with pytest.raises(JobError) as caught:
        ray.get(pool.submit(PROBES, "boom"))
    err = caught.value
    assert err.kind is FailureKind.TRAP and err.status is None
    assert err.message == "boom: trap: wasm trap: wasm `unreachable` instruction executed"
    assert "wasm backtrace" in err.trap


def test_a_status_trap_and_a_returned_status_are_named(pool):
    with pytest.raises(JobError) as caught:
        ray.get(pool.submit(PROBES, "bad_handle"))
    assert caught.value.kind is FailureKind.TRAP and caught.value.status is Status.INVALID_HANDLE
    assert "status 2 (INVALID_HANDLE)" in caught.value.message
    with pytest.raises(JobError) as caught:
        ray.get(pool.submit(PROBES, "returns", 7, check_status=True))
    assert caught.value.kind is FailureKind.STATUS and caught.value.status is Status.DEVICE_ERROR
    assert caught.value.message == "returns returned status 7 (DEVICE_ERROR)"
    assert ray.get(pool.submit(PROBES, "returns", 7)).value == 7  # without check_status a value is a value


def test_usage_and_module_errors_say_what_is_wrong(pool):
    cases = [(PROBES, "nope", (), {}, FailureKind.USAGE, "nope: no exported function 'nope'"),
             (PROBES, "sum", (0, 1), {70000: b"x"}, FailureKind.USAGE, "sum: range [70000, 70001) outside memory 0"),
             (PROBES, "sum", (1,), {}, FailureKind.USAGE, "sum: expected 2 arguments, got 1"),
             (b"\0asm\x01\0\0\0junk", "f", (), {}, FailureKind.MODULE, "invalid module")]
    for wasm, export, args, writes, kind, text in cases:
        with pytest.raises(JobError) as caught:
            ray.get(pool.submit(wasm, export, *args, writes=writes))
        assert caught.value.kind is kind and text in caught.value.message
    with pytest.raises(TypeError, match="writes"):
        pool.submit(PROBES, "sum", writes={0: "text"})
    with pytest.raises(ValueError, match=r"reads\['a'\]"):
        pool.submit(PROBES, "sum", reads={"a": (0, -1)})


def test_a_job_past_call_timeout_is_a_limit_error_and_the_job_behind_it_runs(cluster):
    """One actor: the looping job is stopped at call_timeout, the job queued behind it on the same
    actor then runs on the same Host."""
    with HostPool(Config(disabled=True, call_timeout=0.3), actors=1, num_cpus=0.5, max_in_flight=2) as limited:
        looping, behind = limited.submit(SPIN, "spin"), limited.submit(PROBES, "returns", 5)
        with pytest.raises(JobError) as caught:
            ray.get(looping)
        assert ray.get(behind).value == 5
        info = limited.actors()[0]
    assert caught.value.kind is FailureKind.LIMIT
    assert caught.value.message == "spin: call_timeout: spin ran past its 0.3 s deadline (wasm trap: interrupt)"
    assert (info.hosts_opened, info.jobs) == (1, 2)


def test_a_job_out_of_fuel_is_a_limit_error_in_process():
    runner = JobRunner(Config(disabled=True, fuel=10_000))
    try:
        with pytest.raises(JobError) as caught:
            runner.run(WireJob("spin", (SPIN,), "spin", (), (), None, False, True))
        assert caught.value.kind is FailureKind.LIMIT and "used up its 10000 units of fuel" in caught.value.message
        assert runner.run(WireJob("probes", (PROBES,), "returns", (3,), (), None, False, True)).value == 3
    finally:
        runner.shutdown()


# -- quarantine and dead actors -----------------------------------------------------------------------
def quarantine_first_two(slot: ActorSlot) -> Config:
    """The first two Hosts of an actor get a deadline the long tile cannot meet, later ones a normal one."""
    return Config(**GPU, run_timeout=0.02 if slot.hosts_opened < 2 else 5.0)


@pytest.mark.slow
def test_a_quarantined_host_is_replaced_and_the_job_rerun(cluster):
    with HostPool(quarantine_first_two, actors=1, num_cpus=0.5, retries=2) as gpu_pool:
        assert gpu_pool.actors()[0].state == "READY"
        result = ray.get(gpu_pool.submit(TILES, "render_tile", *LONG_TILE, check_status=True,
                                         reads=functools.partial(read_counts, LONG_TILE[2] * LONG_TILE[3])))
        info = gpu_pool.actors()[0]
    # Against a plain Host on the same adapter: relaxed_float lets boundary pixels' counts differ
    # from the CPU's, but not between two runs of one kernel on one adapter.
    assert result.value == 0 and result.reads["counts"] == plain_counts(Config(**GPU), LONG_TILE)
    assert (info.hosts_opened, info.state, info.jobs) == (3, "READY", 3)
    assert "timeout" in info.last_quarantine


def read_counts(pixels: int, inst) -> dict[str, bytes]:
    return {"counts": inst.read_memory(COUNTS_OFFSET, 4 * pixels)}


def test_a_quarantine_fails_the_job_when_no_attempt_is_left():
    runner = JobRunner(Config(**GPU, run_timeout=0.02), retries=1)  # in-process: every Host misses the deadline
    try:
        for safe, hosts, says in ((False, 2, "not retried"), (True, 4, "every one of 2 attempts")):
            job = WireJob("long", (TILES,), "render_tile", LONG_TILE, (), None, True, safe)
            with pytest.raises(JobError) as caught:
                runner.run(job)
            assert caught.value.kind is FailureKind.QUARANTINED
            assert "the last attempt render_tile returned status 9 (CANCELLED)" in caught.value.message
            assert says in caught.value.message and "timeout" in caught.value.message
            assert runner.info().hosts_opened == hosts and runner.info().state == "READY"
    finally:
        runner.shutdown()


@pytest.mark.slow
def test_a_killed_actor_is_restarted_and_its_jobs_rerun(pool):
    before = {a.index: a.pid for a in pool.actors()}
    args = [(150, 130, 32, 32, 300, 300, 60000 + i) for i in range(4)]  # about 0.3 s each
    refs = [pool.submit(TILES, "render_tile", *a, reads={"c": (COUNTS_OFFSET, 4 * 1024)}) for a in args]
    os.kill(before[0], signal.SIGKILL)
    results = ray.get(refs)
    assert [r.reads["c"] for r in results] == [plain_counts(CPU, a) for a in args]
    after = {a.index: a.pid for a in pool.actors()}
    assert after[0] != before[0] and after[1] == before[1]


def test_the_example_renders_the_plain_hosts_image(cluster, capsys):
    from examples.ray_pool.__main__ import main

    assert main(["--cpu", "--width", "160", "--height", "90", "--iterations", "64", "--tile", "48",
                 "--actors", "2", "--num-cpus", "0.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "verified: the pool's image equals the plain Host's"
    assert "pool vs plain Host: 0 of 14400 pixels differ" in out and len([l for l in out if l.startswith("actor ")]) == 2


def test_close_ends_every_actor_process(cluster):
    small = HostPool(CPU, actors=1, num_cpus=0.5)
    pids = [a.pid for a in small.actors()]
    assert ray.get(small.submit(PROBES, "returns", 5)).value == 5
    small.close()
    small.close()  # idempotent
    assert wait_gone(pids) == []
    with pytest.raises(RuntimeError, match="closed"):
        small.submit(PROBES, "returns", 1)


DRIVER_TRAPS = """
import wasmtime
from wagogpu import Config, Host
from wagogpu.ray import HostPool

host = Host(Config(disabled=True, kernel_export="unused"))
module = host.compile('(module (func (export "t") unreachable))')

def trap(when):
    try:
        host.instantiate(module).call("t")
    except wasmtime.Trap as exc:
        print(when, "unreachable" in str(exc), flush=True)

trap("before")
pool = HostPool(Config(disabled=True, kernel_export="unused"), actors=1, num_cpus=0.5)
trap("during")
pool.close()
trap("after")
"""


@pytest.mark.slow
def test_guests_in_the_driver_still_trap_while_and_after_the_pool_runs_ray():
    """Ray's driver takes (at ray.init) and resets (at ray.shutdown) the signals wasmtime's traps
    arrive on; without wasm_trap_handlers a trapping guest call kills the driver (exit 132)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    done = subprocess.run([sys.executable, "-c", DRIVER_TRAPS], capture_output=True, text=True,
                          timeout=180, env=env, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["before", "True", "during", "True", "after", "True"]


def test_a_v128_export_is_refused_and_the_actor_carries_on(pool):
    """A v128 parameter or result aborted the actor's process (a panic in the runtime), job after job."""
    v128 = '(module (func (export "f") (result v128) (v128.const i32x4 1 2 3 4)))'
    with pytest.raises(JobError) as caught:
        ray.get(pool.submit(v128, "f"))
    assert caught.value.kind is FailureKind.USAGE and "v128 result 1 cannot cross to Python" in caught.value.message
    assert ray.get(pool.submit(PROBES, "returns", 5)).value == 5
