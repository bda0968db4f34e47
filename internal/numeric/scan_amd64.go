//go:build amd64 && !purego

package numeric

// scanLen is how many of n scores the vector loops take: the longest whole
// number of 8-score groups, 0 without AVX2 (or for n < 8).
func scanLen(n int) int {
	if !hasAVX2 || n < 8 {
		return 0
	}
	return n &^ 7
}

// maxAVX2 returns the largest number among the n scores at p (n > 0, a
// multiple of 8), NaN ignored (-Inf when there is none), either zero for a
// zero maximum; the block of maxBlock scores that holds its first
// occurrence (any block when m is -Inf); and whether a NaN is among them.
//
//go:noescape
func maxAVX2(p *float32, n int) (m float32, block int, nan bool)

// firstAtLeastAVX2 is FirstAtLeast over the n scores at p (n > 0, a
// multiple of 8): the index of the first that is >= thr, or n.
//
//go:noescape
func firstAtLeastAVX2(p *float32, n int, thr float32) int

// firstNotBelowAVX2 is FirstNotBelow over the n scores at p (n > 0, a
// multiple of 8): the index of the first that is not below thr (>= thr or
// NaN), or n.
//
//go:noescape
func firstNotBelowAVX2(p *float32, n int, thr float32) int

// maskBelowAVX2 is MaskBelow over the n scores at p (n > 0, a multiple of
// 8): it sets to -Inf the scores below thr up to the first that is not
// (>= thr or NaN), and returns its index, or n.
//
//go:noescape
func maskBelowAVX2(p *float32, n int, thr float32) int

// firstAboveSumAVX2 is FirstAboveSum over the n scores at p (n > 0, a
// multiple of 8): the index of the first x with float32(x+add) > thr, or n.
//
//go:noescape
func firstAboveSumAVX2(p *float32, n int, add, thr float32) int

// shiftAVX2 is Shift over groups groups of 8 entries.
//
//go:noescape
func shiftAVX2(dst, src *float32, groups int, m, c float32)
