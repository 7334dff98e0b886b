// The wago_gpu_v1 imports the corpus guest uses (names and signatures as in abi_v1.json).
package main

//go:wasmimport wago_gpu_v1 createBufferPacked
func createBufferPacked(elementType, count int32) int64

//go:wasmimport wago_gpu_v1 freeBuffer
func freeBuffer(handle int32) int32

//go:wasmimport wago_gpu_v1 bindBuffer
func bindBuffer(slot, handle int32) int32

//go:wasmimport wago_gpu_v1 dispatch
func dispatch(kernelID, count int32) int32

//go:wasmimport wago_gpu_v1 setBuffer32
func setBuffer32(handle, offset, memory, guest, count int32) int32

//go:wasmimport wago_gpu_v1 copyBuffer32
func copyBuffer32(handle, offset, memory, guest, count int32) int32

//go:wasmimport wago_gpu_v1 getBuffer
func getBuffer(slot int32) int32

//go:wasmimport wago_gpu_v1 readBufferU8
func readBufferU8(handle, index int32) int32

//go:wasmimport wago_gpu_v1 readBufferI32
func readBufferI32(handle, index int32) int32

//go:wasmimport wago_gpu_v1 readBufferU32
func readBufferU32(handle, index int32) uint32

//go:wasmimport wago_gpu_v1 readBufferF32
func readBufferF32(handle, index int32) float32

//go:wasmimport wago_gpu_v1 writeBufferU8
func writeBufferU8(handle, index, value int32)

//go:wasmimport wago_gpu_v1 writeBufferI32
func writeBufferI32(handle, index, value int32)

//go:wasmimport wago_gpu_v1 writeBufferU32
func writeBufferU32(handle, index int32, value uint32)

//go:wasmimport wago_gpu_v1 writeBufferF32
func writeBufferF32(handle, index int32, value float32)
