package logits

import (
	"fmt"
	"math"
)

// MinP is transformers' MinPLogitsWarper: with P = softmax(scores), a token is removed when
// P_i < f32(min_p) * max(P), except the min_tokens_to_keep highest scores. min_p = 0 keeps everything.
// Since P_i / max(P) = exp(x_i - max), the test is done on the scores themselves,
// x_i - max < log(f32(min_p)), with no exponential per token; it can differ from torch's float32
// probabilities only for a token within rounding of the threshold.
type MinP struct {
	minP    float32
	minKeep int
}

// NewMinP returns the warper for min_p in [0, 1] with min_tokens_to_keep minKeep.
func NewMinP(minP float64, minKeep int) (*MinP, error) {
	if !(minP >= 0 && minP <= 1) {
		return nil, fmt.Errorf("logits: min_p has to be a float in [0, 1], got %v", minP)
	}
	if minKeep < 1 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a positive integer, got %d", minKeep)
	}
	return &MinP{minP: f32(minP), minKeep: minKeep}, nil
}

// Name returns "MinPLogitsWarper".
func (*MinP) Name() string { return "MinPLogitsWarper" }

func (*MinP) keepsCandidates() {}

// Process removes the tokens far less probable than the most probable one.
func (p *MinP) Process(hist *History, scores []float32) {
	hist, cand := warpInput(hist, scores)
	m, ok := finiteMax(scores, cand)
	if !ok {
		return
	}
	cut := float64(m) + math.Log(float64(p.minP))
	removeBelow(hist, scores, cand, m, cut, p.minKeep, false)
}

// finiteMax returns the max of the row (or candidates); ok is false when the row holds NaN or +inf
// or is all -inf, which the warpers leave alone.
func finiteMax(scores []float32, cand []int32) (float32, bool) {
	m := negInf
	if cand == nil {
		m = rowMax(scores)
	} else {
		for _, i := range cand {
			if x := scores[i]; x > m {
				m = x
			} else if x != x {
				return 0, false
			}
		}
	}
	return m, m == m && m != negInf && m <= maxFloat32
}

// removeBelow sets to -inf every score x with float64(x) < cut, except the minKeep highest scores,
// and updates the candidates. With keepTies, every score tied with the minKeep-th largest is kept
// too (a "score < k-th largest" test, as Epsilon and Eta do); otherwise exactly minKeep are kept,
// lowest index first among ties (MinP's argsort).
func removeBelow(hist *History, scores []float32, cand []int32, m float32, cut float64, minKeep int, keepTies bool) {
	c := ceil32(cut) // x < cut iff x < c, for every float32 x
	kept := 0
	if minKeep <= 1 && c <= m {
		kept = 1 // the max survives; no need to count
	} else if cand != nil {
		for _, i := range cand {
			if !(scores[i] < c) {
				kept++
			}
		}
	} else {
		for _, x := range scores {
			if !(x < c) {
				kept++
			}
		}
	}
	if kept < minKeep {
		top, _ := hist.topSorted(scores, cand, minKeep)
		if !keepTies {
			hist.keepTop(scores, scores, top, minKeep)
			return
		}
		if len(top) >= minKeep {
			c = min(c, top[minKeep-1].v)
		}
	}
	if cand != nil {
		idx := cand[:0]
		for _, i := range cand {
			if scores[i] < c {
				scores[i] = negInf
			} else {
				idx = append(idx, i)
			}
		}
		hist.cand.idx = idx
		return
	}
	idx := hist.cand.idx[:0]
	for i, x := range scores {
		if x < c {
			scores[i] = negInf
		} else if x != negInf {
			idx = append(idx, int32(i))
		}
	}
	hist.cand.idx = idx
	hist.setCandidates(scores)
}

// ceil32 returns the smallest float32 that is >= x (x itself when it is a float32).
func ceil32(x float64) float32 {
	c := float32(x)
	if float64(c) < x {
		c = math.Nextafter32(c, float32(math.Inf(1)))
	}
	return c
}
