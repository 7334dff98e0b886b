//! The corpus kernels in Zig, written the way a guest author would: std.math, builtins, wrapping
//! operators for hashes, switches and a const table. Kernel IDs are the positions in `kernels`,
//! the same as in tests/corpus/table.py; slots and types per kernel are listed there.
const std = @import("std");
const abi = @import("wago_gpu_v1"); // the generated include/wago_gpu_v1.zig

comptime {
    _ = @import("driver.zig");
}

const get = abi.getBuffer;

fn readU8(slot: i32, i: i32) u32 {
    return @intCast(abi.readBufferU8(get(slot), i));
}

// ---- float activations and polynomials ---------------------------------------------------
fn saxpy(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    const y = abi.readBufferF32(get(1), i);
    abi.writeBufferF32(get(1), i, 2.5 * x + y);
}

fn relu(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, if (x > 0) x else 0);
}

fn leakyRelu(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, if (x > 0) x else 0.01 * x);
}

fn sigmoid(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, 1.0 / (1.0 + @exp(-x)));
}

fn tanhAct(i: i32) callconv(.c) void {
    abi.writeBufferF32(get(1), i, std.math.tanh(abi.readBufferF32(get(0), i)));
}

fn gelu(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, 0.5 * x * (1.0 + std.math.tanh(0.7978845608 * (x + 0.044715 * x * x * x))));
}

fn softplus(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, if (x > 20.0) x else std.math.log1p(@exp(x)));
}

fn poly5(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    const p = ((((-0.125 * x + 0.75) * x - 1.25) * x + 0.5) * x + 2.0) * x + 0.0625;
    abi.writeBufferF32(get(1), i, p);
}

fn rationalTanh(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    abi.writeBufferF32(get(1), i, x * (27.0 + x * x) / (27.0 + 9.0 * x * x));
}

fn clampUnit(i: i32) callconv(.c) void {
    abi.writeBufferF32(get(1), i, @min(@max(abi.readBufferF32(get(0), i), -1.0), 1.0));
}

fn gammaPow(i: i32) callconv(.c) void {
    abi.writeBufferF32(get(1), i, std.math.pow(f32, abi.readBufferF32(get(0), i), 0.45454545));
}

fn phaseWrap(i: i32) callconv(.c) void {
    abi.writeBufferF32(get(1), i, @rem(abi.readBufferF32(get(0), i), 6.2831855));
}

fn sineWave(i: i32) callconv(.c) void {
    abi.writeBufferF32(get(1), i, @sin(abi.readBufferF32(get(0), i)) * 0.5 + 0.5);
}

fn length2d(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    const y = abi.readBufferF32(get(1), i);
    abi.writeBufferF32(get(2), i, @sqrt(x * x + y * y));
}

fn smoothstep(i: i32) callconv(.c) void {
    const t = std.math.clamp((abi.readBufferF32(get(0), i) - 0.25) * 2.0, 0.0, 1.0);
    abi.writeBufferF32(get(1), i, t * t * (3.0 - 2.0 * t));
}

fn fir3(i: i32) callconv(.c) void {
    const in = get(0);
    const x0 = abi.readBufferF32(in, i);
    const x1 = abi.readBufferF32(in, if (i > 0) i - 1 else 0);
    const x2 = abi.readBufferF32(in, if (i > 1) i - 2 else 0);
    abi.writeBufferF32(get(1), i, 0.5 * x0 + 0.25 * x1 + 0.25 * x2);
}

// ---- quantisation and conversions --------------------------------------------------------
fn dequantU8(i: i32) callconv(.c) void {
    const q = abi.readBufferU8(get(0), i);
    abi.writeBufferF32(get(1), i, @as(f32, @floatFromInt(q - 128)) * 0.05);
}

fn quantI8(i: i32) callconv(.c) void {
    const v = std.math.clamp(@round(abi.readBufferF32(get(0), i) * 16.0), -128.0, 127.0);
    abi.writeBufferI8(get(1), i, @intFromFloat(v));
}

