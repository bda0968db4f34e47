//go:build amd64 && !purego

package numeric

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2 reports whether the AVX2 scans and Shift run here.
var hasAVX2 = cpu.X86.HasAVX2

// machineLevel is the widest of the normalizer's loops this machine runs, and sumLevel the one
// addLanes takes: machineLevel, unless a test forces a narrower one.
var machineLevel = func() int {
	switch {
	case cpu.X86.HasAVX512F:
		return levelAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return levelAVX2
	}
	return levelGo
}()

var sumLevel = machineLevel

// termVecConsts holds, four times each (one AVX2 register), what the AVX2 loop reads from memory:
// the coefficients c10 ... c1, ExpFloor, Term's clamped value, -Inf and 0.
var termVecConsts = func() (c [14][4]float64) {
	v := append(termPoly[:len(termPoly):len(termPoly)], ExpFloor, clampedTerm, math.Inf(-1), 0)
	for i, x := range v {
		c[i] = [4]float64{x, x, x, x}
	}
	return c
}()

// termScalars holds termVars followed by ExpFloor, Term's clamped value and -Inf, which the
// AVX-512 loop broadcasts into registers.
var termScalars = func() (c [len(termVars) + 3]float64) {
	copy(c[:], termVars[:])
	c[len(termVars)], c[len(termVars)+1], c[len(termVars)+2] = ExpFloor, clampedTerm, math.Inf(-1)
	return c
}()

// expLanesAVX2 adds Term(x_i - m) to lane i mod 8 of l for groups groups of 8 entries from row,
// with the arithmetic of addLanesGo operation for operation, the other cases of Term as blends.
//
//go:noescape
func expLanesAVX2(row *float32, groups int, m float64, l *lanes, vars *[len(termVars)]float64, consts *[14][4]float64)

// expLanesAVX512 is expLanesAVX2 with AVX-512: the 8 lanes in one register.
//
//go:noescape
func expLanesAVX512(row *float32, groups int, m float64, l *lanes, scalars *[len(termVars) + 3]float64)

// addLanes is addLanesGo, with the widest vector loop the machine has (sumLevel).
func addLanes(l *lanes, block []float32, m float64) int {
	g := len(block) / SumLanes
	switch {
	case g == 0 || sumLevel == levelGo:
		return addLanesGo(l, block, m)
	case sumLevel == levelAVX512:
		expLanesAVX512(unsafe.SliceData(block), g, m, l, &termScalars)
	default:
		expLanesAVX2(unsafe.SliceData(block), g, m, l, &termVars, &termVecConsts)
	}
	return g * SumLanes
}

// termsAVX2 stores Term(x_i - m) for groups groups of 8 entries of row in dst, as expLanesAVX2
// computes them.
//
//go:noescape
func termsAVX2(dst *float64, row *float32, groups int, m float64, vars *[len(termVars)]float64, consts *[14][4]float64)

// termsAVX512 is termsAVX2 with AVX-512.
//
//go:noescape
func termsAVX512(dst *float64, row *float32, groups int, m float64, scalars *[len(termVars) + 3]float64)

// termsVec stores the terms of the whole groups of 8 entries of row in dst with the widest vector
// loop the machine has, and returns how many it took.
func termsVec(dst []float64, row []float32, m float64) int {
	g := len(row) / SumLanes
	switch {
	case g == 0 || sumLevel == levelGo:
		return 0
	case sumLevel == levelAVX512:
		termsAVX512(unsafe.SliceData(dst), unsafe.SliceData(row), g, m, &termScalars)
	default:
		termsAVX2(unsafe.SliceData(dst), unsafe.SliceData(row), g, m, &termVars, &termVecConsts)
	}
	return g * SumLanes
}
