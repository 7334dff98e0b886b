//! SAXPY guest (Zig): y := A*x + y over n f32 elements, A = 2.5; the same exports and return
//! codes as saxpy.wat (see there). Built by examples/guests/build.sh with the pinned Zig:
//!
//!   FLAGS="-target wasm32-freestanding -mcpu=mvp -O ReleaseSmall -fno-entry -fstrip -fsingle-threaded --stack 65536"
//!   python3 -m ziglang build-exe $FLAGS --export=run --export=result_ptr \
//!     --export=wago_gpu.kernel.saxpy --export=wago_gpu.cpu.saxpy \
//!     --dep wago_gpu_v1 -Mroot=saxpy.zig $FLAGS -Mwago_gpu_v1=../../include/wago_gpu_v1.zig \
//!     -femit-bin=saxpy_zig.wasm

// Zig cannot declare an import with two results either: buffers come from createBufferPacked.
const abi = @import("wago_gpu_v1"); // the generated include/wago_gpu_v1.zig (tools/gen_guest_headers.py)

const KERNEL_SAXPY: i32 = 1;
const SLOT_X: i32 = 0;
const SLOT_Y: i32 = 1;
const MAX_N = 4096;
const WRONG: i32 = 99;
const BAD_N: i32 = 100;
const A: f32 = 2.5;

var x: [MAX_N]f32 = undefined;
var y: [MAX_N]f32 = undefined;

/// The kernel: one element. Constant slots, the index unchanged, f32 arithmetic only.
fn kernelSaxpy(i: i32) callconv(.c) void {
    abi.writeBufferF32(abi.getBuffer(SLOT_Y), i, A * abi.readBufferF32(abi.getBuffer(SLOT_X), i) + abi.readBufferF32(abi.getBuffer(SLOT_Y), i));
}

/// The CPU runner: the kernel for every index below n.
fn cpuSaxpy(n: i32) callconv(.c) void {
    var i: i32 = 0;
    while (i < n) : (i += 1) kernelSaxpy(i);
}

// Export names with dots need @export; `export fn` names must be identifiers.
comptime {
    @export(&kernelSaxpy, .{ .name = "wago_gpu.kernel.saxpy" });
    @export(&cpuSaxpy, .{ .name = "wago_gpu.cpu.saxpy" });
}

export fn result_ptr() i32 {
    return addr(&y);
}

fn addr(p: *const [MAX_N]f32) i32 {
    return @intCast(@intFromPtr(p));
}

/// The status half of a packed result (bits 32..63).
fn packedStatus(p: i64) i32 {
    return @intCast(p >> 32);
}

/// The handle half (bits 0..31), never sign-extended.
fn packedHandle(p: i64) i32 {
    return @bitCast(@as(u32, @truncate(@as(u64, @bitCast(p)))));
}

/// Everything between creating and freeing the buffers; the first failing status, else dispatch's.
fn job(hx: i32, hy: i32, n: i32) i32 {
    var st = abi.setBuffer32(hx, 0, 0, addr(&x), n);
    if (st != 0) return st;
    st = abi.setBuffer32(hy, 0, 0, addr(&y), n);
    if (st != 0) return st;
    st = abi.bindBuffer(SLOT_X, hx);
    if (st != 0) return st;
    st = abi.bindBuffer(SLOT_Y, hy);
    if (st != 0) return st;
    const ran = abi.dispatch(KERNEL_SAXPY, n); // 0: GPU; 1: nothing committed, run the CPU runner
    if (ran == 1) cpuSaxpy(n) else if (ran != 0) return ran;
    st = abi.copyBuffer32(hy, 0, 0, addr(&y), n);
    if (st != 0) return st;
    for (y[0..@intCast(n)], 0..) |v, i| {
        const want = A * @as(f32, @floatFromInt(i)) + @as(f32, @floatFromInt(n - @as(i32, @intCast(i))));
        if (v != want) return WRONG;
    }
    return ran;
}

export fn run(n: i32) i32 {
    if (n < 1 or n > MAX_N) return BAD_N;
    for (0..@intCast(n)) |i| {
        x[i] = @floatFromInt(i);
        y[i] = @floatFromInt(n - @as(i32, @intCast(i)));
    }
    const px = abi.createBufferPacked(abi.ElementType.F32, n);
    if (packedStatus(px) != 0) return packedStatus(px);
    const py = abi.createBufferPacked(abi.ElementType.F32, n);
    if (packedStatus(py) != 0) {
        _ = abi.freeBuffer(packedHandle(px));
        return packedStatus(py);
    }
    const status = job(packedHandle(px), packedHandle(py), n);
    _ = abi.freeBuffer(packedHandle(px));
    _ = abi.freeBuffer(packedHandle(py));
    return status;
}
