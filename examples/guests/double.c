/*
 * wagogpu example guest "double" (C).  Same behaviour and exports as
 * double.zig: kernel B[i] = 2 * A[i] (ID 1, slot 0 F32 READ, slot 1 F32
 * WRITE), CPU runner, and `run()` returning 0 (GPU), 1 (CPU fallback),
 * the failing ABI status (2..12), or 99 on a wrong result.
 *
 * Build (see build.sh; the pinned Zig toolchain provides clang as `zig cc`):
 *   python -m ziglang cc --target=wasm32-freestanding -O2 -nostdlib \
 *     -Wl,--no-entry -Wl,--stack-size=65536 -o double_c.wasm double.c
 * Debian's clang + lld work too:
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -o double_c.wasm double.c
 * (exports come from the export_name attributes below; no --export flags needed).
 */
#include <stdint.h>

#define WAGO_IMPORT(name) __attribute__((import_module("wago_gpu_v1"), import_name(name)))
#define WAGO_EXPORT(name) __attribute__((export_name(name)))

WAGO_IMPORT("createBufferPacked") int64_t wago_create_buffer_packed(int32_t element_type, int32_t count);
WAGO_IMPORT("freeBuffer") int32_t wago_free_buffer(int32_t handle);
WAGO_IMPORT("bindBuffer") int32_t wago_bind_buffer(int32_t slot, int32_t handle);
WAGO_IMPORT("getBuffer") int32_t wago_get_buffer(int32_t slot);
WAGO_IMPORT("dispatch") int32_t wago_dispatch(int32_t kernel_id, int32_t count);
WAGO_IMPORT("setBuffer32") int32_t wago_set_buffer32(int32_t handle, int32_t buffer_offset, int32_t memory_index,
                                                     int32_t guest_byte_offset, int32_t count);
WAGO_IMPORT("copyBuffer32") int32_t wago_copy_buffer32(int32_t handle, int32_t buffer_offset, int32_t memory_index,
                                                       int32_t guest_byte_offset, int32_t count);
WAGO_IMPORT("readBufferF32") float wago_read_f32(int32_t handle, int32_t index);
WAGO_IMPORT("writeBufferF32") void wago_write_f32(int32_t handle, int32_t index, float value);

enum {
    TYPE_F32 = 8,
    STATUS_OK = 0,
    STATUS_CPU_FALLBACK = 1,
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
    wago_write_f32(wago_get_buffer(SLOT_OUT), index, wago_read_f32(wago_get_buffer(SLOT_IN), index) * 2.0f);
}

/* CPU runner: the same work for 0..count-1 through the scalar imports. */
WAGO_EXPORT("wago_gpu.cpu.double") void cpu_double(int32_t count) {
    for (int32_t i = 0; i < count; i++) {
        wago_write_f32(wago_get_buffer(SLOT_OUT), i, wago_read_f32(wago_get_buffer(SLOT_IN), i) * 2.0f);
    }
}

static int32_t guest_addr(const void *p) { return (int32_t)(uintptr_t)p; }

static int32_t run_with(int32_t a, int32_t b) {
    int32_t st = wago_set_buffer32(a, 0, 0, guest_addr(input), N);
    if (st != STATUS_OK) return st;
    if ((st = wago_bind_buffer(SLOT_IN, a)) != STATUS_OK) return st;
    if ((st = wago_bind_buffer(SLOT_OUT, b)) != STATUS_OK) return st;

    int32_t ds = wago_dispatch(KERNEL_DOUBLE, N);
    if (ds == STATUS_CPU_FALLBACK) {
        cpu_double(N);
    } else if (ds != STATUS_OK) {
        return ds;
    }

    if ((st = wago_copy_buffer32(b, 0, 0, guest_addr(output), N)) != STATUS_OK) return st;
    for (int32_t i = 0; i < N; i++) {
        if (output[i] != 2.0f * (float)(i + 1)) return RESULT_MISMATCH;
    }
    return ds;
}

WAGO_EXPORT("run") int32_t run(void) {
    for (int32_t i = 0; i < N; i++) output[i] = 0.0f;
    int64_t pa = wago_create_buffer_packed(TYPE_F32, N);
    int32_t sa = (int32_t)(pa >> 32);
    if (sa != STATUS_OK) return sa;
    int32_t a = (int32_t)(uint32_t)pa;
    int64_t pb = wago_create_buffer_packed(TYPE_F32, N);
    int32_t sb = (int32_t)(pb >> 32);
    if (sb != STATUS_OK) {
        wago_free_buffer(a);
        return sb;
    }
    int32_t b = (int32_t)(uint32_t)pb;

    int32_t result = run_with(a, b);
    int32_t fa = wago_free_buffer(a);
    int32_t fb = wago_free_buffer(b);
    if (result != STATUS_OK && result != STATUS_CPU_FALLBACK) return result;
    if (fa != STATUS_OK) return fa;
    if (fb != STATUS_OK) return fb;
    return result;
}
