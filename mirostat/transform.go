package mirostat

import (
	"math"
)

// Row transforms to apply before sampling. Mirostat measures surprise on the
// row it is given, so whatever a transform does shows in the feedback: keep
// them explicit. Each returns a new row and leaves its input untouched; the
// input must be a valid row (no NaN or +Inf) and the result must keep at
// least one token.

var negInf = float32(math.Inf(-1))

// Mask keeps the tokens whose allowed entry is true and masks the others
// (-Inf). allowed must be as long as logits.
func Mask(logits []float32, allowed []bool) ([]float32, error) {
	if len(allowed) != len(logits) {
		return nil, paramError("mask of %d entries for a row of %d", len(allowed), len(logits))
	}
	return transform(logits, func(out []float32) error {
		for i, ok := range allowed {
			if !ok {
				out[i] = negInf
			}
		}
		return nil
	})
}

// Allow masks every token not listed in ids.
func Allow(logits []float32, ids []int) ([]float32, error) {
	return transform(logits, func(out []float32) error {
		if err := checkIDs(ids, len(out)); err != nil {
			return err
		}
		keep := make([]bool, len(out))
		for _, id := range ids {
			keep[id] = true
		}
		for i, ok := range keep {
			if !ok {
				out[i] = negInf
			}
		}
		return nil
	})
}

// Block masks every token listed in ids; repeats are harmless.
func Block(logits []float32, ids []int) ([]float32, error) {
	return transform(logits, func(out []float32) error {
		if err := checkIDs(ids, len(out)); err != nil {
			return err
		}
		for _, id := range ids {
			out[id] = negInf
		}
		return nil
	})
}

// Bias adds bias[id] to the logit of each listed token. Biases must be
// finite; masked tokens stay masked.
func Bias(logits []float32, bias map[int]float32) ([]float32, error) {
	return transform(logits, func(out []float32) error {
		for id, b := range bias {
			if id < 0 || id >= len(out) {
				return paramError("token %d outside vocabulary of %d", id, len(out))
			}
			if x := float64(b); math.IsNaN(x) || math.IsInf(x, 0) {
				return paramError("bias for token %d must be finite, got %v", id, b)
			}
			out[id] += b
		}
		return nil
	})
}

// PenalizeRepetition applies the CTRL repetition penalty (Keskar et al.,
// 2019) once to every token that occurs in history: a positive logit is
// divided by penalty, a negative one multiplied. penalty must be finite and
// > 0; 1 changes nothing.
func PenalizeRepetition(logits []float32, history []int, penalty float64) ([]float32, error) {
	if !finite(penalty) || penalty <= 0 {
		return nil, paramError("repetition penalty must be finite and > 0, got %v", penalty)
	}
	return transform(logits, func(out []float32) error {
		if err := checkIDs(history, len(out)); err != nil {
			return err
		}
		done := make(map[int]bool, len(history))
		for _, id := range history {
			if done[id] {
				continue
			}
			done[id] = true
			if x := float64(out[id]); x > 0 {
				out[id] = float32(x / penalty)
			} else {
				out[id] = float32(x * penalty)
			}
		}
		return nil
	})
}

// PenalizeCounts subtracts presence once from every token that occurs in
// history and frequency once per occurrence (OpenAI's presence and frequency
// penalties). Negative values reward repetition; both must be finite.
func PenalizeCounts(logits []float32, history []int, presence, frequency float64) ([]float32, error) {
	if !finite(presence) || !finite(frequency) {
		return nil, paramError("presence %v and frequency %v must be finite", presence, frequency)
	}
	return transform(logits, func(out []float32) error {
		if err := checkIDs(history, len(out)); err != nil {
			return err
		}
		counts := make(map[int]int, len(history))
		for _, id := range history {
			counts[id]++
		}
		for id, n := range counts {
			out[id] = float32(float64(out[id]) - presence - frequency*float64(n))
		}
		return nil
	})
}

// WithTemperature divides every logit by t, which must be finite and > 0.
func WithTemperature(logits []float32, t float64) ([]float32, error) {
	if !finite(t) || t <= 0 {
		return nil, paramError("temperature must be finite and > 0, got %v", t)
	}
	return transform(logits, func(out []float32) error {
		for i, x := range out {
			out[i] = float32(float64(x) / t)
		}
		return nil
	})
}

// transform validates logits, applies f to a copy, and checks that the
// result is a valid row: an overflow to +Inf is ErrNumerical, and a row
// with nothing left is ErrAllMasked.
func transform(logits []float32, f func(out []float32) error) ([]float32, error) {
	if len(logits) == 0 {
		return nil, ErrEmptyRow
	}
	if err := firstNonFiniteLogit(logits); err != nil {
		return nil, err
	}
	out := append([]float32(nil), logits...)
	if err := f(out); err != nil {
		return nil, err
	}
	live := false
	for _, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 1) {
			return nil, ErrNumerical
		}
		live = live || x > negInf
	}
	if !live {
		return nil, ErrAllMasked
	}
	return out, nil
}

func checkIDs(ids []int, n int) error {
	for _, id := range ids {
		if id < 0 || id >= n {
			return paramError("token %d outside vocabulary of %d", id, n)
		}
	}
	return nil
}
