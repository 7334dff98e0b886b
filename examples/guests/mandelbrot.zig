//! wagogpu example guest "mandelbrot" (Zig).
//!
//! Renders the Mandelbrot set as per-pixel escape counts in three ways that
//! produce the same image bit for bit (f32 arithmetic, same operation order):
//!
//! * `render(w, h, max_iter)`: the buffer guest. Four F32 buffers c_re, c_im,
//!   z_re, z_im; `max_iter` dispatches of kernel 1 `wago_gpu.kernel.step`
//!   (one z = z^2 + c step per element, straight-line code inside the
//!   reference GPU subset); after every dispatch the guest copies z back and
//!   counts, on the CPU, the passes each pixel stayed inside |z|^2 <= 4.
//! * `render_loop(w, h, max_iter)`: one dispatch of kernel 2
//!   `wago_gpu.kernel.mandel`, the whole per-pixel job: c from the pixel's
//!   index, then the escape loop (integer division, conversions, a loop with
//!   compares and branches: the compiler's extended subset runs it on the
//!   GPU, under a loop budget; status 1 runs the CPU runner instead). A
//!   kernel only receives its index, so slot 0 is a U32 buffer starting with
//!   [w, h, max_iter, 0] that every invocation reads at those elements (no
//!   globals or uniforms needed); slot 1 (U32, WRITE) receives the counts.
//!   No per-pixel input is computed on the CPU.
//! * `render_direct(w, h, max_iter)`: plain Zig loops over guest memory, no
//!   imports at all (the "direct CPU" baseline).
//!
//! Image: pixel (x, y) samples c = (-2 + 3*(x+0.5)/w) + i*(-1.25 + 2.5*(y+0.5)/h);
//! count = number of passes p = 1, 2, ... (up to max_iter) after which z_p
//! still satisfies |z_p|^2 <= 4 with no earlier escape; so 0..max_iter, and
//! max_iter for points that never escaped. `image_ptr()` points at w*h bytes,
//! min(count, 255) per pixel, row-major; `counts_ptr()` at w*h u32 counts.
//!
//! Entry points return 0 on success, the ABI status (2..12) of the first
//! failing import, 100 for arguments out of range (1 <= w, h <= 4096,
//! w*h <= 4,194,304, 1 <= max_iter <= 65535) or 101 when memory cannot grow.
//! `gpu_dispatches()` / `cpu_dispatches()` report how many dispatches of the
//! last render returned 0 (GPU) / 1 (CPU runner ran). All buffers are freed
//! before an entry point returns.
//!
//! Host configuration (Python):
//!   KernelConfig(1, "wago_gpu.kernel.step", "wago_gpu.cpu.step",
//!       bindings=[BindingConfig(0, ElementType.F32, Access.READ),
//!                 BindingConfig(1, ElementType.F32, Access.READ),
//!                 BindingConfig(2, ElementType.F32, Access.READ_WRITE),
//!                 BindingConfig(3, ElementType.F32, Access.READ_WRITE)],
//!       relaxed_float=True)
//!   KernelConfig(2, "wago_gpu.kernel.mandel", "wago_gpu.cpu.mandel",
//!       bindings=[BindingConfig(0, ElementType.U32, Access.READ),
//!                 BindingConfig(1, ElementType.U32, Access.WRITE)],
//!       relaxed_float=True)
//!
//! Build: build.sh (it pins the toolchain and passes the generated include/wago_gpu_v1.zig as the
//! module wago_gpu_v1; the exact command is in README.md).

// ---- wago_gpu_v1 imports: the generated include/wago_gpu_v1.zig (tools/gen_guest_headers.py) ----
const abi = @import("wago_gpu_v1");

const KERNEL_STEP: i32 = 1;
const KERNEL_MANDEL: i32 = 2;

// Slots of the step kernel (F32: c_re, c_im read; z_re, z_im read and written).
const SLOT_CR: i32 = 0;
const SLOT_CI: i32 = 1;
const SLOT_ZR: i32 = 2;
const SLOT_ZI: i32 = 3;
// Slots of the mandel kernel (U32: [w, h, max_iter, 0] read; counts written).
const SLOT_PARAMS: i32 = 0;
const SLOT_COUNTS: i32 = 1;

