//go:build amd64 && !purego

package grammar

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vectorMask reports whether maskVector blends with vector instructions here.
var vectorMask = cpu.X86.HasAVX2

// maskAVX2 blends -inf into the scores at row whose bits at allowed are
// clear, 8 scores (one byte of allowed) at a time, for groups groups.
//
//go:noescape
func maskAVX2(row *float32, allowed *byte, groups int)

// maskVector masks the longest prefix of row that is a whole number of
// 64-token words with AVX2, and returns its length (0 without AVX2).
func maskVector(row []float32, allowed []uint64) int {
	n := len(row) / 64 * 64
	if !vectorMask || n == 0 {
		return 0
	}
	maskAVX2(unsafe.SliceData(row), (*byte)(unsafe.Pointer(unsafe.SliceData(allowed))), n/8)
	return n
}
