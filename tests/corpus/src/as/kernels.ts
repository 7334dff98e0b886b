// The corpus kernels in AssemblyScript, written the way a guest author would: Mathf, builtins,
// a StaticArray table and switches. `kernel_<name>` and `cpu_<name>` are exported as
// `wago_gpu.kernel.<name>` and `wago_gpu.cpu.<name>` by exports.mjs (asc has no export renaming).
// Kernel IDs are the cases of cpuRun, the same as in tests/corpus/table.py; slots and types per
// kernel are listed there.
import {
  getBuffer as get, readBufferF16, readBufferF32, readBufferF64, readBufferI16, readBufferI32, readBufferI64,
  readBufferU32, readBufferU8, writeBufferF16, writeBufferF32, writeBufferF64, writeBufferI16, writeBufferI32,
  writeBufferI64, writeBufferI8, writeBufferU16, writeBufferU32, writeBufferU8,
} from "../../../../include/wago_gpu_v1";
import { run } from "./driver";

export { corpus_staging } from "./driver";

export function corpus_run(kernelId: i32, count: i32, layout: i32): i32 {
  return run(kernelId, count, layout, cpuRun);
}

// ---- float activations and polynomials ---------------------------------------------------
export function kernel_saxpy(i: i32): void {
  const x = readBufferF32(get(0), i);
  const y = readBufferF32(get(1), i);
  writeBufferF32(get(1), i, <f32>2.5 * x + y);
}

export function kernel_relu(i: i32): void {
  const x = readBufferF32(get(0), i);
  writeBufferF32(get(1), i, x > 0 ? x : 0);
}

export function kernel_leaky_relu(i: i32): void {
  const x = readBufferF32(get(0), i);
  writeBufferF32(get(1), i, x > 0 ? x : <f32>0.01 * x);
}

export function kernel_sigmoid(i: i32): void {
  const x = readBufferF32(get(0), i);
  writeBufferF32(get(1), i, <f32>1.0 / (<f32>1.0 + Mathf.exp(-x)));
}

export function kernel_tanh_act(i: i32): void {
  writeBufferF32(get(1), i, Mathf.tanh(readBufferF32(get(0), i)));
}

export function kernel_gelu(i: i32): void {
  const x = readBufferF32(get(0), i);
  const u: f32 = <f32>0.7978845608 * (x + <f32>0.044715 * x * x * x);
  writeBufferF32(get(1), i, <f32>0.5 * x * (<f32>1.0 + Mathf.tanh(u)));
}

export function kernel_softplus(i: i32): void {
  const x = readBufferF32(get(0), i);
  writeBufferF32(get(1), i, x > 20 ? x : Mathf.log1p(Mathf.exp(x)));
}

export function kernel_poly5(i: i32): void {
  const x = readBufferF32(get(0), i);
  const p: f32 = ((((<f32>-0.125 * x + <f32>0.75) * x - <f32>1.25) * x + <f32>0.5) * x + <f32>2.0) * x + <f32>0.0625;
  writeBufferF32(get(1), i, p);
}

export function kernel_rational_tanh(i: i32): void {
  const x = readBufferF32(get(0), i);
  writeBufferF32(get(1), i, x * (<f32>27.0 + x * x) / (<f32>27.0 + <f32>9.0 * x * x));
}

export function kernel_clamp_unit(i: i32): void {
  writeBufferF32(get(1), i, Mathf.min(Mathf.max(readBufferF32(get(0), i), -1.0), 1.0));
}

export function kernel_gamma_pow(i: i32): void {
  writeBufferF32(get(1), i, Mathf.pow(readBufferF32(get(0), i), 0.45454545));
}

export function kernel_phase_wrap(i: i32): void {
  writeBufferF32(get(1), i, readBufferF32(get(0), i) % <f32>6.2831855);
}

export function kernel_sine_wave(i: i32): void {
  writeBufferF32(get(1), i, Mathf.sin(readBufferF32(get(0), i)) * <f32>0.5 + <f32>0.5);
}

