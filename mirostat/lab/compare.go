package lab

import (
	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// Stateless samplers for comparing Mirostat with fixed truncations on the same rows and draws.
// Each takes a row of logits and one uniform u in [0, 1), truncates the row with the logits warper
// of its rule (min_tokens_to_keep 1), and draws among the survivors with a Sampler's draw (see the
// package documentation).

// DrawPrefix draws from the first keep tokens of order, renormalized, with the Sampler's inverse
// CDF: the first token whose running probability exceeds u times the prefix's mass.
func DrawPrefix(probs []float64, order []int, keep int, u float64) (int, error) {
	if err := checkUniform(u); err != nil {
		return 0, err
	}
	if _, err := massOf(probs, order, keep); err != nil {
		return 0, err
	}
	p := make([]float64, keep)
	for i, id := range order[:keep] {
		p[i] = probs[id]
	}
	return order[numeric.InverseCDF(p, u)], nil
}

// DrawCandidates draws from a list of distinct token ids, in the given order: DrawPrefix over the
// whole list.
func DrawCandidates(probs []float64, candidates []int, u float64) (int, error) {
	return DrawPrefix(probs, candidates, len(candidates), u)
}

// SampleTopK draws from the k most probable tokens and those tied with the k-th (k >= 1; more than
// the row is the row): logits' TopK.
func SampleTopK(row []float32, k int, u float64) (int, error) {
	w, err := logits.NewTopK(k, 1)
	return sampleWarped(row, u, w, err)
}

// SampleTopP draws from the smallest set of most probable tokens whose probability reaches p, in
// [0, 1] (nucleus sampling, Holtzman et al., 2020): logits' TopP.
func SampleTopP(row []float32, p float64, u float64) (int, error) {
	w, err := logits.NewTopP(p, 1)
	return sampleWarped(row, u, w, err)
}

// SampleMinP draws from the tokens with probability at least minP, in [0, 1], times the top
// token's: logits' MinP.
func SampleMinP(row []float32, minP float64, u float64) (int, error) {
	w, err := logits.NewMinP(minP, 1)
	return sampleWarped(row, u, w, err)
}

// SampleEpsilon draws from the tokens with probability at least epsilon, in (0, 1) (Hewitt et al.,
// 2022), always keeping the top token: logits' Epsilon.
func SampleEpsilon(row []float32, epsilon float64, u float64) (int, error) {
	w, err := logits.NewEpsilon(epsilon, 1)
	return sampleWarped(row, u, w, err)
}

// SampleTypical draws from the smallest locally typical set whose probability reaches mass, in
// (0, 1) (Meister et al., 2023): logits' Typical. The draw ranks the set by probability, as every
// sampler here does.
func SampleTypical(row []float32, mass float64, u float64) (int, error) {
	w, err := logits.NewTypical(mass, 1)
	return sampleWarped(row, u, w, err)
}

// SampleTemperature draws from the whole row at temperature t > 0: logits' Temperature.
func SampleTemperature(row []float32, t float64, u float64) (int, error) {
	w, err := logits.NewTemperature(t)
	return sampleWarped(row, u, w, err)
}

// sampleWarped applies w (built with error err) to a copy of row and draws among the tokens it
// keeps.
func sampleWarped(row []float32, u float64, w logits.Processor, err error) (int, error) {
	if err != nil {
		return 0, rejected(err)
	}
	if err := checkUniform(u); err != nil {
		return 0, err
	}
	if err := checkLogits(row); err != nil {
		return 0, err
	}
	kept, err := transform(row, nil, w)
	if err != nil {
		return 0, err
	}
	return draw(kept, u)
}

// draw is a Sampler's draw over the unmasked tokens of row: ranked by probability under
// Mirostat's normalizer, then numeric.InverseCDF.
func draw(row []float32, u float64) (int, error) {
	p, err := mirostat.PrepareLogits(row)
	if err != nil {
		return 0, err
	}
	var tokens []int
	var probs []float64
	for tok, q := range p.Ranked() {
		tokens = append(tokens, int(tok))
		probs = append(probs, q)
	}
	return tokens[numeric.InverseCDF(probs, u)], nil
}
