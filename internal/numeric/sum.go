package numeric

import "math"

// The normalizer's order of addition. A sum in index order is one chain of dependent additions
// (about 4 cycles a term, 170 µs for a vocabulary of 128256), so the normalizer adds in lanes
// instead: the row is cut into blocks of SumBlock entries; within a block, entry i goes to lane
// i mod SumLanes, each lane adding its terms in index order; a block's sum combines its lanes
// as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) (the order of two 4-wide vector registers folded
// in halves); the blocks' sums are added in order. The order is fixed by the row alone, so the
// sum is the same bits on every machine, with or without vector instructions, on one core or
// several (blocks are the unit a core takes), and more accurate than one chain.
const (
	// SumLanes is the number of lanes of a block.
	SumLanes = 8
	// SumBlock is the number of entries of a block, a multiple of SumLanes.
	SumBlock = 4096
)

// The normalizer's loops, narrowest first: every one adds the same bits.
const (
	levelGo = iota
	levelAVX2
	levelAVX512
)

// lanes holds the partial sums of one block.
type lanes [SumLanes]float64

// sum combines the lanes of a block.
func (l *lanes) sum() float64 {
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// blockSum returns the sum of Term(x_i - m) over one block of at most SumBlock entries, in
// lanes: the vector loop takes the whole groups of SumLanes entries, addTail the rest.
func blockSum(block []float32, m float64) float64 {
	var l lanes
	n := addLanes(&l, block, m)
	addTail(&l, block[n:], m)
	return l.sum()
}

// addTail adds Term(x_i - m) for the entries of tail to lanes 0, 1, ... in order.
func addTail(l *lanes, tail []float32, m float64) {
	for j, x := range tail {
		l[j%SumLanes] += Term(float64(x) - m)
	}
}

// addLanesGo adds Term(x_i - m) to lane i mod SumLanes for the whole groups of SumLanes entries
// of block, and returns how many entries it took. Its body is expTerm written out, so that the
// constants stay in registers, with Term's other cases in a call.
func addLanesGo(l *lanes, block []float32, m float64) int {
	v := &termVars
	inv, sh, nhi, nlo, one := v[0], v[1], v[2], v[3], v[4]
	c10, c9, c8, c7, c6, c5, c4, c3, c2, c1 := v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]
	n := len(block) / SumLanes * SumLanes
	for g := 0; g < n; g += SumLanes {
		for j, x := range block[g : g+SumLanes : g+SumLanes] {
			d := float64(x) - m
			if !(d >= ExpFloor) {
				l[j] += Term(d)
				continue
			}
			z := math.FMA(d, inv, sh)
			kf := z - sh
			r := math.FMA(kf, nlo, math.FMA(kf, nhi, d))
			r2 := float64(r * r)
			even := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(c10, r2, c8), r2, c6), r2, c4), r2, c2), r2, one)
			p := math.FMA(math.FMA(math.FMA(math.FMA(math.FMA(c9, r2, c7), r2, c5), r2, c3), r2, c1), r, even)
			l[j] += math.Float64frombits(math.Float64bits(p) + math.Float64bits(z)<<52)
		}
	}
	return n
}

// ExpSum returns Σ Term(x_i - m) over row in float64, added in the normalizer's order (see
// SumBlock): the softmax normalizer of a row whose largest entry is m. -Inf entries add nothing;
// a NaN makes the sum NaN. m must be the largest entry (finite): the terms are then within 1e-13
// of e^(x_i - m), and one of them is 1, which no clamped term can change.
func ExpSum(row []float32, m float64) float64 {
	z := 0.0
	for lo := 0; lo < len(row); lo += SumBlock {
		z += blockSum(row[lo:min(lo+SumBlock, len(row))], m)
	}
	return z
}

// ExpSumAt is ExpSum over the entries of row listed in idx, which must be increasing. When idx
// lists every entry of row that is not -Inf, it returns ExpSum(row, m) to the last bit: an
// entry left out adds nothing to its lane.
func ExpSumAt(row []float32, idx []int32, m float64) float64 {
	z := 0.0
	var l lanes
	block := int32(-1)
	for _, i := range idx {
		if b := i / SumBlock; b != block {
			z += l.sum()
			l, block = lanes{}, b
		}
		if x := float64(row[i]); !math.IsInf(x, -1) {
			l[i%SumLanes] += Term(x - m)
		}
	}
	return z + l.sum()
}

// LogSumExp returns ln Σ e^(x_i) over row: m + ln ExpSum(row, m), m the largest entry, in float64.
// It is -Inf for an empty row or one that is all -Inf, +Inf when an entry is +Inf, NaN when an
// entry is NaN.
func LogSumExp(row []float32) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		x := float64(v)
		if !(x <= m) { // larger, or NaN
			if x != x {
				return x
			}
			m = x
		}
	}
	if math.IsInf(m, 0) {
		return m
	}
	return m + math.Log(ExpSumParallel(row, m))
}

// Terms stores Term(x_i - m) in dst[i] for every entry of row, the terms [ExpSum] adds, with the
// normalizer's vector loops: for a pass that needs each term itself (mirostat's histogram). dst
// must be at least as long as row.
func Terms(dst []float64, row []float32, m float64) {
	dst = dst[:len(row)]
	for i := termsVec(dst, row, m); i < len(row); i++ {
		dst[i] = Term(float64(row[i]) - m)
	}
}
