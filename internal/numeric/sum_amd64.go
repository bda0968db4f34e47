//go:build amd64 && !purego

package numeric

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2 reports whether the vector loops (addLanes, the scans and Shift) run here.
var hasAVX2 = cpu.X86.HasAVX2

// expVecConsts holds, four times each (one vector register), the constants of the AVX2 loop:
// 1024/ln2, ExpShifter, the table mask, the polynomial's coefficients c3, c2, c1 and 1,
// ExpFloor, Term's clamped value, -Inf and 0.
var expVecConsts = func() (c [12][4]uint64) {
	v := []uint64{
		math.Float64bits(expInvStep), math.Float64bits(ExpShifter), ExpTableSize - 1,
		math.Float64bits(expTermC3), math.Float64bits(expTermC2), math.Float64bits(expTermC1), math.Float64bits(1),
		math.Float64bits(ExpFloor), math.Float64bits(clampedTerm), math.Float64bits(math.Inf(-1)), 0,
	}
	for i, x := range v {
		c[i] = [4]uint64{x, x, x, x}
	}
	return c
}()

// expLanesAVX2 adds Term(x_i - m) to lane i mod 8 of l for groups groups of 8 entries from row,
// with the arithmetic of addLanesGo operation for operation, and the clamp as blends.
//
//go:noescape
func expLanesAVX2(row *float32, groups int, m float64, l *lanes, consts *[12][4]uint64, table *[ExpTableSize]uint64)

// addLanes is addLanesGo, with AVX2 where the machine has it.
func addLanes(l *lanes, block []float32, m float64) int {
	g := len(block) / SumLanes
	if !hasAVX2 || g == 0 {
		return addLanesGo(l, block, m)
	}
	expLanesAVX2(unsafe.SliceData(block), g, m, l, &expVecConsts, &ExpTermTable)
	return g * SumLanes
}