export function kernel_length2d(i: i32): void {
  const x = readBufferF32(get(0), i);
  const y = readBufferF32(get(1), i);
  writeBufferF32(get(2), i, Mathf.sqrt(x * x + y * y));
}

export function kernel_smoothstep(i: i32): void {
  let t: f32 = (readBufferF32(get(0), i) - <f32>0.25) * <f32>2.0;
  t = t < 0 ? 0 : (t > 1 ? 1 : t);
  writeBufferF32(get(1), i, t * t * (<f32>3.0 - <f32>2.0 * t));
}

export function kernel_fir3(i: i32): void {
  const input = get(0);
  const x0 = readBufferF32(input, i);
  const x1 = readBufferF32(input, i > 0 ? i - 1 : 0);
  const x2 = readBufferF32(input, i > 1 ? i - 2 : 0);
  writeBufferF32(get(1), i, <f32>0.5 * x0 + <f32>0.25 * x1 + <f32>0.25 * x2);
}

// ---- quantisation and conversions --------------------------------------------------------
export function kernel_dequant_u8(i: i32): void {
  const q = readBufferU8(get(0), i);
  writeBufferF32(get(1), i, <f32>(q - 128) * <f32>0.05);
}

export function kernel_quant_i8(i: i32): void {
  let v = Mathf.round(readBufferF32(get(0), i) * <f32>16.0);
  if (v < -128) v = -128;
  if (v > 127) v = 127;
  writeBufferI8(get(1), i, <i32>v);
}

export function kernel_quant_u8_sat(i: i32): void {
  const s = readBufferF32(get(0), i) * <f32>255.0 + <f32>0.5;
  const q: i32 = s <= 0 ? 0 : (s >= 255 ? 255 : <i32>s);
  writeBufferU8(get(1), i, q);
}

export function kernel_to_fixed16(i: i32): void {
  const x = readBufferF32(get(0), i);
  let q: i32;
  if (x >= 32768) q = i32.MAX_VALUE;
  else if (x < -32768) q = i32.MIN_VALUE;
  else q = <i32>(x * <f32>65536.0);
  writeBufferI32(get(1), i, q);
}

export function kernel_f64_horner(i: i32): void {
  const t = <f64>readBufferF32(get(0), i);
  const p = ((0.125 * t - 0.5) * t + 1.25) * t + 0.3333333333333333;
  writeBufferF32(get(1), i, <f32>p);
}

export function kernel_f64_scale(i: i32): void {
  writeBufferF64(get(1), i, readBufferF64(get(0), i) * 1.5 + 0.25);
}

export function kernel_f16_scale(i: i32): void {
  writeBufferF16(get(1), i, readBufferF16(get(0), i) * <f32>0.5 + <f32>1.0);
}

// ---- hashes and bit tricks ---------------------------------------------------------------
export function kernel_fnv1a(i: i32): void {
  const x = readBufferU32(get(0), i);
  let h: u32 = 2166136261;
  for (let k = 0; k < 4; k++) {
    h ^= (x >> (8 * k)) & 0xff;
    h *= 16777619;
  }
  writeBufferU32(get(1), i, h);
}

export function kernel_fmix32(i: i32): void {
  let h = readBufferU32(get(0), i);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  writeBufferU32(get(1), i, h);
}

export function kernel_xorshift32(i: i32): void {
  let x = readBufferU32(get(0), i);
  for (let k = 0; k < 3; k++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
  }
  writeBufferU32(get(1), i, x);
}

export function kernel_fmix64(i: i32): void {
  let k = (<u64>readBufferU32(get(1), i) << 32) | <u64>readBufferU32(get(0), i);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccd;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53;
  k ^= k >> 33;
  writeBufferU32(get(2), i, <u32>k ^ <u32>(k >> 32));
}

export function kernel_pcg_hash(i: i32): void {
  const state = <u64>readBufferU32(get(0), i) * 6364136223846793005 + 1442695040888963407;
  const xorshifted = <u32>(((state >> 18) ^ state) >> 27);
  const rot = <u32>(state >> 59);
  writeBufferU32(get(1), i, rotr<u32>(xorshifted, rot));
}

