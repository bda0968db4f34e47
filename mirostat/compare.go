package mirostat

import (
	"math"
	"slices"
)

// Stateless samplers for comparing Mirostat with fixed truncations on the
// same rows and draws. Each takes a row of logits and one uniform u in
// [0, 1), truncates the ranked row by its rule, and draws with the same
// inverse CDF as Sampler. Their *PrefixSize helpers expose the truncation.

// DrawPrefix draws from the first keep tokens of order, renormalized, with
// the Sampler's inverse CDF: the first token whose running probability
// exceeds u times the prefix's mass.
func DrawPrefix(probs []float64, order []int, keep int, u float64) (int, error) {
	if err := checkUniform(u); err != nil {
		return 0, err
	}
	if _, err := massOf(probs, order, keep); err != nil {
		return 0, err
	}
	return drawPrefix(probs, order[:keep], u), nil
}

// DrawCandidates draws from a list of distinct token ids, in the given
// order: DrawPrefix over the whole list.
func DrawCandidates(probs []float64, candidates []int, u float64) (int, error) {
	return DrawPrefix(probs, candidates, len(candidates), u)
}

func drawPrefix(probs []float64, ids []int, u float64) int {
	p := make([]float64, len(ids))
	for i, id := range ids {
		p[i] = probs[id]
	}
	return ids[inverseCDF(p, u)]
}

// TopPPrefixSize returns the size of the smallest prefix whose mass reaches
// p, in (0, 1].
func TopPPrefixSize(probs []float64, order []int, p float64) (int, error) {
	if !(p > 0 && p <= 1) {
		return 0, paramError("top-p must be in (0, 1], got %v", p)
	}
	if err := checkPrefix(probs, order, len(order)); err != nil {
		return 0, err
	}
	var mass float64
	for i, id := range order {
		if mass += probs[id]; mass >= p {
			return i + 1, nil
		}
	}
	return len(order), nil // rounding kept the sum just under p
}

// MinPPrefixSize returns how many leading tokens have probability at least
// minP (in [0, 1]) times the first token's, and at least 1.
func MinPPrefixSize(probs []float64, order []int, minP float64) (int, error) {
	if !(minP >= 0 && minP <= 1) {
		return 0, paramError("min-p must be in [0, 1], got %v", minP)
	}
	if err := checkPrefix(probs, order, len(order)); err != nil {
		return 0, err
	}
	return leadingAtLeast(probs, order, minP*probs[order[0]]), nil
}

// EpsilonPrefixSize returns how many leading tokens have probability at
// least epsilon (in [0, 1)), and at least 1.
func EpsilonPrefixSize(probs []float64, order []int, epsilon float64) (int, error) {
	if !(epsilon >= 0 && epsilon < 1) {
		return 0, paramError("epsilon must be in [0, 1), got %v", epsilon)
	}
	if err := checkPrefix(probs, order, len(order)); err != nil {
		return 0, err
	}
	return leadingAtLeast(probs, order, epsilon), nil
}

func leadingAtLeast(probs []float64, order []int, floor float64) int {
	n := 1
	for n < len(order) && probs[order[n]] >= floor {
		n++
	}
	return n
}

// TypicalOrder orders tokens for locally typical sampling (Meister et al.,
// 2023): by the distance between their surprise and the row's entropy,
// nearest first, zero-probability tokens last, ties by smaller id.
func TypicalOrder(probs []float64) ([]int, error) {
	h, err := Entropy(probs)
	if err != nil {
		return nil, err
	}
	dist := make([]float64, len(probs))
	order := make([]int, len(probs))
	for i, p := range probs {
		order[i] = i
		dist[i] = math.Inf(1)
		if p > 0 {
			dist[i] = math.Abs(-math.Log2(p) - h)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return byRank(cand{v: -dist[a]}, cand{v: -dist[b]}) })
	return order, nil
}

// TypicalPrefixSize returns the size of the smallest prefix of a typical
// order whose mass reaches mass, in (0, 1]. It is TopPPrefixSize under
// another order.
func TypicalPrefixSize(probs []float64, order []int, mass float64) (int, error) {
	return TopPPrefixSize(probs, order, mass)
}

// SampleTopK draws from the k most probable tokens (k >= 1; more than the
// row is the row).
func SampleTopK(logits []float32, k int, u float64) (int, error) {
	if k < 1 {
		return 0, paramError("k must be >= 1, got %d", k)
	}
	probs, err := compareProbs(logits, u)
	if err != nil {
		return 0, err
	}
	order, err := TopIndices(probs, k)
	if err != nil {
		return 0, err
	}
	return drawPrefix(probs, order, u), nil
}

// SampleTopP draws from the smallest ranked prefix with mass at least p
// (nucleus sampling, Holtzman et al., 2020).
func SampleTopP(logits []float32, p float64, u float64) (int, error) {
	return sampleRanked(logits, u, func(probs []float64, order []int) (int, error) {
		return TopPPrefixSize(probs, order, p)
	})
}

// SampleMinP draws from the tokens with probability at least minP times the
// top token's.
func SampleMinP(logits []float32, minP float64, u float64) (int, error) {
	return sampleRanked(logits, u, func(probs []float64, order []int) (int, error) {
		return MinPPrefixSize(probs, order, minP)
	})
}

// SampleEpsilon draws from the tokens with probability at least epsilon
// (Hewitt et al., 2022), always keeping the top token.
func SampleEpsilon(logits []float32, epsilon float64, u float64) (int, error) {
	return sampleRanked(logits, u, func(probs []float64, order []int) (int, error) {
		return EpsilonPrefixSize(probs, order, epsilon)
	})
}

// SampleTypical draws from the smallest locally typical set with mass at
// least mass, in typical order.
func SampleTypical(logits []float32, mass float64, u float64) (int, error) {
	probs, err := compareProbs(logits, u)
	if err != nil {
		return 0, err
	}
	order, err := TypicalOrder(probs)
	if err != nil {
		return 0, err
	}
	keep, err := TypicalPrefixSize(probs, order, mass)
	if err != nil {
		return 0, err
	}
	return drawPrefix(probs, order[:keep], u), nil
}

// SampleTemperature draws from the whole row at temperature t > 0.
func SampleTemperature(logits []float32, t float64, u float64) (int, error) {
	scaled, err := WithTemperature(logits, t)
	if err != nil {
		return 0, err
	}
	return sampleRanked(scaled, u, func(_ []float64, order []int) (int, error) { return len(order), nil })
}

func sampleRanked(logits []float32, u float64, size func(probs []float64, order []int) (int, error)) (int, error) {
	probs, err := compareProbs(logits, u)
	if err != nil {
		return 0, err
	}
	order, err := Rank(probs)
	if err != nil {
		return 0, err
	}
	keep, err := size(probs, order)
	if err != nil {
		return 0, err
	}
	return drawPrefix(probs, order[:keep], u), nil
}

func compareProbs(logits []float32, u float64) ([]float64, error) {
	if err := checkUniform(u); err != nil {
		return nil, err
	}
	return Probabilities(logits)
}
