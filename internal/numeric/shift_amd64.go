//go:build amd64 && !purego

package numeric

import "unsafe"

// shiftAVX2 is Shift's loop over groups groups of 8 entries.
//
//go:noescape
func shiftAVX2(dst, src *float32, groups int, m, c float32)

// shiftVector runs Shift over the whole groups of 8 entries with AVX2 and returns how many
// entries it took (0 without AVX2).
func shiftVector(dst, src []float32, m, c float32) int {
	g := len(src) / 8
	if !hasAVX2 || g == 0 {
		return 0
	}
	shiftAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), g, m, c)
	return g * 8
}