export function kernel_popcount(i: i32): void {
  writeBufferI32(get(1), i, <i32>popcnt<u32>(readBufferU32(get(0), i)));
}

export function kernel_bit_width(i: i32): void {
  const x = readBufferU32(get(0), i);
  writeBufferI32(get(1), i, x == 0 ? 0 : 32 - <i32>clz<u32>(x));
}

export function kernel_bswap32(i: i32): void {
  writeBufferU32(get(1), i, bswap<u32>(readBufferU32(get(0), i)));
}

const GAMMA_LUT: StaticArray<u8> = [0, 16, 38, 59, 78, 96, 113, 129, 145, 160, 175, 189, 203, 217, 230, 243];

export function kernel_lut_gamma(i: i32): void {
  writeBufferU8(get(1), i, GAMMA_LUT[readBufferU8(get(0), i) >> 4]);
}

export function kernel_switch_op(i: i32): void {
  const a = readBufferI32(get(0), i);
  const b = readBufferI32(get(1), i);
  let r: i32;
  switch (readBufferU8(get(2), i) & 7) {
    case 0: r = a + b; break;
    case 1: r = a - b; break;
    case 2: r = a * b; break;
    case 3: r = a & b; break;
    case 4: r = a | b; break;
    case 5: r = a ^ b; break;
    case 6: r = a << (b & 31); break;
    default: r = a >> (b & 31); break;
  }
  writeBufferI32(get(3), i, r);
}

export function kernel_utf8_len(i: i32): void {
  let n: i32;
  switch (readBufferU8(get(0), i) >> 4) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: n = 1; break;
    case 12: case 13: n = 2; break;
    case 14: n = 3; break;
    case 15: n = 4; break;
    default: n = 0; break;
  }
  writeBufferI32(get(1), i, n);
}

// ---- integer arithmetic ------------------------------------------------------------------
export function kernel_safe_div(i: i32): void {
  const a = readBufferI32(get(0), i);
  const b = readBufferI32(get(1), i);
  let q: i32 = 0;
  let r: i32 = 0;
  if (b == -1 && a == i32.MIN_VALUE) {
    q = i32.MIN_VALUE;
  } else if (b != 0) {
    q = a / b;
    r = a % b;
  }
  writeBufferI32(get(2), i, q);
  writeBufferI32(get(3), i, r);
}

export function kernel_sat_add_i16(i: i32): void {
  const s = readBufferI16(get(0), i) + readBufferI16(get(1), i);
  writeBufferI16(get(2), i, s > 32767 ? 32767 : (s < -32768 ? -32768 : s));
}

export function kernel_mulhi_i32(i: i32): void {
  const p = <i64>readBufferI32(get(0), i) * <i64>readBufferI32(get(1), i);
  writeBufferI32(get(2), i, <i32>(p >> 32));
}

export function kernel_absdiff_u8(i: i32): void {
  const a = readBufferU8(get(0), i);
  const b = readBufferU8(get(1), i);
  writeBufferU8(get(2), i, a > b ? a - b : b - a);
}

export function kernel_gcd(i: i32): void {
  let a = readBufferU32(get(0), i);
  let b = readBufferU32(get(1), i);
  while (b != 0) {
    const t = a % b;
    a = b;
    b = t;
  }
  writeBufferU32(get(2), i, a);
}

export function kernel_collatz(i: i32): void {
  let n = readBufferU32(get(0), i);
  let steps = 0;
  while (n != 1 && steps < 100) {
    n = n & 1 ? 3 * n + 1 : n >> 1;
    steps++;
  }
  writeBufferI32(get(1), i, steps);
}

export function kernel_i64_mix(i: i32): void {
  const a = readBufferI64(get(0), i);
  const b = readBufferI64(get(1), i);
  writeBufferI64(get(2), i, a * 3 + (b >> 7));
}

export function kernel_rgb565(i: i32): void {
  const r = readBufferU8(get(0), i);
  const g = readBufferU8(get(1), i);
  const b = readBufferU8(get(2), i);
  writeBufferU16(get(3), i, ((r >> 3) << 11) | ((g >> 2) << 5) | (b >> 3));
}

