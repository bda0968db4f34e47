package logits

import (
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// negInf is transformers' filter value: every processor masks with IEEE -inf.
var negInf = float32(math.Inf(-1))

// Argmax returns the index of the largest score, the lowest index among ties, as torch.argmax does.
// A NaN counts as larger than every number, so the first NaN wins (torch's rule); a row that is all
// -inf gives 0. An empty row gives -1.
func Argmax(scores []float32) int {
	if len(scores) == 0 {
		return -1
	}
	_, i, nan := numeric.MaxIndex(scores)
	if nan {
		return slices.IndexFunc(scores, func(x float32) bool { return x != x })
	}
	return max(i, 0) // -1: every score is -inf
}

// rowMax returns the largest score; NaN propagates (torch's max), so the result is NaN when the row
// holds one. An empty row gives -inf.
func rowMax(scores []float32) float32 {
	m, _, nan := numeric.MaxIndex(scores)
	if nan {
		return float32(math.NaN())
	}
	return m
}

// widen returns float64(x). It builds normal numbers from their bits because CVTSS2SD, the amd64
// conversion, only writes half of its register: each conversion then waits for the previous use of
// that register, which in a loop of exponentials chains every iteration to the one before (4x
// slower).
func widen(x float32) float64 {
	b := math.Float32bits(x)
	if e := b >> 23 & 0xff; e != 0 && e != 0xff {
		return math.Float64frombits(uint64(b>>31)<<63 | uint64(e+(1023-127))<<52 | uint64(b&0x7fffff)<<29)
	}
	return float64(x) // zero, subnormal, infinite or NaN
}

// maxOrNaN returns the maximum of src when it is finite. Otherwise (a NaN, +inf, or every entry
// -inf) it fills dst with NaN, as torch's softmax and log_softmax do, and reports false.
func maxOrNaN(dst, src []float32) (float32, bool) {
	m := rowMax(src)
	if m != m || math.IsInf(float64(m), 0) {
		nan := float32(math.NaN())
		for i := range src {
			dst[i] = nan
		}
		return 0, false
	}
	return m, true
}

// LogSoftmax writes log_softmax(src) into dst, as torch.log_softmax does in float32:
// dst_i = (src_i - max) - log(Σ_j exp(src_j - max)), the sum accumulated in float64 and its log
// rounded to float32 before the subtraction. -inf entries stay -inf. As in torch, a row that holds a
// NaN or +inf, or is all -inf, comes out all NaN. dst and src may be the same slice; dst must be at
// least as long as src.
func LogSoftmax(dst, src []float32) {
	m, ok := maxOrNaN(dst, src)
	if !ok {
		return
	}
	logSum := float32(math.Log(numeric.ExpSumParallel(src, float64(m))))
	numeric.Shift(dst, src, m, logSum)
}

// Softmax writes softmax(src) into dst in float32: dst_i = exp(src_i - max) / Σ_j exp(src_j - max),
// the sum accumulated in float64. -inf entries become 0. As in torch, a row that holds a NaN or +inf,
// or is all -inf, comes out all NaN. dst and src may be the same slice.
func Softmax(dst, src []float32) {
	m, ok := maxOrNaN(dst, src)
	if !ok {
		return
	}
	inv := 1 / numeric.ExpSumParallel(src, float64(m))
	fm := float64(m)
	dst = dst[:len(src)]
	for i, x := range src {
		if x == negInf {
			dst[i] = 0
		} else {
			dst[i] = float32(numeric.Exp(widen(x)-fm) * inv)
		}
	}
}

// SampleIndex draws an index from softmax(scores) by inverse CDF with one uniform u in [0,1): it
// walks the row in index order, accumulating exp(score - max) in float64, and returns the first
// index whose running sum exceeds u times the total. -inf and NaN entries are never drawn. If the row
// holds +inf entries, the draw is uniform among them (the limit of the softmax). ok is false when no
// entry can be drawn (every entry is -inf or NaN). transformers draws with torch.multinomial, whose
// random stream Go cannot reproduce; this matches its distribution, not its draws.
func SampleIndex(scores []float32, u float64) (index int, ok bool) {
	m, _, _ := numeric.MaxIndex(scores)
	if m == negInf {
		return -1, false
	}
	if m > math.MaxFloat32 { // +inf entries: their index by FirstAtLeast(+inf)
		nInf := 0
		for i := numeric.FirstAtLeast(scores, 0, m); i < len(scores); i = numeric.FirstAtLeast(scores, i+1, m) {
			nInf++
		}
		target := int(u * float64(nInf))
		for i := numeric.FirstAtLeast(scores, 0, m); i < len(scores); i = numeric.FirstAtLeast(scores, i+1, m) {
			if target == 0 {
				return i, true
			}
			target--
		}
	}
	return sampleFrom(scores, nil, m, u)
}

// sampleFrom is SampleIndex over the finite entries listed in cand (in index order), or over the
// whole row when cand is nil; m is the largest score. Both forms give the same index.
func sampleFrom(scores []float32, cand []int32, m float32, u float64) (int, bool) {
	fm := float64(m)
	total := 0.0
	if cand == nil {
		for _, x := range scores {
			if x != negInf && x == x {
				total += numeric.Exp(widen(x) - fm)
			}
		}
	} else {
		for _, i := range cand {
			if x := scores[i]; x != negInf && x == x {
				total += numeric.Exp(widen(x) - fm)
			}
		}
	}
	target := u * total
	last := -1
	acc := 0.0
	visit := func(i int, x float32) bool {
		if x == negInf || x != x {
			return false
		}
		acc += numeric.Exp(widen(x) - fm)
		last = i
		return acc > target
	}
	if cand == nil {
		for i, x := range scores {
			if visit(i, x) {
				return i, true
			}
		}
	} else {
		for _, i := range cand {
			if visit(int(i), scores[i]) {
				return int(i), true
			}
		}
	}
	// Rounding can leave u*total just above the final sum; the last drawable entry takes it.
	return last, last >= 0
}

// maxFloat32 is float32's largest finite value; InfNanRemove writes it for +inf.
const maxFloat32 = math.MaxFloat32

// f32 rounds a config scalar to float32, as torch does when a Python float meets a float32 tensor.
func f32(x float64) float32 { return float32(x) }