fn quantU8Sat(i: i32) callconv(.c) void {
    const s = abi.readBufferF32(get(0), i) * 255.0 + 0.5;
    const q: i32 = if (s <= 0) 0 else if (s >= 255.0) 255 else @intFromFloat(s);
    abi.writeBufferU8(get(1), i, q);
}

fn toFixed16(i: i32) callconv(.c) void {
    const x = abi.readBufferF32(get(0), i);
    const q: i32 = if (x >= 32768.0)
        std.math.maxInt(i32)
    else if (x < -32768.0)
        std.math.minInt(i32)
    else
        @intFromFloat(x * 65536.0);
    abi.writeBufferI32(get(1), i, q);
}

fn f64Horner(i: i32) callconv(.c) void {
    const t: f64 = abi.readBufferF32(get(0), i);
    const p = ((0.125 * t - 0.5) * t + 1.25) * t + 0.3333333333333333;
    abi.writeBufferF32(get(1), i, @floatCast(p));
}

fn f64Scale(i: i32) callconv(.c) void {
    abi.writeBufferF64(get(1), i, abi.readBufferF64(get(0), i) * 1.5 + 0.25);
}

fn f16Scale(i: i32) callconv(.c) void {
    abi.writeBufferF16(get(1), i, abi.readBufferF16(get(0), i) * 0.5 + 1.0);
}

// ---- hashes and bit tricks ---------------------------------------------------------------
fn fnv1a(i: i32) callconv(.c) void {
    const x = abi.readBufferU32(get(0), i);
    var h: u32 = 2166136261;
    for (0..4) |k| {
        h ^= (x >> @intCast(8 * k)) & 0xff;
        h *%= 16777619;
    }
    abi.writeBufferU32(get(1), i, h);
}

fn fmix32(i: i32) callconv(.c) void {
    var h = abi.readBufferU32(get(0), i);
    h ^= h >> 16;
    h *%= 0x85ebca6b;
    h ^= h >> 13;
    h *%= 0xc2b2ae35;
    h ^= h >> 16;
    abi.writeBufferU32(get(1), i, h);
}

fn xorshift32(i: i32) callconv(.c) void {
    var x = abi.readBufferU32(get(0), i);
    for (0..3) |_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
    }
    abi.writeBufferU32(get(1), i, x);
}

fn fmix64(i: i32) callconv(.c) void {
    var k = (@as(u64, abi.readBufferU32(get(1), i)) << 32) | abi.readBufferU32(get(0), i);
    k ^= k >> 33;
    k *%= 0xff51afd7ed558ccd;
    k ^= k >> 33;
    k *%= 0xc4ceb9fe1a85ec53;
    k ^= k >> 33;
    abi.writeBufferU32(get(2), i, @as(u32, @truncate(k)) ^ @as(u32, @truncate(k >> 32)));
}

fn pcgHash(i: i32) callconv(.c) void {
    const state = @as(u64, abi.readBufferU32(get(0), i)) *% 6364136223846793005 +% 1442695040888963407;
    const xorshifted: u32 = @truncate(((state >> 18) ^ state) >> 27);
    const rot: u32 = @intCast(state >> 59);
    abi.writeBufferU32(get(1), i, std.math.rotr(u32, xorshifted, rot));
}

fn popcount(i: i32) callconv(.c) void {
    abi.writeBufferI32(get(1), i, @popCount(abi.readBufferU32(get(0), i)));
}

fn bitWidth(i: i32) callconv(.c) void {
    const x = abi.readBufferU32(get(0), i);
    abi.writeBufferI32(get(1), i, if (x == 0) 0 else 32 - @as(i32, @clz(x)));
}

fn bswap32(i: i32) callconv(.c) void {
    abi.writeBufferU32(get(1), i, @byteSwap(abi.readBufferU32(get(0), i)));
}

