package testmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Noisy returns a draft model for m: a Markov model over the same
// vocabulary and states whose transition rows are m's, except that the rows
// of about frac of the states (chosen by seed) are replaced by rows of
// RandomTransitions. Its greedy choice therefore agrees with m's after about
// 1-frac of the tokens (by construction; a replaced row may agree by
// chance), which is what speculative decoding's acceptance rate measures.
func (m *Markov) Noisy(name string, frac float64, seed uint64) (*Markov, error) {
	n := m.Spec.Vocab.Size()
	noise, err := RandomTransitions(n, seed)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x6e6f697379))
	rows := make([][]float64, len(m.LogProbs))
	for s, lp := range m.LogProbs {
		if r.Float64() < frac {
			rows[s] = noise[s%n]
			continue
		}
		rows[s] = make([]float64, len(lp))
		for i, l := range lp {
			if l > LogProbFloor {
				rows[s][i] = math.Exp(float64(l))
			}
		}
	}
	d, err := newMarkov(name, m.Spec.Vocab, slices.Clone(m.StateOf), rows)
	if err != nil {
		return nil, fmt.Errorf("testmodel: noisy copy: %w", err)
	}
	return d, nil
}

// Deeper returns a copy of m that computes the same logits through layers
// layers of feed-forward width nff, all of whose weights are zero: a target
// that costs llama.cpp about as much per token as a real model of that
// shape, whose next-token distributions stay m's (exactly known).
func (m *Markov) Deeper(name string, layers, nff int) *Markov {
	d := *m
	d.Spec.Name = name
	d.Spec.NLayer = max(1, layers)
	d.Spec.NFF = max(64, nff)
	return &d
}
