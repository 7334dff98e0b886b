/* The corpus kernels in C, written the way a guest author would: plain C with libm, static tables
 * and switches. Kernel IDs are the positions in CORPUS_KERNELS, the same as in tests/corpus/table.py.
 * Slots and types per kernel: see table.py. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "wago_gpu.h"

#define CORPUS_KERNELS(X) \
    X(1, saxpy) X(2, relu) X(3, leaky_relu) X(4, sigmoid) X(5, tanh_act) X(6, gelu) X(7, softplus) \
    X(8, poly5) X(9, rational_tanh) X(10, clamp_unit) X(11, gamma_pow) X(12, phase_wrap) \
    X(13, sine_wave) X(14, length2d) X(15, smoothstep) X(16, fir3) X(17, dequant_u8) X(18, quant_i8) \
    X(19, quant_u8_sat) X(20, fnv1a) X(21, fmix32) X(22, xorshift32) X(23, fmix64) X(24, pcg_hash) \
    X(25, popcount) X(26, bit_width) X(27, bswap32) X(28, lut_gamma) X(29, switch_op) X(30, utf8_len) \
    X(31, safe_div) X(32, sat_add_i16) X(33, to_fixed16) X(34, mulhi_i32) X(35, absdiff_u8) X(36, gcd) \
    X(37, collatz) X(38, f64_horner) X(39, i64_mix) X(40, f64_scale) X(41, rgb565) X(42, f16_scale) \
    X(43, stencil_2d)

/* ---- float activations and polynomials ---------------------------------------------------- */
KERNEL(saxpy) {
    float x = readBufferF32(getBuffer(0), i);
    float y = readBufferF32(getBuffer(1), i);
    writeBufferF32(getBuffer(1), i, 2.5f * x + y);
}

KERNEL(relu) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, x > 0.0f ? x : 0.0f);
}

KERNEL(leaky_relu) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, x > 0.0f ? x : 0.01f * x);
}

KERNEL(sigmoid) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, 1.0f / (1.0f + expf(-x)));
}

KERNEL(tanh_act) {
    writeBufferF32(getBuffer(1), i, tanhf(readBufferF32(getBuffer(0), i)));
}

KERNEL(gelu) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))));
}

KERNEL(softplus) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, x > 20.0f ? x : log1pf(expf(x)));
}

KERNEL(poly5) {
    float x = readBufferF32(getBuffer(0), i);
    float p = ((((-0.125f * x + 0.75f) * x - 1.25f) * x + 0.5f) * x + 2.0f) * x + 0.0625f;
    writeBufferF32(getBuffer(1), i, p);
}

KERNEL(rational_tanh) {
    float x = readBufferF32(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, x * (27.0f + x * x) / (27.0f + 9.0f * x * x));
}

KERNEL(clamp_unit) {
    writeBufferF32(getBuffer(1), i, fminf(fmaxf(readBufferF32(getBuffer(0), i), -1.0f), 1.0f));
}

KERNEL(gamma_pow) {
    writeBufferF32(getBuffer(1), i, powf(readBufferF32(getBuffer(0), i), 0.45454545f));
}

KERNEL(phase_wrap) {
    writeBufferF32(getBuffer(1), i, fmodf(readBufferF32(getBuffer(0), i), 6.2831855f));
}

KERNEL(sine_wave) {
    writeBufferF32(getBuffer(1), i, sinf(readBufferF32(getBuffer(0), i)) * 0.5f + 0.5f);
}

KERNEL(length2d) {
    float x = readBufferF32(getBuffer(0), i);
    float y = readBufferF32(getBuffer(1), i);
    writeBufferF32(getBuffer(2), i, sqrtf(x * x + y * y));
}

KERNEL(smoothstep) {
    float t = (readBufferF32(getBuffer(0), i) - 0.25f) * 2.0f;
    t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    writeBufferF32(getBuffer(1), i, t * t * (3.0f - 2.0f * t));
}

KERNEL(fir3) {
    int32_t in = getBuffer(0);
    float x0 = readBufferF32(in, i);
    float x1 = readBufferF32(in, i > 0 ? i - 1 : 0);
    float x2 = readBufferF32(in, i > 1 ? i - 2 : 0);
    writeBufferF32(getBuffer(1), i, 0.5f * x0 + 0.25f * x1 + 0.25f * x2);
}

