// The corpus driver, the same in every language: the host writes each slot's inputs into the
// staging area, corpus_run creates one buffer per declared slot, uploads and binds it,
// dispatches, runs the kernel's CPU runner when dispatch answers 1, copies every buffer back into
// the staging area and frees it. It returns the dispatch status (0 GPU, 1 CPU runner) or the
// status of the first import that failed.
import { bindBuffer, copyBuffer32, createBufferPacked, dispatch, freeBuffer, setBuffer32 } from "../../../../include/wago_gpu_v1";

const SLOTS = 8;
const MAX_ELEMENTS = 1024;
const SLOT_BYTES = 8 * MAX_ELEMENTS; // room for the widest element type
const STATUS_OK = 0;
const STATUS_CPU_FALLBACK = 1;
const STATUS_INVALID_RANGE = 3;

const staging = memory.data(SLOTS * SLOT_BYTES);
const handles = memory.data(SLOTS * 4);

export function corpus_staging(): i32 {
  return <i32>staging;
}

function slotAddress(slot: i32): i32 {
  return <i32>staging + slot * SLOT_BYTES;
}

function handleOf(slot: i32): i32 {
  return load<i32>(handles + <usize>(slot * 4));
}

// Creates, fills and binds one slot's buffer, remembering its handle.
function prepare(slot: i32, elementType: i32, count: i32): i32 {
  const packed = createBufferPacked(elementType, count);
  const status = <i32>(packed >>> 32);
  if (status != STATUS_OK) return status;
  const handle = <i32>packed;
  store<i32>(handles + <usize>(slot * 4), handle);
  const set = setBuffer32(handle, 0, 0, slotAddress(slot), count);
  if (set != STATUS_OK) return set;
  return bindBuffer(slot, handle);
}

function runBound(kernelId: i32, count: i32, cpuRun: (id: i32, n: i32) => void): i32 {
  const status = dispatch(kernelId, count);
  if (status == STATUS_CPU_FALLBACK) cpuRun(kernelId, count);
  else if (status != STATUS_OK) return status;
  for (let slot = 0; slot < SLOTS; slot++) {
    if (handleOf(slot) == 0) continue;
    const copied = copyBuffer32(handleOf(slot), 0, 0, slotAddress(slot), count);
    if (copied != STATUS_OK) return copied;
  }
  return status;
}

export function run(kernelId: i32, count: i32, layout: i32, cpuRun: (id: i32, n: i32) => void): i32 {
  if (count < 0 || count > MAX_ELEMENTS) return STATUS_INVALID_RANGE;
  memory.fill(handles, 0, SLOTS * 4);
  let status = STATUS_OK;
  for (let slot = 0; slot < SLOTS && status == STATUS_OK; slot++) {
    const elementType = (layout >>> (4 * slot)) & 15;
    if (elementType != 0) status = prepare(slot, elementType, count);
  }
  if (status == STATUS_OK) status = runBound(kernelId, count, cpuRun);
  for (let slot = 0; slot < SLOTS; slot++) {
    if (handleOf(slot) != 0) freeBuffer(handleOf(slot));
  }
  return status;
}
