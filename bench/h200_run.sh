#!/usr/bin/env bash
# One device session: the GPU test set on a hardware adapter, then the benchmarks, all into $OUT.
# Run on the GPU machine as:  . .whl/enter.sh && bash bench/h200_run.sh
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
export WAGO_GPU_TEST=1
python3 -m wagogpu info > "$out/info.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider ${TESTS:-tests/test_gpu_dispatch.py tests/test_differential.py tests/test_legacy.py tests/gpu tests/test_examples.py tests/test_large_transfers.py} > "$out/gpu_tests.txt" 2>&1
echo "tests rc=$?" >> "$out/gpu_tests.txt"
if [ -z "${SKIP_BENCH:-}" ]; then
  python3 -m bench.buffer_bench --repeats 5 --ladder polynomial --ladder twice --out "$out/buffer_bench.jsonl" > /dev/null 2> "$out/buffer_bench.err"
  echo "buffer_bench rc=$?" >> "$out/buffer_bench.err"
  python3 -m bench.cpu_fallback > "$out/cpu_fallback.jsonl" 2> "$out/cpu_fallback.err"
  python3 -m bench.host_overhead > "$out/host_overhead.jsonl" 2> "$out/host_overhead.err"
  python3 -m bench.compile > "$out/compile.jsonl" 2> "$out/compile.err"
  python3 -m bench.gpu_backend > "$out/gpu_backend.jsonl" 2> "$out/gpu_backend.err"
  [ -f bench/mandelbrot.py ] && python3 -m bench.mandelbrot > "$out/mandelbrot.jsonl" 2> "$out/mandelbrot.err"
  python3 -m bench.fresh_path > "$out/fresh_path.jsonl" 2> "$out/fresh_path.err"
  python3 -m bench.fresh_path --n 1000000 --reps 20 --variant default --variant from_4_mib --variant none_of_them > "$out/fresh_path_1m.jsonl" 2>> "$out/fresh_path.err"
  # Large host copies with non-temporal stores (glibc tunable, read at process start): the same
  # fresh-path figures in alternating processes, with and without it.
  nt=glibc.cpu.x86_non_temporal_threshold=0x400000
  for i in 1 2 3; do
    python3 -m bench.fresh_path --variant default --reps 12 --blocks 1 --breakdown >> "$out/fresh_env_default.jsonl" 2>> "$out/fresh_path.err"
    GLIBC_TUNABLES=$nt python3 -m bench.fresh_path --variant default --reps 12 --blocks 1 --breakdown >> "$out/fresh_env_nt.jsonl" 2>> "$out/fresh_path.err"
  done
  GLIBC_TUNABLES=$nt python3 -m bench.buffer_bench --repeats 5 --ladder polynomial --ladder twice --out "$out/buffer_bench_nt.jsonl" > /dev/null 2>> "$out/buffer_bench.err"
  ${EXTRA:-true}
fi
tail -3 "$out/gpu_tests.txt"
