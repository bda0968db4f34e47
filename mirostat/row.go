package mirostat

import (
	"cmp"
	"math"
	"slices"
)

// cand is one token of a row while its candidate set is selected.
type cand struct {
	v  float64 // ranking value: the logit, or the weight
	lv float64 // log score: the logit, or ln(weight)
	id int32
}

// byRank orders candidates by probability, highest first, then by token id.
func byRank(a, b cand) int {
	if a.v != b.v {
		if a.v > b.v {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.id, b.id)
}

// rowStats normalizes a validated row: token i has log-probability
// (lv_i - shift) - lnZ.
type rowStats struct {
	n     int
	top   int     // the most probable token, the smallest id among ties
	shift float64 // the largest logit, or 0 for weights
	lnZ   float64 // ln Σ exp(lv - shift)
}

func (st *rowStats) logProb(lv float64) float64 { return (lv - st.shift) - st.lnZ }

// surpriseBits is the surprise, in bits, of a token with log score lv. Every
// kept-set test and every reported surprise goes through it, so that a token
// is kept exactly when the surprise reported for it is at most mu.
func (st *rowStats) surpriseBits(lv float64) float64 { return -st.logProb(lv) * math.Log2E }

// prob is the original probability of a token with log score lv.
func (st *rowStats) prob(lv float64) float64 {
	x := st.logProb(lv)
	if x > 0 { // rounding at a single-token row; expNonPositive wants x <= 0
		return math.Exp(x)
	}
	return expNonPositive(x)
}

// maxRowLen bounds a row so that token ids fit the int32 of cand.
const maxRowLen = math.MaxInt32

// logitStats validates a row of logits and computes its softmax normalizer
// in one pass: the running maximum m and Σ exp(x - m) in float64, rescaled
// whenever m grows (about ln n times on a row in random order), in two
// interleaved partial sums. A NaN makes a sum NaN and a +Inf the maximum, so
// validation costs nothing until a row is bad. When heap is not empty (see
// newHeap), the pass also keeps the best len(heap) tokens in it; the
// comparison with the heap's root costs little, whereas appending V2's
// candidates in this loop made it several times slower, so V2 selects in a
// second pass.
func logitStats(row []float32, heap []cand) (rowStats, error) {
	if len(row) == 0 {
		return rowStats{}, ErrEmptyRow
	}
	if len(row) > maxRowLen {
		return rowStats{}, paramError("row of %d entries exceeds %d", len(row), maxRowLen)
	}
	root := math.Inf(1) // nothing beats it: no heap
	if len(heap) > 0 {
		root = heap[0].v
	}
	m, z0, z1, top := -math.MaxFloat64, 0.0, 0.0, -1
	i := 0
	for ; i+1 < len(row); i += 2 {
		x0, x1 := float64(row[i]), float64(row[i+1])
		if x0 > m || x1 > m {
			next := m
			if x0 > next {
				next, top = x0, i
			}
			if x1 > next {
				next, top = x1, i+1
			}
			f := math.Exp(m - next)
			z0, z1, m = z0*f, z1*f, next
		}
		d0, d1 := x0-m, x1-m
		if d0 < expFloor { // not max(): that spends time on NaN and -0 rules
			d0 = expFloor
		}
		if d1 < expFloor {
			d1 = expFloor
		}
		z0 += expFast(d0)
		z1 += expFast(d1)
		if x0 > root { // ties lose: their ids are larger
			root = heapReplaceRoot(heap, x0, i)
		}
		if x1 > root {
			root = heapReplaceRoot(heap, x1, i+1)
		}
	}
	if i < len(row) {
		x := float64(row[i])
		if x > m {
			f := math.Exp(m - x)
			z0, z1, m, top = z0*f, z1*f, x, i
		}
		z0 += expNonPositive(x - m)
		if x > root {
			heapReplaceRoot(heap, x, i)
		}
	}
	z := z0 + z1
	if math.IsNaN(z) || math.IsInf(m, 1) {
		if err := firstNonFiniteLogit(row); err != nil {
			return rowStats{}, err
		}
		return rowStats{}, ErrNumerical
	}
	if top < 0 {
		return rowStats{}, ErrAllMasked
	}
	return rowStats{n: len(row), top: top, shift: m, lnZ: math.Log(z)}, nil
}

func firstNonFiniteLogit(row []float32) error {
	for i, v := range row {
		if x := float64(v); math.IsNaN(x) || math.IsInf(x, 1) {
			return &IndexError{Index: i, Value: x, Err: ErrNonFiniteLogit}
		}
	}
	return nil
}

// weightStats validates a row of non-negative weights and computes their sum.
func weightStats(row []float64) (rowStats, error) {
	if len(row) == 0 {
		return rowStats{}, ErrEmptyRow
	}
	if len(row) > maxRowLen {
		return rowStats{}, paramError("row of %d entries exceeds %d", len(row), maxRowLen)
	}
	var sum, least float64
	best, top := 0.0, -1
	for i, w := range row {
		sum += w
		least = min(least, w)
		if w > best {
			best, top = w, i
		}
	}
	if !(least >= 0) || math.IsNaN(sum) || math.IsInf(sum, 0) {
		for i, w := range row {
			if !(w >= 0) || math.IsInf(w, 1) {
				return rowStats{}, &IndexError{Index: i, Value: w, Err: ErrInvalidProbability}
			}
		}
		return rowStats{}, ErrNumerical // the sum of finite weights overflowed
	}
	if top < 0 {
		return rowStats{}, ErrAllMasked
	}
	return rowStats{n: len(row), top: top, lnZ: ln(sum)}, nil
}

// float32Below returns the largest float32 that is <= x.
func float32Below(x float64) float32 {
	switch {
	case x > math.MaxFloat32:
		return math.MaxFloat32
	case x < -math.MaxFloat32:
		return float32(math.Inf(-1))
	}
	f := float32(x)
	if float64(f) > x {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

// collectAtLeast appends every token whose value is at least thr.
func collectAtLeast[F float32 | float64](dst []cand, row []F, thr F) []cand {
	for i, v := range row {
		if v >= thr {
			dst = append(dst, cand{v: float64(v), id: int32(i)})
		}
	}
	return dst
}

// newHeap returns k placeholder candidates that rank below every token
// with mass: value masked, id MaxInt32. Tokens replace them through the
// heap's root; those left at the end, and masked tokens, never count.
func newHeap(dst []cand, k int, masked float64) []cand {
	h := dst[:0]
	for range k {
		h = append(h, cand{v: masked, id: math.MaxInt32})
	}
	return h
}

// finishTop drops the placeholders from a heap and ranks the rest.
func finishTop(h []cand, masked float64) []cand {
	h = slices.DeleteFunc(h, func(c cand) bool { return c.v == masked })
	slices.SortFunc(h, byRank)
	return h
}

// topK returns the k best tokens of row in rank order (fewer if fewer have
// mass), with a k-entry heap: O(n) comparisons plus O(log k) per entry.
func topK[F float32 | float64](dst []cand, row []F, k int, masked F) []cand {
	h := newHeap(dst, min(k, len(row)), float64(masked))
	root := h[0].v
	for i, v := range row {
		if x := float64(v); x > root { // ties lose: their ids are larger
			root = heapReplaceRoot(h, x, i)
		}
	}
	return finishTop(h, float64(masked))
}

// heapReplaceRoot puts token id with value x at the root, restores the heap
// and returns the new root's value.
func heapReplaceRoot(h []cand, x float64, id int) float64 {
	h[0] = cand{v: x, id: int32(id)}
	siftDown(h, 0)
	return h[0].v
}

// siftDown restores the heap property below i; the root is the candidate that
// ranks last.
func siftDown(h []cand, i int) {
	for {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && ranksAfter(h[l], h[worst]) {
			worst = l
		}
		if r < len(h) && ranksAfter(h[r], h[worst]) {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// ranksAfter reports whether a ranks after b: byRank(a, b) > 0.
func ranksAfter(a, b cand) bool { return a.v < b.v || (a.v == b.v && a.id > b.id) }

// zipfT holds t_i = ln((i+2)/(i+1)), the regressors of the Zipf fit.
var zipfT = func() (t [1024]float64) {
	for i := range t {
		t[i] = zipfRegressor(i)
	}
	return t
}()

func zipfRegressor(i int) float64 { return math.Log1p(1 / float64(i+1)) }

// minZipfExponent replaces a fitted exponent below it: a flat top (every
// ratio 1) fits s = 0, where k's formula divides by zero. In that limit k is 1
// or the whole vocabulary, and so it is with this floor.
const minZipfExponent = 1e-3

// zipfExponent fits ŝ by least squares through the origin over the adjacent
// log-ratios of c, which holds the top tokens in rank order (paper, eq. 30):
// ŝ = Σ t_i b_i / Σ t_i², b_i = ln(p_i/p_{i+1}), t_i = ln((i+2)/(i+1)).
// It returns 0 when c has fewer than two tokens.
func zipfExponent(c []cand) float64 {
	if len(c) < 2 {
		return 0
	}
	var num, den float64
	for i := range len(c) - 1 {
		t := 0.0
		if i < len(zipfT) {
			t = zipfT[i]
		} else {
			t = zipfRegressor(i)
		}
		num += t * (c[i].lv - c[i+1].lv)
		den += t * t
	}
	return max(num/den, minZipfExponent)
}

// adaptiveK is V1's k for surprise target mu (bits), Zipf exponent s and
// vocabulary n (paper, eq. 34): k = (ε·2^mu / (1 - n^-ε))^(1/s) with ε = s-1,
// rounded to the nearest integer and clamped to [1, n]. Near s = 1 the factor
// ε/(1 - n^-ε) takes its limit 1/ln n; the power is taken in log space, so a
// large mu saturates at n instead of overflowing.
func adaptiveK(mu, s float64, n int) (int, error) {
	if n <= 1 || s == 0 {
		return 1, nil
	}
	lnN := math.Log(float64(n))
	eps := s - 1
	x := eps * lnN
	var lnFactor float64
	if math.Abs(x) < 1e-8 {
		lnFactor = -math.Log(lnN) + x/2
	} else {
		lnFactor = math.Log(eps / -math.Expm1(-x))
	}
	lnK := (lnFactor + mu*math.Ln2) / s
	switch {
	case math.IsNaN(lnK):
		return 0, ErrNumerical
	case lnK >= lnN:
		return n, nil
	}
	return int(max(1, math.Round(math.Exp(lnK)))), nil
}

// ln is math.Log for x > 0, subnormal x included: on amd64 math.Log
// returns about -709 for every subnormal (golang/go#56600), and weights and
// probabilities can be subnormal.
func ln(x float64) float64 {
	if x < 0x1p-1022 {
		frac, exp := math.Frexp(x)
		return math.Log(frac) + float64(exp)*math.Ln2
	}
	return math.Log(x)
}