// Limits and guest-defined result codes.
const MAX_SIDE: i32 = 4096;
const MAX_PIXELS: usize = 4_194_304;
const MAX_ITER: i32 = 65535;
const RESULT_BAD_ARGS: i32 = 100;
const RESULT_NO_MEMORY: i32 = 101;

// ---------------------------------------------------------------------------
// The arithmetic, shared by every path so all of them round identically.

const Z = struct { re: f32, im: f32 };

/// c = cRe(x) + i*cIm(y) of pixel (x, y) in a w x h image.
inline fn cRe(x: usize, w: f32) f32 {
    return -2.0 + 3.0 * (@as(f32, @floatFromInt(x)) + 0.5) / w;
}

inline fn cIm(y: usize, h: f32) f32 {
    return -1.25 + 2.5 * (@as(f32, @floatFromInt(y)) + 0.5) / h;
}

/// One Mandelbrot step z' = z^2 + c using only f32 add/sub/mul.
inline fn stepZ(cr: f32, ci: f32, zr: f32, zi: f32) Z {
    return .{ .re = zr * zr - zi * zi + cr, .im = (zr + zr) * zi + ci };
}

inline fn bounded(z: Z) bool {
    return z.re * z.re + z.im * z.im <= 4.0;
}

/// Passes 1..limit that z stays bounded for, starting from z = 0.
inline fn escapeCount(cr: f32, ci: f32, limit: u32) u32 {
    var z = Z{ .re = 0.0, .im = 0.0 };
    var n: u32 = 0;
    while (n < limit) {
        z = stepZ(cr, ci, z.re, z.im);
        if (!bounded(z)) break;
        n += 1;
    }
    return n;
}

// ---------------------------------------------------------------------------
// Guest memory: six arrays of `capacity` pixels placed after everything the
// linker laid out, grown with memory.grow on demand and never shrunk.

const BYTES_PER_PIXEL: usize = 4 * 4 + 4 + 1; // cr ci zr zi (f32), count (u32), image (u8)

var heap_base: usize = 0;
var capacity: usize = 0;
var cr_addr: usize = 0;
var ci_addr: usize = 0;
var zr_addr: usize = 0;
var zi_addr: usize = 0;
var counts_addr: usize = 0;
var image_addr: usize = 0;
var last_pixels: usize = 0;
var gpu_count: i32 = 0;
var cpu_count: i32 = 0;

fn ensureCapacity(pixels: usize) bool {
    if (pixels <= capacity) return true;
    if (heap_base == 0) heap_base = @wasmMemorySize(0) * 65536;
    const needed = heap_base + pixels * BYTES_PER_PIXEL;
    const have = @wasmMemorySize(0) * 65536;
    if (needed > have) {
        const pages = (needed - have + 65535) / 65536;
        if (@wasmMemoryGrow(0, pages) < 0) return false;
    }
    capacity = pixels;
    cr_addr = heap_base;
    ci_addr = cr_addr + 4 * pixels;
    zr_addr = ci_addr + 4 * pixels;
    zi_addr = zr_addr + 4 * pixels;
    counts_addr = zi_addr + 4 * pixels;
    image_addr = counts_addr + 4 * pixels;
    return true;
}

fn f32s(addr: usize, n: usize) []f32 {
    return @as([*]f32, @ptrFromInt(addr))[0..n];
}

fn u32s(addr: usize, n: usize) []u32 {
    return @as([*]u32, @ptrFromInt(addr))[0..n];
}

fn bytes(addr: usize, n: usize) []u8 {
    return @as([*]u8, @ptrFromInt(addr))[0..n];
}

fn guest(addr: usize) i32 {
    return @intCast(addr);
}

/// Validates the arguments and makes room (and with `fill`, writes c for
/// every pixel into guest memory); returns 0 or a result code.
fn prepare(width: i32, height: i32, max_iter: i32, fill: bool) i32 {
    gpu_count = 0;
    cpu_count = 0;
    if (width < 1 or width > MAX_SIDE or height < 1 or height > MAX_SIDE) return RESULT_BAD_ARGS;
    if (max_iter < 1 or max_iter > MAX_ITER) return RESULT_BAD_ARGS;
    const pixels = @as(usize, @intCast(width)) * @as(usize, @intCast(height));
    if (pixels > MAX_PIXELS) return RESULT_BAD_ARGS;
    if (!ensureCapacity(pixels)) return RESULT_NO_MEMORY;
    last_pixels = pixels;
    if (fill) fillC(@intCast(width), @intCast(height));
    return abi.Status.OK;
}