const WIDTH = 16;

export function kernel_stencil_2d(i: i32): void {
  const input = get(0);
  const c = readBufferU8(input, i);
  const left = i % WIDTH != 0 ? readBufferU8(input, i - 1) : c;
  const up = i >= WIDTH ? readBufferU8(input, i - WIDTH) : c;
  writeBufferI32(get(1), i, abs(c - left) + abs(c - up));
}

// ---- the CPU runners: the same work for 0..n-1 through the scalar imports ----------------
export function cpu_saxpy(n: i32): void { for (let i = 0; i < n; i++) kernel_saxpy(i); }
export function cpu_relu(n: i32): void { for (let i = 0; i < n; i++) kernel_relu(i); }
export function cpu_leaky_relu(n: i32): void { for (let i = 0; i < n; i++) kernel_leaky_relu(i); }
export function cpu_sigmoid(n: i32): void { for (let i = 0; i < n; i++) kernel_sigmoid(i); }
export function cpu_tanh_act(n: i32): void { for (let i = 0; i < n; i++) kernel_tanh_act(i); }
export function cpu_gelu(n: i32): void { for (let i = 0; i < n; i++) kernel_gelu(i); }
export function cpu_softplus(n: i32): void { for (let i = 0; i < n; i++) kernel_softplus(i); }
export function cpu_poly5(n: i32): void { for (let i = 0; i < n; i++) kernel_poly5(i); }
export function cpu_rational_tanh(n: i32): void { for (let i = 0; i < n; i++) kernel_rational_tanh(i); }
export function cpu_clamp_unit(n: i32): void { for (let i = 0; i < n; i++) kernel_clamp_unit(i); }
export function cpu_gamma_pow(n: i32): void { for (let i = 0; i < n; i++) kernel_gamma_pow(i); }
export function cpu_phase_wrap(n: i32): void { for (let i = 0; i < n; i++) kernel_phase_wrap(i); }
export function cpu_sine_wave(n: i32): void { for (let i = 0; i < n; i++) kernel_sine_wave(i); }
export function cpu_length2d(n: i32): void { for (let i = 0; i < n; i++) kernel_length2d(i); }
export function cpu_smoothstep(n: i32): void { for (let i = 0; i < n; i++) kernel_smoothstep(i); }
export function cpu_fir3(n: i32): void { for (let i = 0; i < n; i++) kernel_fir3(i); }
export function cpu_dequant_u8(n: i32): void { for (let i = 0; i < n; i++) kernel_dequant_u8(i); }
export function cpu_quant_i8(n: i32): void { for (let i = 0; i < n; i++) kernel_quant_i8(i); }
export function cpu_quant_u8_sat(n: i32): void { for (let i = 0; i < n; i++) kernel_quant_u8_sat(i); }
export function cpu_fnv1a(n: i32): void { for (let i = 0; i < n; i++) kernel_fnv1a(i); }
export function cpu_fmix32(n: i32): void { for (let i = 0; i < n; i++) kernel_fmix32(i); }
export function cpu_xorshift32(n: i32): void { for (let i = 0; i < n; i++) kernel_xorshift32(i); }
export function cpu_fmix64(n: i32): void { for (let i = 0; i < n; i++) kernel_fmix64(i); }
export function cpu_pcg_hash(n: i32): void { for (let i = 0; i < n; i++) kernel_pcg_hash(i); }
export function cpu_popcount(n: i32): void { for (let i = 0; i < n; i++) kernel_popcount(i); }
export function cpu_bit_width(n: i32): void { for (let i = 0; i < n; i++) kernel_bit_width(i); }
export function cpu_bswap32(n: i32): void { for (let i = 0; i < n; i++) kernel_bswap32(i); }
export function cpu_lut_gamma(n: i32): void { for (let i = 0; i < n; i++) kernel_lut_gamma(i); }
export function cpu_switch_op(n: i32): void { for (let i = 0; i < n; i++) kernel_switch_op(i); }
export function cpu_utf8_len(n: i32): void { for (let i = 0; i < n; i++) kernel_utf8_len(i); }
export function cpu_safe_div(n: i32): void { for (let i = 0; i < n; i++) kernel_safe_div(i); }
export function cpu_sat_add_i16(n: i32): void { for (let i = 0; i < n; i++) kernel_sat_add_i16(i); }
export function cpu_to_fixed16(n: i32): void { for (let i = 0; i < n; i++) kernel_to_fixed16(i); }
export function cpu_mulhi_i32(n: i32): void { for (let i = 0; i < n; i++) kernel_mulhi_i32(i); }
export function cpu_absdiff_u8(n: i32): void { for (let i = 0; i < n; i++) kernel_absdiff_u8(i); }
export function cpu_gcd(n: i32): void { for (let i = 0; i < n; i++) kernel_gcd(i); }
export function cpu_collatz(n: i32): void { for (let i = 0; i < n; i++) kernel_collatz(i); }
export function cpu_f64_horner(n: i32): void { for (let i = 0; i < n; i++) kernel_f64_horner(i); }
export function cpu_i64_mix(n: i32): void { for (let i = 0; i < n; i++) kernel_i64_mix(i); }
export function cpu_f64_scale(n: i32): void { for (let i = 0; i < n; i++) kernel_f64_scale(i); }
export function cpu_rgb565(n: i32): void { for (let i = 0; i < n; i++) kernel_rgb565(i); }
export function cpu_f16_scale(n: i32): void { for (let i = 0; i < n; i++) kernel_f16_scale(i); }
export function cpu_stencil_2d(n: i32): void { for (let i = 0; i < n; i++) kernel_stencil_2d(i); }

