// A few of the corpus kernels in standard Go (wasip1, //go:wasmexport), written the way a guest
// author would: math, math/bits, a table and the usual loops. Kernel IDs are the cases of cpuRun,
// the same as in tests/corpus/table.py; slots and types per kernel are listed there.
package main

import (
	"math"
	"math/bits"
)

//go:wasmexport wago_gpu.kernel.saxpy
func saxpy(i int32) {
	x := readBufferF32(getBuffer(0), i)
	y := readBufferF32(getBuffer(1), i)
	writeBufferF32(getBuffer(1), i, 2.5*x+y)
}

//go:wasmexport wago_gpu.kernel.relu
func relu(i int32) {
	x := readBufferF32(getBuffer(0), i)
	if !(x > 0) {
		x = 0
	}
	writeBufferF32(getBuffer(1), i, x)
}

//go:wasmexport wago_gpu.kernel.sigmoid
func sigmoid(i int32) {
	x := float64(readBufferF32(getBuffer(0), i))
	writeBufferF32(getBuffer(1), i, float32(1/(1+math.Exp(-x))))
}

//go:wasmexport wago_gpu.kernel.fnv1a
func fnv1a(i int32) {
	x := readBufferU32(getBuffer(0), i)
	h := uint32(2166136261)
	for k := 0; k < 4; k++ {
		h ^= (x >> (8 * k)) & 0xff
		h *= 16777619
	}
	writeBufferU32(getBuffer(1), i, h)
}

//go:wasmexport wago_gpu.kernel.xorshift32
func xorshift32(i int32) {
	x := readBufferU32(getBuffer(0), i)
	for k := 0; k < 3; k++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
	}
	writeBufferU32(getBuffer(1), i, x)
}

//go:wasmexport wago_gpu.kernel.popcount
func popcount(i int32) {
	writeBufferI32(getBuffer(1), i, int32(bits.OnesCount32(readBufferU32(getBuffer(0), i))))
}

var gammaLUT = [16]uint8{0, 16, 38, 59, 78, 96, 113, 129, 145, 160, 175, 189, 203, 217, 230, 243}

//go:wasmexport wago_gpu.kernel.lut_gamma
func lutGamma(i int32) {
	writeBufferU8(getBuffer(1), i, int32(gammaLUT[readBufferU8(getBuffer(0), i)>>4]))
}

//go:wasmexport wago_gpu.kernel.safe_div
func safeDiv(i int32) {
	a := readBufferI32(getBuffer(0), i)
	b := readBufferI32(getBuffer(1), i)
	var q, r int32
	if b == -1 && a == math.MinInt32 {
		q = math.MinInt32
	} else if b != 0 {
		q, r = a/b, a%b
	}
	writeBufferI32(getBuffer(2), i, q)
	writeBufferI32(getBuffer(3), i, r)
}

// runner is the CPU runner of a kernel: the same work for 0..n-1 through the scalar imports.
func runner(kernel func(int32), n int32) {
	for i := int32(0); i < n; i++ {
		kernel(i)
	}
}

//go:wasmexport wago_gpu.cpu.saxpy
func cpuSaxpy(n int32) { runner(saxpy, n) }

//go:wasmexport wago_gpu.cpu.relu
func cpuRelu(n int32) { runner(relu, n) }

//go:wasmexport wago_gpu.cpu.sigmoid
func cpuSigmoid(n int32) { runner(sigmoid, n) }

//go:wasmexport wago_gpu.cpu.fnv1a
func cpuFnv1a(n int32) { runner(fnv1a, n) }

//go:wasmexport wago_gpu.cpu.xorshift32
func cpuXorshift32(n int32) { runner(xorshift32, n) }

//go:wasmexport wago_gpu.cpu.popcount
func cpuPopcount(n int32) { runner(popcount, n) }

//go:wasmexport wago_gpu.cpu.lut_gamma
func cpuLutGamma(n int32) { runner(lutGamma, n) }

//go:wasmexport wago_gpu.cpu.safe_div
func cpuSafeDiv(n int32) { runner(safeDiv, n) }

// cpuRun is the driver's table of CPU runners, by kernel ID.
func cpuRun(id, n int32) {
	switch id {
	case 1:
		runner(saxpy, n)
	case 2:
		runner(relu, n)
	case 4:
		runner(sigmoid, n)
	case 20:
		runner(fnv1a, n)
	case 22:
		runner(xorshift32, n)
	case 25:
		runner(popcount, n)
	case 28:
		runner(lutGamma, n)
	case 31:
		runner(safeDiv, n)
	}
}
