package mirostat

import (
	"cmp"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/mirostat/internal/zipf"
)

// cand is one token of a row while its candidate set is selected.
type cand struct {
	v  float64 // ranking value: the logit, or the weight
	lv float64 // log score: the logit, or ln(weight)
	p  float64 // probability, where a draw sets it
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
	return numeric.Exp(st.logProb(lv)) // math.Exp above 0, where a single-token row can round
}

// maxRowLen bounds a row so that token ids fit the int32 of cand.
const maxRowLen = math.MaxInt32

// logitStats validates a row of logits and computes its softmax normalizer:
// the maximum m in a first pass, then Σ exp(x - m) in float64 in
// numeric.ExpSum's order. A NaN makes the sum NaN and a +Inf the maximum, so
// validation costs nothing until a row is bad. When top is not nil, another
// pass collects the best tokens in it.
func logitStats(row []float32, top *topSet) (rowStats, error) {
	return logitTerms(row, top, nil)
}

// logitTerms is logitStats, filling the histogram h instead of top when h
// is not nil (a draw takes V1's top M from h). Every path takes the same
// normalizer, so that a draw and the reference see it to the last bit.
func logitTerms(row []float32, top *topSet, h *histogram) (rowStats, error) {
	if len(row) == 0 {
		return rowStats{}, ErrEmptyRow
	}
	if len(row) > maxRowLen {
		return rowStats{}, paramError("row of %d entries exceeds %d", len(row), maxRowLen)
	}
	m, best := rowMax(row)
	if math.IsInf(m, 1) || best < 0 {
		if err := firstNonFiniteLogit(row); err != nil {
			return rowStats{}, err
		}
		return rowStats{}, ErrAllMasked
	}
	// On the caller's core: splitting one row over two cores made a step
	// 15-40 µs slower on this project's VM (the row, just written, moves
	// between the cores' caches, and a sleeping worker wakes in ~65 µs).
	z := numeric.ExpSum(row, m)
	if math.IsNaN(z) {
		if err := firstNonFiniteLogit(row); err != nil {
			return rowStats{}, err
		}
		return rowStats{}, ErrNumerical
	}
	switch {
	case h != nil:
		h.reset(len(row), m)
		h.fill(row)
	case top != nil:
		thr := top.thr
		for i := numeric.FirstAtLeast(row, 0, float32Below(thr)); i < len(row); i = numeric.FirstAtLeast(row, i+1, float32Below(thr)) {
			if x := float64(row[i]); x > thr {
				thr = top.add(x, i)
			}
		}
	}
	return rowStats{n: len(row), top: best, shift: m, lnZ: math.Log(z)}, nil
}

// rowMax returns the largest logit and its smallest index, or index -1 when
// every logit is -Inf or NaN.
func rowMax(row []float32) (float64, int) {
	m, best, _ := numeric.MaxIndex(row)
	return float64(m), best
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
	return rowStats{n: len(row), top: top, lnZ: numeric.Log(sum)}, nil
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

// topSet collects the best m tokens of a row read in id order, in a
// numeric.Best. A token enters when its value exceeds thr (ties lose: their
// ids are larger); once the set holds m tokens, thr is the worst of them.
type topSet struct {
	best *numeric.Best[float64]
	dst  []cand
	thr  float64
}

// newTopSet returns an empty set of the best m tokens with values above
// masked, in best, whose ranking it returns in dst's storage.
func newTopSet(dst []cand, best *numeric.Best[float64], m int, masked float64) topSet {
	best.Reset(m)
	if m == 0 {
		masked = math.Inf(1) // nothing enters
	}
	return topSet{best: best, dst: dst[:0], thr: masked}
}

// add enters token id with value x > thr and returns the new thr.
func (t *topSet) add(x float64, id int) float64 {
	e := numeric.Entry[float64]{Key: x, Index: int32(id)}
	if t.best.Full() {
		t.best.Replace(e) // x > thr, the worst key: it enters
	} else {
		t.best.Offer(e)
	}
	if t.best.Full() {
		t.thr = t.best.Worst().Key
	}
	return t.thr
}

// ranked returns the best m (fewer if fewer entered) in rank order.
func (t *topSet) ranked() []cand {
	for _, e := range t.best.Sorted() {
		t.dst = append(t.dst, cand{v: e.Key, id: e.Index})
	}
	return t.dst
}

// topK returns the k best tokens of row with values above masked, in rank
// order, selected in best.
func topK[F float32 | float64](dst []cand, best *numeric.Best[float64], row []F, k int, masked F) []cand {
	t := newTopSet(dst, best, k, float64(masked))
	thr := t.thr
	for i, v := range row {
		if x := float64(v); x > thr {
			thr = t.add(x, i)
		}
	}
	return t.ranked()
}

// ranksAfter reports whether a ranks after b: byRank(a, b) > 0.
func ranksAfter(a, b cand) bool { return a.v < b.v || (a.v == b.v && a.id > b.id) }

// zipfExponent is V1's Zipf exponent over c, the top tokens in rank order
// (zipf.Exponent of their log scores, gathered in s's scratch).
func (s *Sampler) zipfExponent(c []cand) float64 {
	s.lv = slices.Grow(s.lv[:0], len(c))[:len(c)]
	lv := s.lv
	for i := range c {
		lv[i] = c[i].lv
	}
	return zipf.Exponent(lv)
}

// adaptiveK is V1's k (see zipf.K); a NaN is ErrNumerical.
func adaptiveK(mu, s float64, n int) (int, error) {
	k, ok := zipf.K(mu, s, n)
	if !ok {
		return 0, ErrNumerical
	}
	return k, nil
}
