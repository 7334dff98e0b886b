/*
 * wagogpu example guest "double" (C).  Same behaviour and exports as
 * double.zig: kernel B[i] = 2 * A[i] (ID 1, slot 0 F32 READ, slot 1 F32
 * WRITE), CPU runner, and `run()` returning 0 (GPU), 1 (CPU fallback),
 * the failing ABI status (2..12), or 99 on a wrong result.
 *
 * Build (see build.sh; the pinned Zig toolchain provides clang as `zig cc`):
 *   python -m ziglang cc --target=wasm32-freestanding -O2 -nostdlib \
 *     -Wl,--no-entry -Wl,--stack-size=65536 -I ../../include -o double_c.wasm double.c
 * Debian's clang + lld work too:
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -I ../../include -o double_c.wasm double.c
 * (exports come from the export_name attributes below; no --export flags needed).
 */
#include "wago_gpu_v1.h" /* the generated imports (include/, on the build's -I path) */

enum {
    KERNEL_DOUBLE = 1,
    SLOT_IN = 0,
    SLOT_OUT = 1,
    N = 4,
    RESULT_MISMATCH = 99,
};

static float input[N] = {1.0f, 2.0f, 3.0f, 4.0f};
static float output[N];

/* GPU kernel: constant slots, the index parameter unchanged, one f32 mul. */
WAGO_EXPORT("wago_gpu.kernel.double") void kernel_double(int32_t index) {
    writeBufferF32(getBuffer(SLOT_OUT), index, readBufferF32(getBuffer(SLOT_IN), index) * 2.0f);
}

/* CPU runner: the same work for 0..count-1 through the scalar imports. */
WAGO_EXPORT("wago_gpu.cpu.double") void cpu_double(int32_t count) {
    for (int32_t i = 0; i < count; i++) {
        writeBufferF32(getBuffer(SLOT_OUT), i, readBufferF32(getBuffer(SLOT_IN), i) * 2.0f);
    }
}

static int32_t guest_addr(const void *p) { return (int32_t)(uintptr_t)p; }

static int32_t run_with(int32_t a, int32_t b) {
    int32_t st = setBuffer32(a, 0, 0, guest_addr(input), N);
    if (st != WAGO_STATUS_OK) return st;
    if ((st = bindBuffer(SLOT_IN, a)) != WAGO_STATUS_OK) return st;
    if ((st = bindBuffer(SLOT_OUT, b)) != WAGO_STATUS_OK) return st;

    int32_t ds = dispatch(KERNEL_DOUBLE, N);
    if (ds == WAGO_STATUS_CPU_FALLBACK) {
        cpu_double(N);
    } else if (ds != WAGO_STATUS_OK) {
        return ds;
    }

    if ((st = copyBuffer32(b, 0, 0, guest_addr(output), N)) != WAGO_STATUS_OK) return st;
    for (int32_t i = 0; i < N; i++) {
        if (output[i] != 2.0f * (float)(i + 1)) return RESULT_MISMATCH;
    }
    return ds;
}

WAGO_EXPORT("run") int32_t run(void) {
    for (int32_t i = 0; i < N; i++) output[i] = 0.0f;
    int64_t pa = createBufferPacked(WAGO_TYPE_F32, N);
    int32_t sa = (int32_t)(pa >> 32);
    if (sa != WAGO_STATUS_OK) return sa;
    int32_t a = (int32_t)(uint32_t)pa;
    int64_t pb = createBufferPacked(WAGO_TYPE_F32, N);
    int32_t sb = (int32_t)(pb >> 32);
    if (sb != WAGO_STATUS_OK) {
        freeBuffer(a);
        return sb;
    }
    int32_t b = (int32_t)(uint32_t)pb;

    int32_t result = run_with(a, b);
    int32_t fa = freeBuffer(a);
    int32_t fb = freeBuffer(b);
    if (result != WAGO_STATUS_OK && result != WAGO_STATUS_CPU_FALLBACK) return result;
    if (fa != WAGO_STATUS_OK) return fa;
    if (fb != WAGO_STATUS_OK) return fb;
    return result;
}
