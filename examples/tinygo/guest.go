// Command guest is the wagogpu "double" example guest written in TinyGo.
//
// It imports the wago_gpu_v1 buffer ABI, exports the kernel
// wago_gpu.kernel.double (B[i] = 2 * A[i]) with its CPU runner
// wago_gpu.cpu.double, and exports run(), which drives one complete dispatch:
// create two 4-element F32 buffers, upload [1 2 3 4], bind slot 0 (input) and
// slot 1 (output), dispatch kernel ID 1, run the CPU runner on status 1, copy
// the output back, check it is [2 4 6 8] and free both buffers.
//
// run() returns 0 when the kernel ran on the GPU, 1 when the CPU runner ran,
// the ABI status (2..12) of the first import that failed, or 99 when the
// copied-back output is wrong.
//
// Build (TinyGo 0.34 or newer for //go:wasmexport; the wago-gpu reference
// used 0.42.0 with exactly these flags):
//
//	tinygo build -target=wasm-unknown -scheduler=none -panic=trap \
//	  -gc=leaking -opt=2 -no-debug -o examples/tinygo/guest.wasm \
//	  examples/tinygo/guest.go examples/tinygo/wago_gpu_v1.go
//
// A host calls the module's _initialize export (when present) before run.
// Host configuration (Python):
//
//	KernelConfig(1, "wago_gpu.kernel.double", "wago_gpu.cpu.double",
//	    bindings=[BindingConfig(0, ElementType.F32, Access.READ),
//	              BindingConfig(1, ElementType.F32, Access.WRITE)],
//	    relaxed_float=True)
//
// Standard Go cannot declare an import with two results, so buffers are made
// with createBufferPacked, which returns the status in the high 32 bits and
// the handle in the low 32 bits of one i64.
package main

import "unsafe"

// The wago_gpu_v1 imports (createBufferPacked, getBuffer, readBufferF32, ...) are declared in
// wago_gpu_v1.go, generated from the ABI table by tools/gen_guest_headers.py.

const (
	kernelDoubleID int32 = 1
	slotIn         int32 = 0
	slotOut        int32 = 1
	elements       int32 = 4
	resultMismatch int32 = 99
)

var (
	input  = [4]float32{1, 2, 3, 4}
	output [4]float32
)

// kernelDouble is the GPU kernel for one element. Keep it inside the GPU
// subset: constant slot numbers, the index parameter passed on unchanged and
// nothing but an f32 multiply.
//
//go:wasmexport wago_gpu.kernel.double
func kernelDouble(index int32) {
	writeBufferF32(getBuffer(slotOut), index, readBufferF32(getBuffer(slotIn), index)*2)
}

// cpuDouble is the CPU runner: the same work for 0..count-1 through the
// scalar imports.
//
//go:wasmexport wago_gpu.cpu.double
func cpuDouble(count int32) {
	doubleAll(count)
}

func doubleAll(count int32) {
	for i := int32(0); i < count; i++ {
		writeBufferF32(getBuffer(slotOut), i, readBufferF32(getBuffer(slotIn), i)*2)
	}
}

func guestAddress(p *float32) int32 {
	return int32(uintptr(unsafe.Pointer(p)))
}

func unpack(packed int64) (handle, status int32) {
	bits := uint64(packed)
	return int32(uint32(bits)), int32(uint32(bits >> 32))
}

func runWith(a, b int32) int32 {
	if st := setBuffer32(a, 0, 0, guestAddress(&input[0]), elements); st != StatusOk {
		return st
	}
	if st := bindBuffer(slotIn, a); st != StatusOk {
		return st
	}
	if st := bindBuffer(slotOut, b); st != StatusOk {
		return st
	}
	ds := dispatch(kernelDoubleID, elements)
	switch ds {
	case StatusOk:
	case StatusCpuFallback:
		doubleAll(elements)
	default:
		return ds
	}
	if st := copyBuffer32(b, 0, 0, guestAddress(&output[0]), elements); st != StatusOk {
		return st
	}
	for i, v := range output {
		if v != float32(2*(i+1)) {
			return resultMismatch
		}
	}
	return ds
}

//go:wasmexport run
func run() int32 {
	output = [4]float32{}
	a, st := unpack(createBufferPacked(TypeF32, elements))
	if st != StatusOk {
		return st
	}
	b, st := unpack(createBufferPacked(TypeF32, elements))
	if st != StatusOk {
		freeBuffer(a)
		return st
	}
	result := runWith(a, b)
	fa := freeBuffer(a)
	fb := freeBuffer(b)
	if result != StatusOk && result != StatusCpuFallback {
		return result
	}
	if fa != StatusOk {
		return fa
	}
	if fb != StatusOk {
		return fb
	}
	return result
}

func main() {}
