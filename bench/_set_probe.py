import time, numpy as np
from bench.buffer_bench import kernel_configs
from bench.work_guest import wat, input_values
from wagogpu import Config, Host, imports, memcopy
from wagogpu.buffers import memory_span
host = Host(Config(kernels=kernel_configs(), allow_software_adapter=True))
inst = host.instantiate(host.compile(wat()))
n = 10_000_000
inst.call("grow_to", 12 * n // 65536 + 2)
inst.memory_view().view(np.float32)[:n] = input_values(n)
assert inst.call("setup", n) == 0
acc = []; addrs = []
real = imports.copy_bytes
def timed(d, s, nb, t=8):
    addrs.append((d, s))
    t0 = time.perf_counter(); real(d, s, nb, t); acc.append(time.perf_counter() - t0)
imports.copy_bytes = timed
def med(f, k=11):
    ts = []
    for i in range(k):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return round(sorted(ts)[k // 2] * 1e3, 3)
print("set", med(lambda: inst.call("upload", n)), "copy inside", round(sorted(acc)[len(acc)//2] * 1e3, 3))
d, s = addrs[-1]
print("dst mod 4096", d % 4096, "src mod 4096", s % 4096)
print("same copy outside the import", med(lambda: real(d, s, 4 * n)))
for t in (4, 8, 12, 16):
    print("outside, threads", t, med(lambda: real(d, s, 4 * n, t)))
print("dst+page-aligned", med(lambda: real((d + 4095) & ~4095, s, 4 * n - 4096)))
acc.clear()
print("download", med(lambda: inst.call("download", n, 8 * n)), "copy inside", round(sorted(acc)[len(acc)//2] * 1e3, 3))
