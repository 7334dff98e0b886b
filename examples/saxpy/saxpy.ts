// SAXPY guest (AssemblyScript): y := A*x + y over n f32 elements, A = 2.5; the same exports and
// return codes as saxpy.wat (see there). Built by examples/guests/build.sh with the pinned asc:
//
//   asc saxpy.ts -O3 --runtime stub --noAssert --transform ./as/dotted-exports.mjs -o saxpy_as.wasm
//
// AssemblyScript exports must be identifiers: as/dotted-exports.mjs renames the exported functions
// wago_gpu__kernel__saxpy and wago_gpu__cpu__saxpy to wago_gpu.kernel.saxpy and wago_gpu.cpu.saxpy.

// AssemblyScript cannot declare an import with two results: buffers come from createBufferPacked.
// The imports: the generated include/wago_gpu_v1.ts (tools/gen_guest_headers.py).
import {
  bindBuffer, copyBuffer32, createBufferPacked, dispatch, freeBuffer, getBuffer, readBufferF32, setBuffer32,
  TYPE_F32, writeBufferF32,
} from "../../include/wago_gpu_v1";

const KERNEL_SAXPY: i32 = 1;
const SLOT_X: i32 = 0;
const SLOT_Y: i32 = 1;
const MAX_N: i32 = 4096;
const WRONG: i32 = 99;
const BAD_N: i32 = 100;
const A: f32 = 2.5;

// Static guest memory for x and y (the stub runtime never allocates on its own).
const X: usize = memory.data(MAX_N * 4);
const Y: usize = memory.data(MAX_N * 4);

// The kernel: one element. Constant slots, the index unchanged, f32 arithmetic only.
export function wago_gpu__kernel__saxpy(i: i32): void {
  writeBufferF32(getBuffer(SLOT_Y), i, A * readBufferF32(getBuffer(SLOT_X), i) + readBufferF32(getBuffer(SLOT_Y), i));
}

// The CPU runner: the kernel for every index below n.
export function wago_gpu__cpu__saxpy(n: i32): void {
  for (let i = 0; i < n; i++) wago_gpu__kernel__saxpy(i);
}

export function result_ptr(): i32 {
  return <i32>Y;
}

// Everything between creating and freeing the buffers; the first failing status, else dispatch's.
function job(hx: i32, hy: i32, n: i32): i32 {
  let st = setBuffer32(hx, 0, 0, <i32>X, n);
  if (st != 0) return st;
  st = setBuffer32(hy, 0, 0, <i32>Y, n);
  if (st != 0) return st;
  st = bindBuffer(SLOT_X, hx);
  if (st != 0) return st;
  st = bindBuffer(SLOT_Y, hy);
  if (st != 0) return st;
  const ran = dispatch(KERNEL_SAXPY, n); // 0: GPU; 1: nothing committed, run the CPU runner
  if (ran == 1) wago_gpu__cpu__saxpy(n);
  else if (ran != 0) return ran;
  st = copyBuffer32(hy, 0, 0, <i32>Y, n);
  if (st != 0) return st;
  for (let i = 0; i < n; i++) {
    if (load<f32>(Y + (<usize>i << 2)) != A * <f32>i + <f32>(n - i)) return WRONG;
  }
  return ran;
}

export function run(n: i32): i32 {
  if (n < 1 || n > MAX_N) return BAD_N;
  for (let i = 0; i < n; i++) {
    store<f32>(X + (<usize>i << 2), <f32>i);
    store<f32>(Y + (<usize>i << 2), <f32>(n - i));
  }
  // packed: status in the high 32 bits, the handle in the low 32 bits
  const px = createBufferPacked(TYPE_F32, n);
  if (px >> 32 != 0) return <i32>(px >> 32);
  const py = createBufferPacked(TYPE_F32, n);
  if (py >> 32 != 0) {
    freeBuffer(<i32>px);
    return <i32>(py >> 32);
  }
  const status = job(<i32>px, <i32>py, n);
  freeBuffer(<i32>px);
  freeBuffer(<i32>py);
  return status;
}
