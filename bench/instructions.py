"""Machine instructions per call of the host's Python, device stubbed, counted by valgrind: a
figure that does not move with the machine's load (a shared 2-core machine moves a microsecond
figure by 10-30% between processes), and that, unlike a bytecode count, sees what each bytecode
costs in C (an attribute read through an instance dict, a builtin call, a tuple hashed).

python -m bench.instructions [--calls 500] [--n 1024]

Each figure runs the work guest of bench.host_overhead in child processes under valgrind's
callgrind, counting only inside wasmtime's unchecked call entry (``*call_unchecked_raw*``, the
symbol wasmtime 50 calls it by): everything from the Python -> Wasm call's C side through the guest
and its imports' Python. Two children per figure, both warmed up alike (WARM_ROUNDS rounds of set,
dispatch, copy back) and the second making --calls calls more: the difference over --calls is the
figure, start-up and warm-up cancelled; PYTHONHASHSEED is fixed in both. One JSONL record: the
instructions per resident dispatch and per checked 1,024 round trip (set, dispatch, copy back),
the adapter the stubbed host opened, and the environment. The children's results are not checked
(the device is stubbed); bench.host_overhead times the same calls.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

from bench.common import emit, environment

#: Rounds of set, dispatch, copy back each child makes first (the steady state: buffers resident, plans kept).
WARM_ROUNDS = 20
#: The wasmtime symbol collection is switched on inside (one call's whole C and Python nest).
TOGGLE = "*call_unchecked_raw*"
#: Figure -> the work guest's export it calls (with the kernel ID and the count).
EXPORTS = {"resident_dispatch": "dispatch", "round_trip": "sample"}


def child(which: str, calls: int, n: int) -> None:
    """Make ``calls`` calls of one figure with the device stubbed (run under valgrind)."""
    from bench.buffer_bench import kernel_configs
    from bench.host_overhead import guest, stubbed_device
    from bench.work_guest import KERNEL_IDS
    from wagogpu import Config, Host

    host = Host(Config(kernels=kernel_configs(), allow_software_adapter=True, require_gpu=False))
    if host.device is None:
        raise SystemExit(f"bench.instructions: no GPU adapter to stub ({host.context.device_reason})")
    inst, _x = guest(host, n)
    k = KERNEL_IDS["twice"]
    export = EXPORTS[which]
    with stubbed_device(inst):
        for _ in range(WARM_ROUNDS):
            inst.call("upload", n)
            inst.call("dispatch", k, n)
            inst.call("download", n, 8 * n)
        for _ in range(calls):
            inst.call(export, k, n)
    print(host.device.info.name)


def collected(which: str, calls: int, n: int) -> tuple[int, str]:
    """(instructions valgrind collected, the adapter) of one child."""
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={TOGGLE}",
           "--callgrind-out-file=/dev/null", sys.executable, "-m", "bench.instructions", "--child", which,
           "--calls", str(calls), "--n", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode or found is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench.instructions: the {which} child failed (rc {proc.returncode}): {tail}")
    if int(found.group(1)) == 0:
        raise SystemExit(f"bench.instructions: valgrind collected nothing inside {TOGGLE} "
                         "(another wasmtime's symbol names?)")
    return int(found.group(1)), proc.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=500, help="counted calls per figure")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--child", choices=sorted(EXPORTS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.calls, args.n)
        return 0
    if args.calls < 1:
        raise SystemExit(f"bench.instructions: --calls must be at least 1, got {args.calls}")
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions: valgrind is not installed (apt-get install valgrind)")
    record: dict[str, object] = {"bench": "instructions", "calls": args.calls, "n": args.n, **environment()}
    for which in EXPORTS:
        low, record["adapter_stubbed"] = collected(which, 0, args.n)
        high, _ = collected(which, args.calls, args.n)
        record[f"instructions_{which}"] = round((high - low) / args.calls)
    emit(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