const gamma_lut = [16]u8{ 0, 16, 38, 59, 78, 96, 113, 129, 145, 160, 175, 189, 203, 217, 230, 243 };

fn lutGamma(i: i32) callconv(.c) void {
    abi.writeBufferU8(get(1), i, gamma_lut[readU8(0, i) >> 4]);
}

fn switchOp(i: i32) callconv(.c) void {
    const a: u32 = @bitCast(abi.readBufferI32(get(0), i));
    const b: u32 = @bitCast(abi.readBufferI32(get(1), i));
    const shift: u5 = @truncate(b);
    const r: u32 = switch (readU8(2, i) & 7) {
        0 => a +% b,
        1 => a -% b,
        2 => a *% b,
        3 => a & b,
        4 => a | b,
        5 => a ^ b,
        6 => a << shift,
        else => @bitCast(@as(i32, @bitCast(a)) >> shift),
    };
    abi.writeBufferI32(get(3), i, @bitCast(r));
}

fn utf8Len(i: i32) callconv(.c) void {
    const n: i32 = switch (readU8(0, i) >> 4) {
        0...7 => 1,
        12, 13 => 2,
        14 => 3,
        15 => 4,
        else => 0,
    };
    abi.writeBufferI32(get(1), i, n);
}

// ---- integer arithmetic ------------------------------------------------------------------
fn safeDiv(i: i32) callconv(.c) void {
    const a = abi.readBufferI32(get(0), i);
    const b = abi.readBufferI32(get(1), i);
    var q: i32 = 0;
    var r: i32 = 0;
    if (b == -1 and a == std.math.minInt(i32)) {
        q = std.math.minInt(i32);
    } else if (b != 0) {
        q = @divTrunc(a, b);
        r = @rem(a, b);
    }
    abi.writeBufferI32(get(2), i, q);
    abi.writeBufferI32(get(3), i, r);
}

fn satAddI16(i: i32) callconv(.c) void {
    const s = abi.readBufferI16(get(0), i) + abi.readBufferI16(get(1), i);
    abi.writeBufferI16(get(2), i, std.math.clamp(s, -32768, 32767));
}

fn mulhiI32(i: i32) callconv(.c) void {
    const p = @as(i64, abi.readBufferI32(get(0), i)) * abi.readBufferI32(get(1), i);
    abi.writeBufferI32(get(2), i, @truncate(p >> 32));
}

fn absdiffU8(i: i32) callconv(.c) void {
    const a = abi.readBufferU8(get(0), i);
    const b = abi.readBufferU8(get(1), i);
    abi.writeBufferU8(get(2), i, if (a > b) a - b else b - a);
}

fn gcd(i: i32) callconv(.c) void {
    var a = abi.readBufferU32(get(0), i);
    var b = abi.readBufferU32(get(1), i);
    while (b != 0) {
        const t = a % b;
        a = b;
        b = t;
    }
    abi.writeBufferU32(get(2), i, a);
}

fn collatz(i: i32) callconv(.c) void {
    var n = abi.readBufferU32(get(0), i);
    var steps: i32 = 0;
    while (n != 1 and steps < 100) : (steps += 1) {
        n = if (n & 1 != 0) 3 *% n +% 1 else n >> 1;
    }
    abi.writeBufferI32(get(1), i, steps);
}

fn i64Mix(i: i32) callconv(.c) void {
    const a = abi.readBufferI64(get(0), i);
    const b = abi.readBufferI64(get(1), i);
    abi.writeBufferI64(get(2), i, a *% 3 +% (b >> 7));
}

fn rgb565(i: i32) callconv(.c) void {
    const r = readU8(0, i);
    const g = readU8(1, i);
    const b = readU8(2, i);
    abi.writeBufferU16(get(3), i, @intCast(((r >> 3) << 11) | ((g >> 2) << 5) | (b >> 3)));
}

