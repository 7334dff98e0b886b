// The corpus driver, the same in every language: the host writes each slot's inputs into the
// staging area, corpus_run creates one buffer per declared slot, uploads and binds it,
// dispatches, runs the kernel's CPU runner when dispatch answers 1, copies every buffer back into
// the staging area and frees it. It returns the dispatch status (0 GPU, 1 CPU runner) or the
// status of the first import that failed.
package main

import "unsafe"

const (
	slots              = 8
	maxElements        = 1024
	slotBytes          = 8 * maxElements // room for the widest element type
	statusOK           = 0
	statusCPUFallback  = 1
	statusInvalidRange = 3
)

var staging [slots * slotBytes]byte

//go:wasmexport corpus_staging
func corpusStaging() int32 {
	return int32(uintptr(unsafe.Pointer(&staging[0])))
}

func slotAddress(slot int) int32 {
	return corpusStaging() + int32(slot*slotBytes)
}

// prepare creates, fills and binds one slot's buffer and returns its handle.
func prepare(slot int, elementType, count int32) (int32, int32) {
	packed := uint64(createBufferPacked(elementType, count))
	if status := int32(packed >> 32); status != statusOK {
		return 0, status
	}
	handle := int32(uint32(packed))
	if status := setBuffer32(handle, 0, 0, slotAddress(slot), count); status != statusOK {
		return handle, status
	}
	return handle, bindBuffer(int32(slot), handle)
}

func runBound(kernelID, count int32, handles *[slots]int32) int32 {
	status := dispatch(kernelID, count)
	if status == statusCPUFallback {
		cpuRun(kernelID, count)
	} else if status != statusOK {
		return status
	}
	for slot, h := range handles {
		if h == 0 {
			continue
		}
		if copied := copyBuffer32(h, 0, 0, slotAddress(slot), count); copied != statusOK {
			return copied
		}
	}
	return status
}

//go:wasmexport corpus_run
func corpusRun(kernelID, count, layout int32) int32 {
	if count < 0 || count > maxElements {
		return statusInvalidRange
	}
	var handles [slots]int32
	status := int32(statusOK)
	for slot := 0; slot < slots && status == statusOK; slot++ {
		if elementType := (uint32(layout) >> (4 * slot)) & 15; elementType != 0 {
			handles[slot], status = prepare(slot, int32(elementType), count)
		}
	}
	if status == statusOK {
		status = runBound(kernelID, count, &handles)
	}
	for _, h := range handles {
		if h != 0 {
			freeBuffer(h)
		}
	}
	return status
}

func main() {}
