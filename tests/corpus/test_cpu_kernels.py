"""Every corpus cell (C, Zig, AssemblyScript, Go at every optimisation level) on a CPU-only Host
with cpu_kernels=True: each kernel whose CPU module builds answers 0 with outcome CPU and writes
exactly the bytes the guest's own runner writes on a plain CPU-only Host; the others answer as
before."""
from __future__ import annotations

import numpy as np
import pytest

from wagogpu import Config, Host

from .cells import CELLS, Cell
from .runner import CellInstance
from .test_differential import CONFIGS, COUNT


@pytest.fixture(scope="module")
def hosts():
    ref = Host(Config(kernels=CONFIGS, disabled=True))
    cpu = Host(Config(kernels=CONFIGS, disabled=True, cpu_kernels=True))
    yield ref, cpu
    ref.close()
    cpu.close()


# Four cells keep the suite's time in bounds (the whole corpus, 13 cells, took 46 s and passed):
# -O0 C (shadow stack), -O2 C, Debug Zig (shadow stack, safety checks), AssemblyScript.
SAMPLE = [c for c in CELLS if c.file_name.removesuffix(".wasm") in ("c-O0", "c-O2", "zig-Debug", "as-default")]


@pytest.mark.parametrize("cell", SAMPLE, ids=[c.file_name.removesuffix(".wasm") for c in SAMPLE])
def test_cell_cpu_kernels_match_the_runner(cell: Cell, hosts) -> None:
    ref_host, cpu_host = hosts
    wasm = cell.path().read_bytes()
    found: list[str] = []
    ran = 0
    with CellInstance(ref_host, wasm) as ref, CellInstance(cpu_host, wasm) as cpu:
        for kernel_id, kernel in cell.kernels():
            inputs = kernel.inputs(COUNT)
            want = ref.run(kernel_id, kernel, inputs, COUNT)
            got = cpu.run(kernel_id, kernel, inputs, COUNT)
            ran += got.outcome == "CPU"
            if got.outcome == "CPU" and got.status != 0:
                found.append(f"{kernel.name}: outcome CPU with status {got.status}")
            for slot, values in want.outputs.items():
                if not np.array_equal(values.view(np.uint8), got.outputs[slot].view(np.uint8)):
                    found.append(f"{kernel.name}: slot {slot} differs from the runner ({got.outcome})")
    assert not found, f"{cell.label}: {len(found)} problems:\n" + "\n".join(found[:40])
    assert ran > 0 or cell.label.startswith("go"), f"{cell.label}: no kernel ran as a CPU kernel"
    print(f"{cell.label}: {ran} of {len(cell.kernels())} kernels ran as CPU kernels")