// The driver's table of CPU runners, by kernel ID.
function cpuRun(id: i32, n: i32): void {
  switch (id) {
    case 1: cpu_saxpy(n); break;
    case 2: cpu_relu(n); break;
    case 3: cpu_leaky_relu(n); break;
    case 4: cpu_sigmoid(n); break;
    case 5: cpu_tanh_act(n); break;
    case 6: cpu_gelu(n); break;
    case 7: cpu_softplus(n); break;
    case 8: cpu_poly5(n); break;
    case 9: cpu_rational_tanh(n); break;
    case 10: cpu_clamp_unit(n); break;
    case 11: cpu_gamma_pow(n); break;
    case 12: cpu_phase_wrap(n); break;
    case 13: cpu_sine_wave(n); break;
    case 14: cpu_length2d(n); break;
    case 15: cpu_smoothstep(n); break;
    case 16: cpu_fir3(n); break;
    case 17: cpu_dequant_u8(n); break;
    case 18: cpu_quant_i8(n); break;
    case 19: cpu_quant_u8_sat(n); break;
    case 20: cpu_fnv1a(n); break;
    case 21: cpu_fmix32(n); break;
    case 22: cpu_xorshift32(n); break;
    case 23: cpu_fmix64(n); break;
    case 24: cpu_pcg_hash(n); break;
    case 25: cpu_popcount(n); break;
    case 26: cpu_bit_width(n); break;
    case 27: cpu_bswap32(n); break;
    case 28: cpu_lut_gamma(n); break;
    case 29: cpu_switch_op(n); break;
    case 30: cpu_utf8_len(n); break;
    case 31: cpu_safe_div(n); break;
    case 32: cpu_sat_add_i16(n); break;
    case 33: cpu_to_fixed16(n); break;
    case 34: cpu_mulhi_i32(n); break;
    case 35: cpu_absdiff_u8(n); break;
    case 36: cpu_gcd(n); break;
    case 37: cpu_collatz(n); break;
    case 38: cpu_f64_horner(n); break;
    case 39: cpu_i64_mix(n); break;
    case 40: cpu_f64_scale(n); break;
    case 41: cpu_rgb565(n); break;
    case 42: cpu_f16_scale(n); break;
    case 43: cpu_stencil_2d(n); break;
  }
}
