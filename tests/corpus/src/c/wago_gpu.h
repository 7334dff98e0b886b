/* What every corpus C file needs: the wago_gpu_v1 imports (the generated include/wago_gpu_v1.h,
 * found through the build's -I) and the kernel / CPU-runner export helpers. */
#ifndef WAGO_GPU_H
#define WAGO_GPU_H
#include "wago_gpu_v1.h"

/* A kernel: `wago_gpu.kernel.NAME(i)` does element i. Its CPU runner `wago_gpu.cpu.NAME(n)`,
 * defined by CPU_RUNNER, calls it for 0..n-1 (the same work through the scalar imports). */
#define KERNEL(name) WAGO_EXPORT("wago_gpu.kernel." #name) void kernel_##name(int32_t i)
#define CPU_RUNNER(id, name) \
    WAGO_EXPORT("wago_gpu.cpu." #name) void cpu_##name(int32_t n) { \
        for (int32_t j = 0; j < n; j++) kernel_##name(j); \
    }

/* Runs kernel `id`'s CPU runner over n elements (kernels.c); the driver calls it on status 1. */
void corpus_cpu(int32_t id, int32_t n);

#endif
