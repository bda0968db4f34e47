package logits

import (
	"fmt"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// TopP is transformers' TopPLogitsWarper (nucleus sampling): it keeps the smallest set of most
// probable tokens whose probability reaches top_p, plus the token that crosses it, and never fewer
// than min_tokens_to_keep. In transformers' terms: sort ascending, take the cumulative softmax
// (accumulated in float64, each prefix rounded to float32), remove every token whose cumulative
// probability is <= f32(1 - top_p), except the last min_tokens_to_keep. top_p = 0 keeps only
// min_tokens_to_keep tokens.
//
// It sorts only the tokens it may keep: the candidates left by TopK, or otherwise the top of the row
// found by bounded selection, widened until the threshold is crossed. Ties at the boundary are kept
// lowest index first (torch leaves their order unspecified).
type TopP struct {
	thr     float32 // f32(1 - top_p)
	minKeep int
}

// NewTopP returns the warper for top_p in [0, 1] with min_tokens_to_keep minKeep.
func NewTopP(topP float64, minKeep int) (*TopP, error) {
	if !(topP >= 0 && topP <= 1) {
		return nil, fmt.Errorf("logits: top_p has to be a float in [0, 1], got %v", topP)
	}
	if minKeep < 1 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a positive integer, got %d", minKeep)
	}
	return &TopP{thr: f32(1 - topP), minKeep: minKeep}, nil
}

// Name returns "TopPLogitsWarper".
func (*TopP) Name() string { return "TopPLogitsWarper" }

func (*TopP) keepsCandidates() {}

func (*TopP) readsCandidatesOnly() {}

// Process removes the tokens outside the nucleus.
func (p *TopP) Process(hist *History, scores []float32) {
	hist, cand := warpInput(hist, scores)
	m, sum, ok := softmaxNorm(scores, cand)
	if !ok {
		return
	}
	fm := float64(m)
	for k := 256; ; k *= 4 {
		top, total := hist.topSorted(scores, cand, k)
		// Walk from the most probable token: the ascending cumulative probability of top[j] is the
		// mass of everything from top[j] down, (sum - above)/sum.
		above := 0.0
		for j, e := range top {
			if j >= p.minKeep && float32((sum-above)/sum) <= p.thr {
				hist.keepTop(scores, scores, top, j)
				return
			}
			above += numeric.Exp(widen(e.v) - fm)
		}
		if len(top) >= total {
			return // every token is kept
		}
	}
}

// softmaxNorm returns the max and Σ exp(x - max) (float64) of the row, or of the listed candidates.
// ok is false when the row holds NaN or +inf or is all -inf: the warpers then leave it alone (torch
// would produce NaN or raise).
func softmaxNorm(scores []float32, cand []int32) (m float32, sum float64, ok bool) {
	m = negInf
	if cand == nil {
		for _, x := range scores {
			if x > m {
				m = x
			} else if x != x {
				return 0, 0, false
			}
		}
	} else {
		for _, i := range cand {
			if x := scores[i]; x > m {
				m = x
			} else if x != x {
				return 0, 0, false
			}
		}
	}
	if m == negInf || m > maxFloat32 {
		return 0, 0, false
	}
	if cand == nil {
		return m, numeric.ExpSum(scores, float64(m)), true
	}
	return m, numeric.ExpSumAt(scores, cand, float64(m)), true
}
