import numpy as np
from bench.buffer_bench import kernel_configs
from bench.work_guest import wat, input_values, KERNEL_IDS
from wagogpu import Config, Host
host = Host(Config(kernels=kernel_configs(), allow_software_adapter=True))
inst = host.instantiate(host.compile(wat()))
n = 10_000_000
inst.call("grow_to", 12 * n // 65536 + 2)
inst.memory_view().view(np.float32)[:n] = input_values(n)
assert inst.call("setup", n) == 0
ib = inst._buffers if hasattr(inst, "_buffers") else inst.buffers
for i in range(4):
    inst.call("sample", KERNEL_IDS["twice"], n)
    d = ib.device
    print("staging allocs", d.staging_allocations, "reserved", ib.reserved, "peak", ib.peak, "idle", len(d.idle_outputs), "allocs", host.device.stats.allocations_total)
