//! The corpus driver, the same in every language: the host writes each slot's inputs into the
//! staging area, `corpus_run` creates one buffer per declared slot, uploads and binds it,
//! dispatches, runs the kernel's CPU runner when dispatch answers 1, copies every buffer back into
//! the staging area and frees it. It returns the dispatch status (0 GPU, 1 CPU runner) or the
//! status of the first import that failed.
const abi = @import("wago_gpu_v1"); // the generated include/wago_gpu_v1.zig
const corpus = @import("corpus.zig");

const slots = 8;
const max_elements = 1024;
const slot_bytes = 8 * max_elements; // room for the widest element type
const status_ok: i32 = 0;
const status_cpu_fallback: i32 = 1;
const status_invalid_range: i32 = 3;

var staging: [slots * slot_bytes]u8 = undefined;

fn stagingAddress() callconv(.c) i32 {
    return @intCast(@intFromPtr(&staging));
}

fn slotAddress(slot: usize) i32 {
    return stagingAddress() + @as(i32, @intCast(slot * slot_bytes));
}

/// Creates, fills and binds one slot's buffer; its handle goes to `handle`.
fn prepare(slot: usize, element_type: i32, count: i32, handle: *i32) i32 {
    const packed_result: u64 = @bitCast(abi.createBufferPacked(element_type, count));
    const status: i32 = @intCast(packed_result >> 32);
    if (status != status_ok) return status;
    handle.* = @bitCast(@as(u32, @truncate(packed_result)));
    const set = abi.setBuffer32(handle.*, 0, 0, slotAddress(slot), count);
    if (set != status_ok) return set;
    return abi.bindBuffer(@intCast(slot), handle.*);
}

fn runBound(kernel_id: i32, count: i32, handles: *const [slots]i32) i32 {
    const status = abi.dispatch(kernel_id, count);
    if (status == status_cpu_fallback) {
        corpus.cpuRun(kernel_id, count);
    } else if (status != status_ok) {
        return status;
    }
    for (handles, 0..) |h, slot| {
        if (h == 0) continue;
        const copied = abi.copyBuffer32(h, 0, 0, slotAddress(slot), count);
        if (copied != status_ok) return copied;
    }
    return status;
}

fn run(kernel_id: i32, count: i32, layout: i32) callconv(.c) i32 {
    if (count < 0 or count > max_elements) return status_invalid_range;
    var handles: [slots]i32 = @splat(0);
    var status = status_ok;
    const types: u32 = @bitCast(layout);
    for (0..slots) |slot| {
        if (status != status_ok) break;
        const element_type: i32 = @intCast((types >> @intCast(4 * slot)) & 15);
        if (element_type != 0) status = prepare(slot, element_type, count, &handles[slot]);
    }
    if (status == status_ok) status = runBound(kernel_id, count, &handles);
    for (handles) |h| {
        if (h != 0) _ = abi.freeBuffer(h);
    }
    return status;
}

comptime {
    @export(&stagingAddress, .{ .name = "corpus_staging" });
    @export(&run, .{ .name = "corpus_run" });
}
