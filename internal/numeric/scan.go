package numeric

import "math"

// The scans below read a row of float32 scores for the few entries that
// matter to a caller (the maximum, the entries past a threshold), which on a
// row of a large vocabulary are a handful among a hundred thousand. On amd64
// with AVX2 they compare 32 scores a loop iteration and test the result with
// one branch (scan_amd64.s), so that a caller skips the bulk of a row and
// handles the hits in Go, one call per hit; elsewhere, and for the last
// scores of a row that do not fill 8 lanes, they are plain loops. Both give
// the same result to the bit. The searches start at an index i >= 0; from
// len(row) on they find nothing.

// maxBlock is the length of the blocks of maxAVX2, which reports the block
// of the maximum's first occurrence.
const maxBlock = 256

// scanNegInf is -Inf, which MaskBelow writes.
var scanNegInf = float32(math.Inf(-1))

// MaxIndex returns the largest entry of row other than NaN (+Inf included)
// and the smallest index that holds it (max is row[index], so of two zeros
// the first one's sign), and whether row holds a NaN. When no entry is above -Inf (every
// entry -Inf or NaN, or row empty), it returns -Inf and index -1.
func MaxIndex(row []float32) (max float32, index int, nan bool) {
	m, best, i := scanNegInf, -1, 0
	from := 0 // where the vector pass's maximum first occurs, or before
	if v := scanLen(len(row)); v > 0 {
		var block int
		m, block, nan = maxAVX2(&row[0], v)
		from, i = block*maxBlock, v
	}
	for ; i+4 <= len(row); i += 4 {
		r := row[i : i+4 : i+4]
		// One test per four: the maximum rarely grows, about ln n times.
		if r[0] <= m && r[1] <= m && r[2] <= m && r[3] <= m {
			continue
		}
		for j, x := range r {
			if x > m {
				m, best = x, i+j
			} else if x != x {
				nan = true
			}
		}
	}
	for ; i < len(row); i++ {
		if x := row[i]; x > m {
			m, best = x, i
		} else if x != x {
			nan = true
		}
	}
	if m == scanNegInf {
		return m, -1, nan
	}
	if best < 0 {
		// The vector pass found the maximum and the block of its first
		// occurrence (none of the tail's entries is larger, or best would be
		// set). x >= m holds for the entries equal to m alone, either zero
		// for a zero m.
		best = FirstAtLeast(row, from, m)
	}
	return row[best], best, nan
}

// FirstAtLeast returns the smallest index j >= i with row[j] >= thr, or
// len(row) when there is none. A NaN entry or threshold never matches.
func FirstAtLeast(row []float32, i int, thr float32) int {
	if v := scanLen(len(row) - i); v > 0 {
		if j := firstAtLeastAVX2(&row[i], v, thr); j < v {
			return i + j
		}
		i += v
	}
	for ; i < len(row); i++ {
		if row[i] >= thr {
			return i
		}
	}
	return len(row)
}

// FirstNotBelow returns the smallest index j >= i whose entry is not below
// thr (at least thr, or a NaN), or len(row) when there is none: the index
// MaskBelow returns, without its writes. With a NaN thr it returns i.
func FirstNotBelow(row []float32, i int, thr float32) int {
	if v := scanLen(len(row) - i); v > 0 {
		if j := firstNotBelowAVX2(&row[i], v, thr); j < v {
			return i + j
		}
		i += v
	}
	for ; i < len(row); i++ {
		if !(row[i] < thr) {
			return i
		}
	}
	return len(row)
}

// MaskBelow sets to -Inf each entry of row from index i on that is below
// thr, up to the first entry that is not (one at least thr, or a NaN), and
// returns that entry's index, or len(row) when there is none. The entries
// from the returned index on are left as they are. With a NaN thr no entry
// is below it: it returns i.
func MaskBelow(row []float32, i int, thr float32) int {
	if v := scanLen(len(row) - i); v > 0 {
		if j := maskBelowAVX2(&row[i], v, thr); j < v {
			return i + j
		}
		i += v
	}
	for ; i < len(row); i++ {
		if !(row[i] < thr) {
			return i
		}
		row[i] = scanNegInf
	}
	return len(row)
}

// FirstAboveSum returns the smallest index j >= i with row[j] + add > thr,
// the sum rounded to float32 as Go's float32 addition rounds it, or
// len(row) when there is none. A NaN sum or threshold never matches (a
// beam's key: add is a beam's running score, row its token scores).
func FirstAboveSum(row []float32, i int, add, thr float32) int {
	if v := scanLen(len(row) - i); v > 0 {
		if j := firstAboveSumAVX2(&row[i], v, add, thr); j < v {
			return i + j
		}
		i += v
	}
	for ; i < len(row); i++ {
		if float32(row[i]+add) > thr {
			return i
		}
	}
	return len(row)
}
