package logits

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// Epsilon is transformers' EpsilonLogitsWarper (epsilon sampling): a token is removed when its
// probability is below f32(epsilon) and its score is below the min_tokens_to_keep-th largest score.
// The probability test is done on the scores, x_i < max + log(ε·Σ exp(x - max)).
type Epsilon struct {
	eps     float32
	minKeep int
}

// NewEpsilon returns the warper for epsilon_cutoff in (0, 1) with min_tokens_to_keep minKeep.
func NewEpsilon(epsilon float64, minKeep int) (*Epsilon, error) {
	if !(epsilon > 0 && epsilon < 1) {
		return nil, fmt.Errorf("logits: epsilon_cutoff has to be a float in (0, 1), got %v", epsilon)
	}
	if minKeep < 1 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a positive integer, got %d", minKeep)
	}
	return &Epsilon{eps: f32(epsilon), minKeep: minKeep}, nil
}

// Name returns "EpsilonLogitsWarper".
func (*Epsilon) Name() string { return "EpsilonLogitsWarper" }

func (*Epsilon) keepsCandidates() {}

// Process removes the improbable tokens.
func (p *Epsilon) Process(hist *History, scores []float32) {
	hist, cand := warpInput(hist, scores)
	m, sum, ok := softmaxNorm(scores, cand)
	if !ok {
		return
	}
	cut := float64(m) + math.Log(float64(p.eps)*sum)
	removeBelow(hist, scores, cand, m, cut, p.minKeep, true)
}

// Eta is transformers' EtaLogitsWarper (eta sampling): with H the entropy of softmax(scores) and
// η = min(ε, √ε·exp(-H)) in float32, a token is removed when its probability is below η and its score
// is below the min_tokens_to_keep-th largest score.
type Eta struct {
	eps     float32
	minKeep int
}

// NewEta returns the warper for eta_cutoff in (0, 1) with min_tokens_to_keep minKeep.
func NewEta(epsilon float64, minKeep int) (*Eta, error) {
	if !(epsilon > 0 && epsilon < 1) {
		return nil, fmt.Errorf("logits: eta_cutoff has to be a float in (0, 1), got %v", epsilon)
	}
	if minKeep < 1 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a positive integer, got %d", minKeep)
	}
	return &Eta{eps: f32(epsilon), minKeep: minKeep}, nil
}

// Name returns "EtaLogitsWarper".
func (*Eta) Name() string { return "EtaLogitsWarper" }

func (*Eta) keepsCandidates() {}

// Process removes the tokens less probable than η.
func (p *Eta) Process(hist *History, scores []float32) {
	hist, cand := warpInput(hist, scores)
	m, ok := finiteMax(scores, cand)
	if !ok {
		return
	}
	// One pass for S = Σ e_i and Σ e_i (x_i - m), with e_i = exp(x_i - m):
	// H = log S - Σ e_i (x_i - m) / S.
	fm := float64(m)
	sum, dot := 0.0, 0.0
	if cand == nil {
		for _, x := range scores {
			if x != negInf {
				d := widen(x) - fm
				e := numeric.Exp(d)
				sum += e
				dot += e * d
			}
		}
	} else {
		for _, i := range cand {
			if x := scores[i]; x != negInf {
				d := widen(x) - fm
				e := numeric.Exp(d)
				sum += e
				dot += e * d
			}
		}
	}
	h := float32(math.Log(sum) - dot/sum)
	eta := min(p.eps, float32(math.Sqrt(float64(p.eps)))*float32(math.Exp(-float64(h))))
	cut := fm + math.Log(float64(eta)*sum)
	removeBelow(hist, scores, cand, m, cut, p.minKeep, true)
}
