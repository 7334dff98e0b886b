/* The wago_gpu_v1 imports the corpus guests use, with the ABI's exact names and signatures
 * (reference/abi_v1.json), and the two export helpers every kernel file needs. */
#ifndef WAGO_GPU_H
#define WAGO_GPU_H
#include <stdint.h>

#define WAGO_IMPORT(name) __attribute__((import_module("wago_gpu_v1"), import_name(name)))
#define WAGO_EXPORT(name) __attribute__((export_name(name)))

WAGO_IMPORT("createBufferPacked") int64_t createBufferPacked(int32_t element_type, int32_t count);
WAGO_IMPORT("freeBuffer") int32_t freeBuffer(int32_t handle);
WAGO_IMPORT("bindBuffer") int32_t bindBuffer(int32_t slot, int32_t handle);
WAGO_IMPORT("dispatch") int32_t dispatch(int32_t kernel_id, int32_t count);
WAGO_IMPORT("setBuffer32") int32_t setBuffer32(int32_t handle, int32_t offset, int32_t memory, int32_t guest, int32_t count);
WAGO_IMPORT("copyBuffer32") int32_t copyBuffer32(int32_t handle, int32_t offset, int32_t memory, int32_t guest, int32_t count);
WAGO_IMPORT("getBuffer") int32_t getBuffer(int32_t slot);
WAGO_IMPORT("readBufferI8") int32_t readBufferI8(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferU8") int32_t readBufferU8(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferI16") int32_t readBufferI16(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferI32") int32_t readBufferI32(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferU32") uint32_t readBufferU32(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferF16") float readBufferF16(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferF32") float readBufferF32(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferI64") int64_t readBufferI64(int32_t handle, int32_t index);
WAGO_IMPORT("readBufferF64") double readBufferF64(int32_t handle, int32_t index);
WAGO_IMPORT("writeBufferI8") void writeBufferI8(int32_t handle, int32_t index, int32_t value);
WAGO_IMPORT("writeBufferU8") void writeBufferU8(int32_t handle, int32_t index, int32_t value);
WAGO_IMPORT("writeBufferI16") void writeBufferI16(int32_t handle, int32_t index, int32_t value);
WAGO_IMPORT("writeBufferU16") void writeBufferU16(int32_t handle, int32_t index, int32_t value);
WAGO_IMPORT("writeBufferI32") void writeBufferI32(int32_t handle, int32_t index, int32_t value);
WAGO_IMPORT("writeBufferU32") void writeBufferU32(int32_t handle, int32_t index, uint32_t value);
WAGO_IMPORT("writeBufferF16") void writeBufferF16(int32_t handle, int32_t index, float value);
WAGO_IMPORT("writeBufferF32") void writeBufferF32(int32_t handle, int32_t index, float value);
WAGO_IMPORT("writeBufferI64") void writeBufferI64(int32_t handle, int32_t index, int64_t value);
WAGO_IMPORT("writeBufferF64") void writeBufferF64(int32_t handle, int32_t index, double value);

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
