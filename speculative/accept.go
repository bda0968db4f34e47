package speculative

import "github.com/llamaloop/llamaloop/logits"

// Accept is transformers' _speculative_sampling at one candidate x drawn
// from the draft distribution q (Leviathan et al., algorithm 1): with p the
// softmax of the target's processed scores, written into p, x is kept when
// u <= p(x)/q(x) for a uniform u of src; otherwise the token is drawn from
// max(0, p-q) normalised with a second uniform. ok is false, and nothing
// is chosen, when p holds no probabilities (a NaN or +inf score): the
// caller's chooser then decides and reports why.
func Accept(p, q, scores []float32, x int32, src *logits.Source) (tok int32, accepted, ok bool) {
	logits.Softmax(p, scores)
	if p[x] != p[x] {
		return -1, false, false
	}
	if u := src.Float64(); u*float64(q[x]) <= float64(p[x]) {
		return x, true, true
	}
	u := src.Float64()
	var sum float64
	for k, pk := range p {
		if w := float64(pk) - float64(q[k]); w > 0 {
			sum += w
		}
	}
	if sum == 0 {
		// p <= q everywhere, which rounding alone allows: p itself.
		k, ok := logits.SampleIndex(scores, u)
		return int32(k), false, ok
	}
	target, acc, last := u*sum, 0.0, -1
	for k, pk := range p {
		if w := float64(pk) - float64(q[k]); w > 0 {
			acc += w
			last = k
			if acc > target {
				return int32(k), false, true
			}
		}
	}
	return int32(last), false, true
}
