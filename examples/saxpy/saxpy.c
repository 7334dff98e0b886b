/*
 * SAXPY guest (C): y := A*x + y over n f32 elements, A = 2.5; the same exports and return codes
 * as saxpy.wat (see there). Built by examples/guests/build.sh with the pinned `zig cc` (clang):
 *
 *   python3 -m ziglang cc -target wasm32-freestanding -mcpu=mvp -O2 -nostdlib -s \
 *     -Wl,--no-entry -Wl,-z,stack-size=65536 -I ../../include -o saxpy_c.wasm saxpy.c
 *
 * Import and export names come from the attributes below, so no --export flags are needed.
 */
#include "wago_gpu_v1.h" /* the generated imports (include/, on the build's -I path) */
#define EXPORT(name) WAGO_EXPORT(name)

enum { KERNEL_SAXPY = 1, SLOT_X = 0, SLOT_Y = 1, MAX_N = 4096, WRONG = 99, BAD_N = 100 };
#define A 2.5f

static float x[MAX_N];
static float y[MAX_N];

/* The kernel: one element. Constant slots, the index unchanged, f32 arithmetic only. */
EXPORT("wago_gpu.kernel.saxpy") void kernel_saxpy(int32_t i) {
    writeBufferF32(getBuffer(SLOT_Y), i, A * readBufferF32(getBuffer(SLOT_X), i) + readBufferF32(getBuffer(SLOT_Y), i));
}

/* The CPU runner: the kernel for every index below n. */
EXPORT("wago_gpu.cpu.saxpy") void cpu_saxpy(int32_t n) {
    for (int32_t i = 0; i < n; i++) kernel_saxpy(i);
}

EXPORT("result_ptr") int32_t result_ptr(void) { return (int32_t)(uintptr_t)y; }

static int32_t addr(const float *p) { return (int32_t)(uintptr_t)p; }

/* Everything between creating and freeing the buffers; the first failing status, else dispatch's. */
static int32_t job(int32_t hx, int32_t hy, int32_t n) {
    int32_t st;
    if ((st = setBuffer32(hx, 0, 0, addr(x), n)) != 0) return st;
    if ((st = setBuffer32(hy, 0, 0, addr(y), n)) != 0) return st;
    if ((st = bindBuffer(SLOT_X, hx)) != 0) return st;
    if ((st = bindBuffer(SLOT_Y, hy)) != 0) return st;
    int32_t ran = dispatch(KERNEL_SAXPY, n); /* 0: GPU; 1: nothing committed, run the CPU runner */
    if (ran == 1) cpu_saxpy(n);
    else if (ran != 0) return ran;
    if ((st = copyBuffer32(hy, 0, 0, addr(y), n)) != 0) return st;
    for (int32_t i = 0; i < n; i++) {
        if (y[i] != A * (float)i + (float)(n - i)) return WRONG;
    }
    return ran;
}

EXPORT("run") int32_t run(int32_t n) {
    if (n < 1 || n > MAX_N) return BAD_N;
    for (int32_t i = 0; i < n; i++) {
        x[i] = (float)i;
        y[i] = (float)(n - i);
    }
    /* packed: status in the high 32 bits, the handle in the low 32 bits */
    int64_t px = createBufferPacked(WAGO_TYPE_F32, n);
    if (px >> 32) return (int32_t)(px >> 32);
    int64_t py = createBufferPacked(WAGO_TYPE_F32, n);
    if (py >> 32) {
        freeBuffer((int32_t)px);
        return (int32_t)(py >> 32);
    }
    int32_t status = job((int32_t)px, (int32_t)py, n);
    freeBuffer((int32_t)px);
    freeBuffer((int32_t)py);
    return status;
}