fn stencil2d(i: i32) callconv(.c) void {
    const width = 16;
    const in = get(0);
    const c = abi.readBufferU8(in, i);
    const left = if (@rem(i, width) != 0) abi.readBufferU8(in, i - 1) else c;
    const up = if (i >= width) abi.readBufferU8(in, i - width) else c;
    abi.writeBufferI32(get(1), i, @intCast(@abs(c - left) + @abs(c - up)));
}

// ---- the table: exports and the driver's CPU runners -------------------------------------
const Kernel = struct { name: []const u8, body: fn (i32) callconv(.c) void };

const kernels = [_]Kernel{
    .{ .name = "saxpy", .body = saxpy },                 .{ .name = "relu", .body = relu },
    .{ .name = "leaky_relu", .body = leakyRelu },        .{ .name = "sigmoid", .body = sigmoid },
    .{ .name = "tanh_act", .body = tanhAct },            .{ .name = "gelu", .body = gelu },
    .{ .name = "softplus", .body = softplus },           .{ .name = "poly5", .body = poly5 },
    .{ .name = "rational_tanh", .body = rationalTanh },  .{ .name = "clamp_unit", .body = clampUnit },
    .{ .name = "gamma_pow", .body = gammaPow },          .{ .name = "phase_wrap", .body = phaseWrap },
    .{ .name = "sine_wave", .body = sineWave },          .{ .name = "length2d", .body = length2d },
    .{ .name = "smoothstep", .body = smoothstep },       .{ .name = "fir3", .body = fir3 },
    .{ .name = "dequant_u8", .body = dequantU8 },        .{ .name = "quant_i8", .body = quantI8 },
    .{ .name = "quant_u8_sat", .body = quantU8Sat },     .{ .name = "fnv1a", .body = fnv1a },
    .{ .name = "fmix32", .body = fmix32 },               .{ .name = "xorshift32", .body = xorshift32 },
    .{ .name = "fmix64", .body = fmix64 },               .{ .name = "pcg_hash", .body = pcgHash },
    .{ .name = "popcount", .body = popcount },           .{ .name = "bit_width", .body = bitWidth },
    .{ .name = "bswap32", .body = bswap32 },             .{ .name = "lut_gamma", .body = lutGamma },
    .{ .name = "switch_op", .body = switchOp },          .{ .name = "utf8_len", .body = utf8Len },
    .{ .name = "safe_div", .body = safeDiv },            .{ .name = "sat_add_i16", .body = satAddI16 },
    .{ .name = "to_fixed16", .body = toFixed16 },        .{ .name = "mulhi_i32", .body = mulhiI32 },
    .{ .name = "absdiff_u8", .body = absdiffU8 },        .{ .name = "gcd", .body = gcd },
    .{ .name = "collatz", .body = collatz },             .{ .name = "f64_horner", .body = f64Horner },
    .{ .name = "i64_mix", .body = i64Mix },              .{ .name = "f64_scale", .body = f64Scale },
    .{ .name = "rgb565", .body = rgb565 },               .{ .name = "f16_scale", .body = f16Scale },
    .{ .name = "stencil_2d", .body = stencil2d },
};

/// The CPU runner of a kernel: the same work for 0..n-1 through the scalar imports.
fn runnerOf(comptime body: fn (i32) callconv(.c) void) fn (i32) callconv(.c) void {
    return struct {
        fn run(n: i32) callconv(.c) void {
            var i: i32 = 0;
            while (i < n) : (i += 1) body(i);
        }
    }.run;
}

comptime {
    for (kernels) |k| {
        const body = k.body;
        @export(&body, .{ .name = "wago_gpu.kernel." ++ k.name });
        @export(&runnerOf(k.body), .{ .name = "wago_gpu.cpu." ++ k.name });
    }
}

/// Runs kernel `id`'s CPU runner over n elements; the driver calls it on status 1.
pub fn cpuRun(id: i32, n: i32) void {
    inline for (kernels, 1..) |k, kernel_id| {
        if (id == kernel_id) runnerOf(k.body)(n);
    }
}
