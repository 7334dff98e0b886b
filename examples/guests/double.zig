//! wagogpu example guest "double" (Zig).
//!
//! One buffer kernel, B[i] = 2 * A[i], plus an exported `run` that drives a
//! complete dispatch: create two F32 buffers of 4 elements, upload [1,2,3,4],
//! bind slot 0 (input) and slot 1 (output), dispatch kernel ID 1, run the CPU
//! runner on status 1, copy the output back, verify [2,4,6,8], free both
//! buffers.
//!
//! Host configuration this guest expects (Python):
//!   KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double",
//!       bindings=[BindingConfig(0, ElementType.F32, Access.READ),
//!                 BindingConfig(1, ElementType.F32, Access.WRITE)],
//!       relaxed_float=True)
//!
//! `run()` returns 0 when the dispatch ran on the GPU, 1 when the CPU runner
//! ran, the ABI status (2..12) of the first failing import, or 99 when the
//! copied-back output is not [2,4,6,8].
//!
//! Build: build.sh (it pins the toolchain and passes the generated include/wago_gpu_v1.zig as the
//! module wago_gpu_v1; the exact command is in README.md).

// ---- wago_gpu_v1 imports: the generated include/wago_gpu_v1.zig (tools/gen_guest_headers.py) ----
const abi = @import("wago_gpu_v1");

const KERNEL_DOUBLE: i32 = 1;
const SLOT_IN: i32 = 0;
const SLOT_OUT: i32 = 1;
const N: i32 = 4;
const RESULT_MISMATCH: i32 = 99;

var input: [4]f32 = .{ 1.0, 2.0, 3.0, 4.0 };
var output: [4]f32 = .{ 0.0, 0.0, 0.0, 0.0 };

/// GPU kernel: one element. Must stay inside the GPU subset: constant slot
/// numbers, the index parameter used unchanged, only f32 mul.
fn kernelDouble(index: i32) callconv(.c) void {
    abi.writeBufferF32(abi.getBuffer(SLOT_OUT), index, abi.readBufferF32(abi.getBuffer(SLOT_IN), index) * 2.0);
}

/// CPU runner: the same work for indices 0..count-1 through the scalar imports.
fn cpuDouble(count: i32) callconv(.c) void {
    var i: i32 = 0;
    while (i < count) : (i += 1) {
        abi.writeBufferF32(abi.getBuffer(SLOT_OUT), i, abi.readBufferF32(abi.getBuffer(SLOT_IN), i) * 2.0);
    }
}

comptime {
    @export(&kernelDouble, .{ .name = "wago_gpu.kernel.double" });
    @export(&cpuDouble, .{ .name = "wago_gpu.cpu.double" });
}

fn packedStatus(p: i64) i32 {
    return @intCast(p >> 32);
}

fn packedHandle(p: i64) i32 {
    return @bitCast(@as(u32, @truncate(@as(u64, @bitCast(p)))));
}

fn addr(ptr: anytype) i32 {
    return @intCast(@intFromPtr(ptr));
}

fn runWith(a: i32, b: i32) i32 {
    var st = abi.setBuffer32(a, 0, 0, addr(&input), N);
    if (st != abi.Status.OK) return st;
    st = abi.bindBuffer(SLOT_IN, a);
    if (st != abi.Status.OK) return st;
    st = abi.bindBuffer(SLOT_OUT, b);
    if (st != abi.Status.OK) return st;

    const ds = abi.dispatch(KERNEL_DOUBLE, N);
    if (ds == abi.Status.CPU_FALLBACK) {
        cpuDouble(N);
    } else if (ds != abi.Status.OK) {
        return ds;
    }

    st = abi.copyBuffer32(b, 0, 0, addr(&output), N);
    if (st != abi.Status.OK) return st;
    for (output, 0..) |v, i| {
        if (v != 2.0 * @as(f32, @floatFromInt(i + 1))) return RESULT_MISMATCH;
    }
    return ds;
}

export fn run() i32 {
    output = .{ 0.0, 0.0, 0.0, 0.0 };
    const pa = abi.createBufferPacked(abi.ElementType.F32, N);
    if (packedStatus(pa) != abi.Status.OK) return packedStatus(pa);
    const a = packedHandle(pa);
    const pb = abi.createBufferPacked(abi.ElementType.F32, N);
    if (packedStatus(pb) != abi.Status.OK) {
        _ = abi.freeBuffer(a);
        return packedStatus(pb);
    }
    const b = packedHandle(pb);

    const result = runWith(a, b);
    const fa = abi.freeBuffer(a);
    const fb = abi.freeBuffer(b);
    if (result != abi.Status.OK and result != abi.Status.CPU_FALLBACK) return result;
    if (fa != abi.Status.OK) return fa;
    if (fb != abi.Status.OK) return fb;
    return result;
}
