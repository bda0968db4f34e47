package mirostat

import (
	"iter"
	"math"
	"slices"
	"sort"

	"github.com/llamaloop/llamaloop/mirostat/internal/zipf"
)

// PreparedRow is a row whose softmax and full ranking are computed once, for
// many draws from the same distribution (simulations, Monte Carlo over
// sessions). A draw then costs O(log n) for V2 and O(M + log n) for V1, and
// gives exactly the step that the row itself would. A PreparedRow is
// immutable and safe for concurrent use by many samplers.
type PreparedRow struct {
	st       rowStats
	ranked   []cand    // unmasked tokens in rank order
	probs    []float64 // original probability, by rank
	cum      []float64 // running sums of probs, by rank
	surprise []float64 // bits, by rank; nondecreasing
	lv       []float64 // log scores, by rank: V1's Zipf fit reads its top M here
	rank     []int32   // by token id: its rank, or -1 when masked
}

// PrepareLogits prepares a row of logits. The row is not retained.
func PrepareLogits(logits []float32) (*PreparedRow, error) {
	st, err := logitStats(logits, nil)
	if err != nil {
		return nil, err
	}
	c := collectAtLeast(nil, logits, -math.MaxFloat32)
	setLogScores(c, false)
	return prepare(st, c), nil
}

// PrepareWeights prepares a row of non-negative weights. The row is not
// retained.
func PrepareWeights(weights []float64) (*PreparedRow, error) {
	st, err := weightStats(weights)
	if err != nil {
		return nil, err
	}
	c := collectAtLeast(nil, weights, math.SmallestNonzeroFloat64)
	setLogScores(c, true)
	return prepare(st, c), nil
}

func prepare(st rowStats, c []cand) *PreparedRow {
	slices.SortFunc(c, byRank)
	r := &PreparedRow{
		st:       st,
		ranked:   c,
		probs:    make([]float64, len(c)),
		cum:      make([]float64, len(c)),
		surprise: make([]float64, len(c)),
		lv:       make([]float64, len(c)),
		rank:     make([]int32, st.n),
	}
	for i := range r.rank {
		r.rank[i] = -1
	}
	var cum float64
	for i, k := range c {
		r.probs[i] = st.prob(k.lv)
		cum += r.probs[i]
		r.cum[i] = cum
		r.surprise[i] = st.surpriseBits(k.lv)
		r.lv[i] = k.lv
		r.rank[k.id] = int32(i)
	}
	return r
}

// Len returns the vocabulary size.
func (r *PreparedRow) Len() int { return r.st.n }

// Probability returns token's probability, 0 for a masked token.
func (r *PreparedRow) Probability(token int32) (float64, error) {
	if token < 0 || int(token) >= r.st.n {
		return 0, paramError("token %d outside vocabulary of %d", token, r.st.n)
	}
	if k := r.rank[token]; k >= 0 {
		return r.probs[k], nil
	}
	return 0, nil
}

// Ranked yields the unmasked tokens and their probabilities in rank order.
func (r *PreparedRow) Ranked() iter.Seq2[int32, float64] {
	return func(yield func(int32, float64) bool) {
		for i, c := range r.ranked {
			if !yield(c.id, r.probs[i]) {
				return
			}
		}
	}
}

func (r *PreparedRow) selectFor(s *Sampler) (selection, error) {
	var kept, k int
	var exponent float64
	switch s.cfg.Version {
	case V1:
		exponent = zipf.Exponent(r.lv[:min(s.cfg.M, len(r.lv))])
		var err error
		if k, err = adaptiveK(s.mu, exponent, r.st.n); err != nil {
			return selection{}, err
		}
		kept = min(k, len(r.ranked))
	default:
		kept = max(1, sort.Search(len(r.surprise), func(i int) bool { return !(r.surprise[i] <= s.mu) }))
	}
	return selection{
		st:    r.st,
		kept:  r.ranked[:kept],
		probs: r.probs[:kept],
		cum:   r.cum[:kept],
		k:     k,
		s:     exponent,
	}, nil
}