fn fillC(width: usize, height: usize) void {
    const cr = f32s(cr_addr, width * height);
    const ci = f32s(ci_addr, width * height);
    const w: f32 = @floatFromInt(width);
    const h: f32 = @floatFromInt(height);
    for (0..height) |y| {
        const im = cIm(y, h);
        for (0..width) |x| {
            cr[y * width + x] = cRe(x, w);
            ci[y * width + x] = im;
        }
    }
}

fn writeImage(pixels: usize) void {
    const counts = u32s(counts_addr, pixels);
    const image = bytes(image_addr, pixels);
    for (counts, image) |c, *px| px.* = if (c > 255) 255 else @intCast(c);
}

const Buffers = struct {
    handles: [4]i32 = .{ 0, 0, 0, 0 },
    len: usize = 0,

    fn create(self: *Buffers, element_type: i32, count: usize) i32 {
        const p = abi.createBufferPacked(element_type, @intCast(count));
        const status: i32 = @intCast(p >> 32);
        if (status != abi.Status.OK) return status;
        self.handles[self.len] = @bitCast(@as(u32, @truncate(@as(u64, @bitCast(p)))));
        self.len += 1;
        return abi.Status.OK;
    }

    /// Frees every buffer; keeps `result` unless it was a success and a free failed.
    fn release(self: *Buffers, result: i32) i32 {
        var out = result;
        for (self.handles[0..self.len]) |hd| {
            const st = abi.freeBuffer(hd);
            if (st != abi.Status.OK and (out == abi.Status.OK or out == abi.Status.CPU_FALLBACK)) out = st;
        }
        self.len = 0;
        return out;
    }
};

/// dispatch + the fallback contract: 0 -> GPU, 1 -> run the CPU runner here,
/// anything else is an error returned to the caller.
fn runKernel(kernel_id: i32, count: usize, runner: *const fn (i32) callconv(.c) void) i32 {
    const ds = abi.dispatch(kernel_id, @intCast(count));
    if (ds == abi.Status.OK) {
        gpu_count += 1;
    } else if (ds == abi.Status.CPU_FALLBACK) {
        cpu_count += 1;
        runner(@intCast(count));
    } else {
        return ds;
    }
    return abi.Status.OK;
}

// ---------------------------------------------------------------------------
// Kernel 1: one step. Straight-line code: loads first (a load saved before a
// store keeps the old value), both new values computed, then both stores.

fn kernelStep(index: i32) callconv(.c) void {
    const cr = abi.readBufferF32(abi.getBuffer(SLOT_CR), index);
    const ci = abi.readBufferF32(abi.getBuffer(SLOT_CI), index);
    const zr = abi.readBufferF32(abi.getBuffer(SLOT_ZR), index);
    const zi = abi.readBufferF32(abi.getBuffer(SLOT_ZI), index);
    const z = stepZ(cr, ci, zr, zi);
    abi.writeBufferF32(abi.getBuffer(SLOT_ZR), index, z.re);
    abi.writeBufferF32(abi.getBuffer(SLOT_ZI), index, z.im);
}