/* ---- quantisation and conversions --------------------------------------------------------- */
KERNEL(dequant_u8) {
    int32_t q = readBufferU8(getBuffer(0), i);
    writeBufferF32(getBuffer(1), i, (float)(q - 128) * 0.05f);
}

KERNEL(quant_i8) {
    float v = roundf(readBufferF32(getBuffer(0), i) * 16.0f);
    if (v < -128.0f) v = -128.0f;
    if (v > 127.0f) v = 127.0f;
    writeBufferI8(getBuffer(1), i, (int32_t)v);
}

KERNEL(quant_u8_sat) {
    float s = readBufferF32(getBuffer(0), i) * 255.0f + 0.5f;
    int32_t q = s <= 0.0f ? 0 : (s >= 255.0f ? 255 : (int32_t)s);
    writeBufferU8(getBuffer(1), i, q);
}

KERNEL(to_fixed16) {
    float x = readBufferF32(getBuffer(0), i);
    int32_t q;
    if (x >= 32768.0f) q = INT32_MAX;
    else if (x < -32768.0f) q = INT32_MIN;
    else q = (int32_t)(x * 65536.0f);
    writeBufferI32(getBuffer(1), i, q);
}

KERNEL(f64_horner) {
    double t = readBufferF32(getBuffer(0), i);
    double p = ((0.125 * t - 0.5) * t + 1.25) * t + 0.3333333333333333;
    writeBufferF32(getBuffer(1), i, (float)p);
}

KERNEL(f64_scale) {
    writeBufferF64(getBuffer(1), i, readBufferF64(getBuffer(0), i) * 1.5 + 0.25);
}

KERNEL(f16_scale) {
    writeBufferF16(getBuffer(1), i, readBufferF16(getBuffer(0), i) * 0.5f + 1.0f);
}

/* ---- hashes and bit tricks ---------------------------------------------------------------- */
KERNEL(fnv1a) {
    uint32_t x = readBufferU32(getBuffer(0), i);
    uint32_t h = 2166136261u;
    for (int k = 0; k < 4; k++) {
        h ^= (x >> (8 * k)) & 0xffu;
        h *= 16777619u;
    }
    writeBufferU32(getBuffer(1), i, h);
}

KERNEL(fmix32) {
    uint32_t h = readBufferU32(getBuffer(0), i);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    writeBufferU32(getBuffer(1), i, h);
}

KERNEL(xorshift32) {
    uint32_t x = readBufferU32(getBuffer(0), i);
    for (int k = 0; k < 3; k++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
    }
    writeBufferU32(getBuffer(1), i, x);
}

KERNEL(fmix64) {
    uint64_t k = ((uint64_t)readBufferU32(getBuffer(1), i) << 32) | readBufferU32(getBuffer(0), i);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    writeBufferU32(getBuffer(2), i, (uint32_t)k ^ (uint32_t)(k >> 32));
}

KERNEL(pcg_hash) {
    uint64_t state = (uint64_t)readBufferU32(getBuffer(0), i) * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t xorshifted = (uint32_t)(((state >> 18) ^ state) >> 27);
    uint32_t rot = (uint32_t)(state >> 59);
    writeBufferU32(getBuffer(1), i, (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31)));
}

KERNEL(popcount) {
    writeBufferI32(getBuffer(1), i, __builtin_popcount(readBufferU32(getBuffer(0), i)));
}

KERNEL(bit_width) {
    uint32_t x = readBufferU32(getBuffer(0), i);
    writeBufferI32(getBuffer(1), i, x == 0 ? 0 : 32 - __builtin_clz(x));
}

KERNEL(bswap32) {
    writeBufferU32(getBuffer(1), i, __builtin_bswap32(readBufferU32(getBuffer(0), i)));
}

static const uint8_t gamma_lut[16] = {0, 16, 38, 59, 78, 96, 113, 129, 145, 160, 175, 189, 203, 217, 230, 243};

KERNEL(lut_gamma) {
    writeBufferU8(getBuffer(1), i, gamma_lut[readBufferU8(getBuffer(0), i) >> 4]);
}

