package lab

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/llamaloop/llamaloop/mirostat/internal/zipf"
)

// The functions below work on a probability row probs (each entry in [0, 1],
// summing to 1 within ProbabilityTolerance) and, for a candidate prefix, on
// an order of distinct token ids of which the first keep are the candidates.
// Rank gives the order Mirostat uses. Results are in bits.

// ProbabilityTolerance is how far from 1 a probability row may sum.
const ProbabilityTolerance = 1e-6

// Probabilities returns the softmax of logits in float64, with the same
// normalizer the samplers use (a mirostat.PreparedRow's); masked tokens
// get 0.
func Probabilities(logits []float32) ([]float64, error) {
	prep, err := mirostat.PrepareLogits(logits)
	if err != nil {
		return nil, err
	}
	p := make([]float64, len(logits))
	for tok, q := range prep.Ranked() {
		p[tok] = q
	}
	return p, nil
}

// Normalize returns weights divided by their sum. The weights are checked
// as a Sampler checks a row of mirostat.Weights.
func Normalize(weights []float64) ([]float64, error) {
	if _, err := mirostat.PrepareWeights(weights); err != nil {
		return nil, err
	}
	var sum float64
	for _, w := range weights {
		sum += w
	}
	p := make([]float64, len(weights))
	for i, w := range weights {
		p[i] = w / sum
	}
	return p, nil
}

// Rank returns every token id ordered by probability, highest first, ties
// by smaller id.
func Rank(probs []float64) ([]int, error) {
	if err := checkProbs(probs); err != nil {
		return nil, err
	}
	order := make([]int, len(probs))
	for i := range order {
		order[i] = i
	}
	// A stable sort of the ids by probability, highest first: equal
	// probabilities keep the smaller id first.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(probs[b], probs[a]) })
	return order, nil
}

// TopIndices returns the k most probable token ids in rank order, selected
// in one pass by a bounded heap rather than by a full sort. k larger than
// the row is the row.
func TopIndices(probs []float64, k int) ([]int, error) {
	if err := checkProbs(probs); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, paramError("k must be >= 1, got %d", k)
	}
	var best numeric.Best[float64]
	best.Reset(k) // zero probabilities enter too: they rank last
	for i, p := range probs {
		if best.Admits(p) {
			best.Offer(numeric.Entry[float64]{Key: p, Index: int32(i)})
		}
	}
	ranked := best.Sorted()
	out := make([]int, len(ranked))
	for i, e := range ranked {
		out[i] = int(e.Index)
	}
	return out, nil
}

// Surprise returns -log2(p) for p in (0, 1].
func Surprise(p float64) (float64, error) {
	if !(p > 0 && p <= 1) {
		return 0, paramError("probability must be in (0, 1], got %v", p)
	}
	return -math.Log2(p), nil
}

// Perplexity returns 2^s for an average surprise s >= 0 in bits.
func Perplexity(averageSurprise float64) (float64, error) {
	if !(averageSurprise >= 0) || math.IsInf(averageSurprise, 1) {
		return 0, paramError("average surprise must be finite and >= 0, got %v", averageSurprise)
	}
	return math.Exp2(averageSurprise), nil
}

// Entropy returns the Shannon entropy of probs in bits; zero entries add
// nothing.
func Entropy(probs []float64) (float64, error) {
	if err := checkProbs(probs); err != nil {
		return 0, err
	}
	var h float64
	for _, p := range probs {
		if p > 0 {
			h -= p * math.Log2(p)
		}
	}
	return h, nil
}

// PrefixMass returns the original probability of the first keep tokens of
// order.
func PrefixMass(probs []float64, order []int, keep int) (float64, error) {
	if err := checkPrefix(probs, order, keep); err != nil {
		return 0, err
	}
	return prefixMass(probs, order[:keep]), nil
}

// PrefixEntropy returns the entropy in bits of the prefix renormalized to
// sum to 1.
func PrefixEntropy(probs []float64, order []int, keep int) (float64, error) {
	mass, err := massOf(probs, order, keep)
	if err != nil {
		return 0, err
	}
	var h float64
	for _, id := range order[:keep] {
		if q := probs[id] / mass; q > 0 {
			h -= q * math.Log2(q)
		}
	}
	return h, nil
}

// PrefixKL returns the Kullback–Leibler divergence in bits from the
// renormalized prefix to the original row: Σ q log2(q/p) = -log2(mass). It
// is 0 when the prefix holds the whole mass.
func PrefixKL(probs []float64, order []int, keep int) (float64, error) {
	mass, err := massOf(probs, order, keep)
	if err != nil {
		return 0, err
	}
	return max(0, -math.Log2(mass)), nil
}

// ExpectedPrefixSurprise returns the mean surprise, measured on the
// original row, of a token drawn from the renormalized prefix: what Mirostat
// feeds back on average.
func ExpectedPrefixSurprise(probs []float64, order []int, keep int) (float64, error) {
	mean, _, err := prefixSurpriseMoments(probs, order, keep)
	return mean, err
}