/// CPU runner for kernel 1: bulk-copies the four bound buffers into guest
/// memory, steps every element there and bulk-sets z back ([0, count) only).
fn cpuStep(count: i32) callconv(.c) void {
    const n: usize = @intCast(@as(u32, @bitCast(count)));
    if (n == 0) return;
    if (!ensureCapacity(n)) @trap();
    const hcr = abi.getBuffer(SLOT_CR);
    const hci = abi.getBuffer(SLOT_CI);
    const hzr = abi.getBuffer(SLOT_ZR);
    const hzi = abi.getBuffer(SLOT_ZI);
    if (abi.copyBuffer32(hcr, 0, 0, guest(cr_addr), count) != abi.Status.OK) @trap();
    if (abi.copyBuffer32(hci, 0, 0, guest(ci_addr), count) != abi.Status.OK) @trap();
    if (abi.copyBuffer32(hzr, 0, 0, guest(zr_addr), count) != abi.Status.OK) @trap();
    if (abi.copyBuffer32(hzi, 0, 0, guest(zi_addr), count) != abi.Status.OK) @trap();
    for (f32s(cr_addr, n), f32s(ci_addr, n), f32s(zr_addr, n), f32s(zi_addr, n)) |cr, ci, *zr, *zi| {
        const z = stepZ(cr, ci, zr.*, zi.*);
        zr.* = z.re;
        zi.* = z.im;
    }
    if (abi.setBuffer32(hzr, 0, 0, guest(zr_addr), count) != abi.Status.OK) @trap();
    if (abi.setBuffer32(hzi, 0, 0, guest(zi_addr), count) != abi.Status.OK) @trap();
}

// ---------------------------------------------------------------------------
// Kernel 2: the whole job per pixel: c from the index, then the escape loop.

fn kernelMandel(index: i32) callconv(.c) void {
    const params = abi.getBuffer(SLOT_PARAMS);
    const width: u32 = @bitCast(abi.readBufferU32(params, 0));
    const height: u32 = @bitCast(abi.readBufferU32(params, 1));
    const limit: u32 = @bitCast(abi.readBufferU32(params, 2));
    const i: u32 = @bitCast(index);
    const n = escapeCount(cRe(i % width, @floatFromInt(width)), cIm(i / width, @floatFromInt(height)), limit);
    abi.writeBufferU32(abi.getBuffer(SLOT_COUNTS), index, @bitCast(n));
}

/// CPU runner for kernel 2: the same per pixel in guest memory, then one
/// bulk set of the counts.
fn cpuMandel(count: i32) callconv(.c) void {
    const n: usize = @intCast(@as(u32, @bitCast(count)));
    if (n == 0) return;
    if (!ensureCapacity(n)) @trap();
    var params: [4]u32 = undefined;
    if (abi.copyBuffer32(abi.getBuffer(SLOT_PARAMS), 0, 0, guest(@intFromPtr(&params)), 3) != abi.Status.OK) @trap();
    const width = params[0];
    if (width == 0) @trap(); // as the kernel's i32.rem_u would
    const w: f32 = @floatFromInt(width);
    const h: f32 = @floatFromInt(params[1]);
    for (u32s(counts_addr, n), 0..) |*c, i| {
        c.* = escapeCount(cRe(i % width, w), cIm(i / width, h), params[2]);
    }
    if (abi.setBuffer32(abi.getBuffer(SLOT_COUNTS), 0, 0, guest(counts_addr), count) != abi.Status.OK) @trap();
}

comptime {
    @export(&kernelStep, .{ .name = "wago_gpu.kernel.step" });
    @export(&cpuStep, .{ .name = "wago_gpu.cpu.step" });
    @export(&kernelMandel, .{ .name = "wago_gpu.kernel.mandel" });
    @export(&cpuMandel, .{ .name = "wago_gpu.cpu.mandel" });
}

// ---------------------------------------------------------------------------
// Entry points.

export fn render(width: i32, height: i32, max_iter: i32) i32 {
    const pre = prepare(width, height, max_iter, true);
    if (pre != abi.Status.OK) return pre;
    var bufs = Buffers{};
    return bufs.release(renderSteps(&bufs, last_pixels, @intCast(max_iter)));
}

