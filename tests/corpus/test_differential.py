"""Every corpus cell end to end through wagogpu Hosts: each kernel runs CPU-only (a disabled Host)
and must give the numpy answer of table.py; each GPU-eligible kernel also runs on the GPU path
(lavapipe here, allow_software_adapter) and must report outcome GPU with status 0 and give the
CPU path's answer: integers bit-exact, floats within relaxed_float's bound (kernels.RELAXED_REL,
16 f32 ulps of max(|cpu|, the kernel's scale)). WAGO_GPU_TEST=1 requires a hardware adapter."""
from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

from wagogpu import CompileError, Config, Host, Status, compile_buffer_wgsl

from .cells import CELLS, Cell
from .kernels import Arrays, Bound, Kernel
from .runner import UNWRITTEN, CellInstance, Run, expected, gpu_bound, mismatches
from .table import KERNELS

COUNT = 300  # two workgroups of 256, the second one partly idle
HARDWARE_REQUIRED = os.environ.get("WAGO_GPU_TEST") == "1"
CONFIGS = tuple(k.config(i) for i, k in enumerate(KERNELS, start=1))


@pytest.fixture(scope="module")
def gpu_host() -> Iterator[Host]:
    host = Host(Config(kernels=CONFIGS, allow_software_adapter=not HARDWARE_REQUIRED, require_gpu=HARDWARE_REQUIRED))
    yield host
    host.close()


@pytest.fixture(scope="module")
def cpu_host() -> Iterator[Host]:
    host = Host(Config(kernels=CONFIGS, disabled=True))
    yield host
    host.close()


def eligible(wasm: bytes, kernel_id: int, kernel: Kernel) -> bool:
    try:
        compile_buffer_wgsl(wasm, kernel.config(kernel_id))
    except CompileError:
        return False
    return True


def problems(name: str, run: Run, want: dict[int, np.ndarray], bound: Bound) -> list[str]:
    """What is wrong with a run's written slots against `want` (the numpy answer or the CPU run's)."""
    return [f"{name} slot {slot}: {m}" for slot, values in want.items()
            for m in mismatches(run.outputs[slot], values, bound)]


def check_cpu(cpu: CellInstance, kernel_id: int, kernel: Kernel, inputs: Arrays) -> tuple[Run, list[str]]:
    """The CPU-only run: dispatch answers 1, the guest's CPU runner gives the numpy answer."""
    run = cpu.run(kernel_id, kernel, inputs, COUNT)
    if (run.status, run.outcome) != (Status.CPU_FALLBACK, "CPU_FALLBACK_READY"):
        return run, [f"{kernel.name}: CPU-only run gave status {run.status}, outcome {run.outcome}"]
    return run, problems(kernel.name, run, expected(kernel, inputs), kernel.reference_bound)


def check_gpu(gpu: CellInstance, kernel_id: int, kernel: Kernel, inputs: Arrays, cpu_run: Run) -> list[str]:
    """The GPU run of an eligible kernel: outcome GPU, status 0, the CPU run's answer."""
    run = gpu.run(kernel_id, kernel, inputs, COUNT)
    if (run.status, run.outcome) != (Status.OK, "GPU"):
        reason = gpu.host.buffer_snapshot().last_dispatch.reason
        return [f"{kernel.name}: eligible but the dispatch gave status {run.status}, outcome {run.outcome} ({reason})"]
    want = cpu_run.outputs
    if not HARDWARE_REQUIRED and kernel.is_float:
        # lavapipe's shader compiler folds 0 / x and x * 0 to zero (docs/gpu.md, "What has been
        # measured"), so where a float input is NaN or infinite its answer may be finite: those
        # elements are excused on the software adapter, and only there.
        special = np.zeros(COUNT, dtype=bool)
        for values in inputs.values():
            if values.dtype.kind == "f":
                special |= ~np.isfinite(values[:COUNT].astype(np.float64))
        want = {slot: np.where(special[:len(v)], run.outputs[slot][:len(v)], v) for slot, v in want.items()}
    return problems(kernel.name, run, want, gpu_bound(kernel))


@pytest.mark.gpu
@pytest.mark.parametrize("cell", CELLS, ids=[c.file_name.removesuffix(".wasm") for c in CELLS])
def test_cell_cpu_matches_numpy_and_gpu_matches_cpu(cell: Cell, gpu_host: Host, cpu_host: Host) -> None:
    wasm = cell.path().read_bytes()
    found: list[str] = []
    on_gpu = 0
    with CellInstance(cpu_host, wasm) as cpu, CellInstance(gpu_host, wasm) as gpu:
        for kernel_id, kernel in cell.kernels():
            inputs = kernel.inputs(COUNT)
            cpu_run, wrong = check_cpu(cpu, kernel_id, kernel, inputs)
            found += wrong
            if eligible(wasm, kernel_id, kernel):
                on_gpu += 1
                found += check_gpu(gpu, kernel_id, kernel, inputs, cpu_run)
    assert not found, f"{cell.label}: {len(found)} problems:\n" + "\n".join(found[:40])
    print(f"{cell.label}: {len(cell.kernels())} kernels right on the CPU, {on_gpu} on the GPU as well")


def test_write_only_slots_start_unwritten_so_a_skipped_element_shows() -> None:
    """The staged contents of a write-only slot are a sentinel no kernel writes everywhere: if a
    path skipped elements, the comparison would see the sentinel, not a stale right answer."""
    for kernel in KERNELS:
        want = expected(kernel, kernel.inputs(COUNT))
        for slot, values in want.items():
            if any(s.slot == slot and s.domain is None for s in kernel.slots):
                sentinel = np.frombuffer(bytes([UNWRITTEN]) * values.nbytes, dtype=values.dtype)
                assert not np.array_equal(values, sentinel), kernel.name