// PrefixSurpriseVariance returns the variance, in squared bits, of that
// surprise: how widely single steps scatter around ExpectedPrefixSurprise.
func PrefixSurpriseVariance(probs []float64, order []int, keep int) (float64, error) {
	_, variance, err := prefixSurpriseMoments(probs, order, keep)
	return variance, err
}

// V2PrefixSize returns how many leading tokens of order have surprise at most
// mu, and at least 1: V2's candidate count when order is the rank order.
func V2PrefixSize(probs []float64, order []int, mu float64) (int, error) {
	if err := checkPrefix(probs, order, len(order)); err != nil {
		return 0, err
	}
	if !finite(mu) {
		return 0, paramError("mu must be finite, got %v", mu)
	}
	n := 0
	for n < len(order) && probs[order[n]] > 0 && -math.Log2(probs[order[n]]) <= mu {
		n++
	}
	return max(n, 1), nil
}

// ZipfExponent returns V1's least-squares Zipf exponent over the adjacent
// log-ratios of the first m tokens of order (which should be the rank
// order), stopping at the first zero probability. It returns 0 when fewer
// than two tokens take part; otherwise at least 0.001, the floor that keeps
// k's formula finite on a flat row.
func ZipfExponent(probs []float64, order []int, m int) (float64, error) {
	if err := checkPrefix(probs, order, len(order)); err != nil {
		return 0, err
	}
	if m < 2 {
		return 0, paramError("m must be >= 2, got %d", m)
	}
	lv := make([]float64, 0, min(m, len(order)))
	for _, id := range order[:min(m, len(order))] {
		if probs[id] == 0 {
			break
		}
		lv = append(lv, numeric.Log(probs[id]))
	}
	return zipf.Exponent(lv), nil
}

// AdaptiveK returns V1's k for target mu (bits), Zipf exponent s > 0 and a
// vocabulary of n tokens: (ε·2^mu/(1 - n^-ε))^(1/s) with ε = s - 1, taking
// its limit at s = 1, rounded and clamped to [1, n].
func AdaptiveK(mu, s float64, n int) (int, error) {
	switch {
	case !finite(mu):
		return 0, paramError("mu must be finite, got %v", mu)
	case !finite(s) || s <= 0:
		return 0, paramError("zipf exponent must be finite and > 0, got %v", s)
	case n < 1:
		return 0, paramError("vocabulary must be >= 1, got %d", n)
	}
	k, ok := zipf.K(mu, s, n)
	if !ok {
		return 0, mirostat.ErrNumerical
	}
	return k, nil
}

func prefixSurpriseMoments(probs []float64, order []int, keep int) (mean, variance float64, err error) {
	mass, err := massOf(probs, order, keep)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range order[:keep] {
		if p := probs[id]; p > 0 {
			mean += p / mass * -math.Log2(p)
		}
	}
	for _, id := range order[:keep] {
		if p := probs[id]; p > 0 {
			d := -math.Log2(p) - mean
			variance += p / mass * d * d
		}
	}
	return mean, variance, nil
}

func massOf(probs []float64, order []int, keep int) (float64, error) {
	if err := checkPrefix(probs, order, keep); err != nil {
		return 0, err
	}
	mass := prefixMass(probs, order[:keep])
	if mass == 0 {
		return 0, mirostat.ErrAllMasked
	}
	return mass, nil
}

func prefixMass(probs []float64, ids []int) float64 {
	var m float64
	for _, id := range ids {
		m += probs[id]
	}
	return m
}

// checkProbs validates a probability row.
func checkProbs(probs []float64) error {
	if len(probs) == 0 {
		return mirostat.ErrEmptyRow
	}
	var sum float64
	for i, p := range probs {
		if !(p >= 0 && p <= 1) {
			return &mirostat.IndexError{Index: i, Value: p, Err: mirostat.ErrInvalidProbability}
		}
		sum += p
	}
	if math.Abs(sum-1) > ProbabilityTolerance {
		return fmt.Errorf("%w: probabilities sum to %v", mirostat.ErrInvalidProbability, sum)
	}
	return nil
}

// checkPrefix validates probs, order (distinct ids in range) and keep in
// [1, len(order)].
func checkPrefix(probs []float64, order []int, keep int) error {
	if err := checkProbs(probs); err != nil {
		return err
	}
	if keep < 1 || keep > len(order) {
		return paramError("keep must be in [1, %d], got %d", len(order), keep)
	}
	seen := make([]bool, len(probs))
	for _, id := range order {
		if id < 0 || id >= len(probs) {
			return paramError("token %d outside vocabulary of %d", id, len(probs))
		}
		if seen[id] {
			return paramError("token %d repeated in order", id)
		}
		seen[id] = true
	}
	return nil
}