fn renderSteps(bufs: *Buffers, pixels: usize, max_iter: u32) i32 {
    const count: i32 = @intCast(pixels);
    for (0..4) |_| {
        const st = bufs.create(abi.ElementType.F32, pixels);
        if (st != abi.Status.OK) return st;
    }
    const hcr = bufs.handles[0];
    const hci = bufs.handles[1];
    const hzr = bufs.handles[2];
    const hzi = bufs.handles[3];
    // New buffers are zero-filled (spec §2.1), so z starts at 0 + 0i.
    var st = abi.setBuffer32(hcr, 0, 0, guest(cr_addr), count);
    if (st != abi.Status.OK) return st;
    st = abi.setBuffer32(hci, 0, 0, guest(ci_addr), count);
    if (st != abi.Status.OK) return st;
    for ([_]i32{ SLOT_CR, SLOT_CI, SLOT_ZR, SLOT_ZI }, [_]i32{ hcr, hci, hzr, hzi }) |slot, hd| {
        st = abi.bindBuffer(slot, hd);
        if (st != abi.Status.OK) return st;
    }

    const counts = u32s(counts_addr, pixels);
    @memset(counts, 0);
    var pass: u32 = 1;
    while (pass <= max_iter) : (pass += 1) {
        st = runKernel(KERNEL_STEP, pixels, &cpuStep);
        if (st != abi.Status.OK) return st;
        st = abi.copyBuffer32(hzr, 0, 0, guest(zr_addr), count);
        if (st != abi.Status.OK) return st;
        st = abi.copyBuffer32(hzi, 0, 0, guest(zi_addr), count);
        if (st != abi.Status.OK) return st;
        // A pixel is still alive when it stayed bounded for every earlier pass.
        for (f32s(zr_addr, pixels), f32s(zi_addr, pixels), counts) |zr, zi, *c| {
            if (c.* == pass - 1 and bounded(.{ .re = zr, .im = zi })) c.* = pass;
        }
    }
    writeImage(pixels);
    return abi.Status.OK;
}

export fn render_loop(width: i32, height: i32, max_iter: i32) i32 {
    const pre = prepare(width, height, max_iter, false);
    if (pre != abi.Status.OK) return pre;
    var bufs = Buffers{};
    return bufs.release(renderLoop(&bufs, @intCast(width), @intCast(height), last_pixels, @intCast(max_iter)));
}

var loop_params: [4]u32 = .{ 0, 0, 0, 0 };

fn renderLoop(bufs: *Buffers, width: u32, height: u32, pixels: usize, max_iter: u32) i32 {
    const count: i32 = @intCast(pixels);
    // dispatch needs every bound buffer to cover the count, so the parameter
    // buffer is as long as the image; only its first four elements are set
    var st = bufs.create(abi.ElementType.U32, pixels);
    if (st != abi.Status.OK) return st;
    st = bufs.create(abi.ElementType.U32, pixels);
    if (st != abi.Status.OK) return st;
    const hp = bufs.handles[0];
    const hc = bufs.handles[1];
    loop_params = .{ width, height, max_iter, 0 };
    st = abi.setBuffer32(hp, 0, 0, guest(@intFromPtr(&loop_params)), loop_params.len);
    if (st != abi.Status.OK) return st;
    st = abi.bindBuffer(SLOT_PARAMS, hp);
    if (st != abi.Status.OK) return st;
    st = abi.bindBuffer(SLOT_COUNTS, hc);
    if (st != abi.Status.OK) return st;
    st = runKernel(KERNEL_MANDEL, pixels, &cpuMandel);
    if (st != abi.Status.OK) return st;
    st = abi.copyBuffer32(hc, 0, 0, guest(counts_addr), count);
    if (st != abi.Status.OK) return st;
    writeImage(pixels);
    return abi.Status.OK;
}

export fn render_direct(width: i32, height: i32, max_iter: i32) i32 {
    const pre = prepare(width, height, max_iter, true);
    if (pre != abi.Status.OK) return pre;
    const pixels = last_pixels;
    const limit: u32 = @intCast(max_iter);
    for (f32s(cr_addr, pixels), f32s(ci_addr, pixels), u32s(counts_addr, pixels)) |cr, ci, *c| {
        c.* = escapeCount(cr, ci, limit);
    }
    writeImage(pixels);
    return abi.Status.OK;
}

/// Address of the last image: w*h bytes, min(count, 255), row-major.
export fn image_ptr() i32 {
    return guest(image_addr);
}

/// Address of the last image's escape counts: w*h little-endian u32.
export fn counts_ptr() i32 {
    return guest(counts_addr);
}

/// Pixels in the last image (w*h).
export fn image_len() i32 {
    return @intCast(last_pixels);
}

/// Dispatches of the last render that returned 0 (ran on the GPU).
export fn gpu_dispatches() i32 {
    return gpu_count;
}

/// Dispatches of the last render that returned 1 (the CPU runner ran).
export fn cpu_dispatches() i32 {
    return cpu_count;
}
