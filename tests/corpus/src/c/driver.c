/* The corpus driver, the same in every language: the host writes each slot's inputs into the
 * staging area, `corpus_run` creates one buffer per declared slot, uploads and binds it,
 * dispatches, runs the kernel's CPU runner when dispatch answers 1, copies every buffer back
 * into the staging area and frees it. It returns the dispatch status (0 GPU, 1 CPU runner) or the
 * status of the first import that failed. */
#include <stdint.h>

#include "wago_gpu.h"

enum {
    SLOTS = 8,
    MAX_ELEMENTS = 1024,
    SLOT_BYTES = 8 * MAX_ELEMENTS, /* room for the widest element type */
    STATUS_OK = 0,
    STATUS_CPU_FALLBACK = 1,
};

static uint8_t staging[SLOTS * SLOT_BYTES];

WAGO_EXPORT("corpus_staging") int32_t corpus_staging(void) { return (int32_t)(uintptr_t)staging; }

static int32_t slot_address(int32_t slot) { return corpus_staging() + slot * SLOT_BYTES; }

/* Creates, fills and binds slot `slot`'s buffer; its handle goes to *handle (0 when none). */
static int32_t prepare(int32_t slot, int32_t type, int32_t count, int32_t *handle) {
    int64_t packed = createBufferPacked(type, count);
    int32_t status = (int32_t)(packed >> 32);
    if (status != STATUS_OK) return status;
    *handle = (int32_t)(uint32_t)packed;
    status = setBuffer32(*handle, 0, 0, slot_address(slot), count);
    if (status != STATUS_OK) return status;
    return bindBuffer(slot, *handle);
}

static int32_t run_bound(int32_t kernel_id, int32_t count, const int32_t *handles) {
    int32_t status = dispatch(kernel_id, count);
    if (status == STATUS_CPU_FALLBACK) corpus_cpu(kernel_id, count);
    else if (status != STATUS_OK) return status;
    for (int32_t slot = 0; slot < SLOTS; slot++) {
        if (handles[slot] == 0) continue;
        int32_t copied = copyBuffer32(handles[slot], 0, 0, slot_address(slot), count);
        if (copied != STATUS_OK) return copied;
    }
    return status;
}

WAGO_EXPORT("corpus_run") int32_t corpus_run(int32_t kernel_id, int32_t count, int32_t layout) {
    if (count < 0 || count > MAX_ELEMENTS) return 3; /* INVALID_RANGE */
    int32_t handles[SLOTS] = {0};
    int32_t status = STATUS_OK;
    for (int32_t slot = 0; slot < SLOTS && status == STATUS_OK; slot++) {
        int32_t type = (layout >> (4 * slot)) & 15;
        if (type != 0) status = prepare(slot, type, count, &handles[slot]);
    }
    if (status == STATUS_OK) status = run_bound(kernel_id, count, handles);
    for (int32_t slot = 0; slot < SLOTS; slot++) {
        if (handles[slot] != 0) freeBuffer(handles[slot]);
    }
    return status;
}
