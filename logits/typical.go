package logits

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// Typical is transformers' TypicalLogitsWarper (locally typical sampling): with lp = log_softmax(x),
// P = exp(lp) and H = -Σ P·lp, tokens are ranked by d_i = |-lp_i - H| (most typical first); the
// ranked prefix whose probability first reaches typical_p is kept, with every token whose d equals
// the last kept one, and at least min_tokens_to_keep of the most typical tokens.
type Typical struct {
	mass    float32
	minKeep int
}

// NewTypical returns the warper for typical_p in (0, 1) with min_tokens_to_keep minKeep.
func NewTypical(typicalP float64, minKeep int) (*Typical, error) {
	if !(typicalP > 0 && typicalP < 1) {
		return nil, fmt.Errorf("logits: typical_p has to be a float in (0, 1), got %v", typicalP)
	}
	if minKeep < 1 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a positive integer, got %d", minKeep)
	}
	return &Typical{mass: f32(typicalP), minKeep: minKeep}, nil
}

// Name returns "TypicalLogitsWarper".
func (*Typical) Name() string { return "TypicalLogitsWarper" }

func (*Typical) keepsCandidates() {}

// Process removes the atypical tokens.
func (p *Typical) Process(hist *History, scores []float32) {
	hist, cand := warpInput(hist, scores)
	m, sum, ok := softmaxNorm(scores, cand)
	if !ok {
		return
	}
	fm := float64(m)
	logSum := float32(math.Log(sum))
	// Entropy in float64: H = -Σ P_i lp_i over the finite tokens (nansum skips the -inf ones).
	h := 0.0
	each := func(fn func(i int32, x float32)) {
		if cand == nil {
			for i, x := range scores {
				fn(int32(i), x)
			}
		} else {
			for _, i := range cand {
				fn(i, scores[i])
			}
		}
	}
	each(func(_ int32, x float32) {
		if lp := (x - m) - logSum; lp != negInf { // -inf·0 is NaN, which nansum skips
			h -= numeric.Exp(widen(lp)) * widen(lp)
		}
	})
	h32 := float32(h)
	// keys = -d, so that the most typical token has the largest key; -inf scores get -inf.
	keys := hist.dist
	if cap(keys) < len(scores) {
		keys = make([]float32, len(scores))
		hist.dist = keys
	}
	keys = keys[:len(scores)]
	each(func(i int32, x float32) {
		if x == negInf {
			keys[i] = negInf
		} else {
			lp := (x - m) - logSum
			keys[i] = -abs32(-lp - h32)
		}
	})
	for k := max(256, p.minKeep); ; k *= 4 {
		top, total := hist.topSorted(keys, cand, k)
		cum := 0.0
		for j, e := range top {
			cum += numeric.Exp(widen(scores[e.i])-fm) / sum
			if float32(cum) >= p.mass {
				last := j
				for last+1 < len(top) && top[last+1].v == top[j].v {
					last++
				}
				hist.keepTop(scores, keys, top, max(last+1, p.minKeep))
				return
			}
		}
		if len(top) >= total {
			return // the mass is never reached: every token is kept
		}
	}
}