KERNEL(switch_op) {
    uint32_t a = (uint32_t)readBufferI32(getBuffer(0), i);
    uint32_t b = (uint32_t)readBufferI32(getBuffer(1), i);
    uint32_t r;
    switch (readBufferU8(getBuffer(2), i) & 7) {
    case 0: r = a + b; break;
    case 1: r = a - b; break;
    case 2: r = a * b; break;
    case 3: r = a & b; break;
    case 4: r = a | b; break;
    case 5: r = a ^ b; break;
    case 6: r = a << (b & 31); break;
    default: r = (uint32_t)((int32_t)a >> (b & 31)); break;
    }
    writeBufferI32(getBuffer(3), i, (int32_t)r);
}

KERNEL(utf8_len) {
    int32_t n;
    switch (readBufferU8(getBuffer(0), i) >> 4) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: n = 1; break;
    case 12: case 13: n = 2; break;
    case 14: n = 3; break;
    case 15: n = 4; break;
    default: n = 0; break;
    }
    writeBufferI32(getBuffer(1), i, n);
}

/* ---- integer arithmetic ------------------------------------------------------------------- */
KERNEL(safe_div) {
    int32_t a = readBufferI32(getBuffer(0), i);
    int32_t b = readBufferI32(getBuffer(1), i);
    int32_t q = 0, r = 0;
    if (b == -1 && a == INT32_MIN) {
        q = INT32_MIN;
    } else if (b != 0) {
        q = a / b;
        r = a % b;
    }
    writeBufferI32(getBuffer(2), i, q);
    writeBufferI32(getBuffer(3), i, r);
}

KERNEL(sat_add_i16) {
    int32_t s = readBufferI16(getBuffer(0), i) + readBufferI16(getBuffer(1), i);
    writeBufferI16(getBuffer(2), i, s > 32767 ? 32767 : (s < -32768 ? -32768 : s));
}

KERNEL(mulhi_i32) {
    int64_t p = (int64_t)readBufferI32(getBuffer(0), i) * readBufferI32(getBuffer(1), i);
    writeBufferI32(getBuffer(2), i, (int32_t)(p >> 32));
}

KERNEL(absdiff_u8) {
    int32_t a = readBufferU8(getBuffer(0), i);
    int32_t b = readBufferU8(getBuffer(1), i);
    writeBufferU8(getBuffer(2), i, a > b ? a - b : b - a);
}

KERNEL(gcd) {
    uint32_t a = readBufferU32(getBuffer(0), i);
    uint32_t b = readBufferU32(getBuffer(1), i);
    while (b != 0) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    writeBufferU32(getBuffer(2), i, a);
}

KERNEL(collatz) {
    uint32_t n = readBufferU32(getBuffer(0), i);
    int32_t steps = 0;
    while (n != 1 && steps < 100) {
        n = (n & 1) ? 3 * n + 1 : n >> 1;
        steps++;
    }
    writeBufferI32(getBuffer(1), i, steps);
}

KERNEL(i64_mix) {
    int64_t a = readBufferI64(getBuffer(0), i);
    int64_t b = readBufferI64(getBuffer(1), i);
    writeBufferI64(getBuffer(2), i, (int64_t)((uint64_t)a * 3u + (uint64_t)(b >> 7)));
}

KERNEL(rgb565) {
    uint32_t r = (uint32_t)readBufferU8(getBuffer(0), i);
    uint32_t g = (uint32_t)readBufferU8(getBuffer(1), i);
    uint32_t b = (uint32_t)readBufferU8(getBuffer(2), i);
    writeBufferU16(getBuffer(3), i, (int32_t)(((r >> 3) << 11) | ((g >> 2) << 5) | (b >> 3)));
}

KERNEL(stencil_2d) {
    enum { WIDTH = 16 };
    int32_t in = getBuffer(0);
    int32_t c = readBufferU8(in, i);
    int32_t left = i % WIDTH != 0 ? readBufferU8(in, i - 1) : c;
    int32_t up = i >= WIDTH ? readBufferU8(in, i - WIDTH) : c;
    writeBufferI32(getBuffer(1), i, abs(c - left) + abs(c - up));
}

/* ---- the CPU runners and the driver's table of them --------------------------------------- */
CORPUS_KERNELS(CPU_RUNNER)

#define CPU_CASE(id, name) case id: cpu_##name(n); break;

void corpus_cpu(int32_t id, int32_t n) {
    switch (id) { CORPUS_KERNELS(CPU_CASE) }
}
