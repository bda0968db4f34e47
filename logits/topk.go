package logits

import (
	"fmt"
	"math"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// TopK is transformers' TopKLogitsWarper: with k' = min(max(k, min_tokens_to_keep), V), every score
// below the k'-th largest becomes -inf. Every score tied with the k'-th largest is kept, so more than
// k' tokens can survive; NaN ranks above every number (torch.topk) and is never removed (with k' NaN
// or more, every number is).
//
// It runs in one pass over the row keeping the k' largest values (a bounded min-heap,
// numeric.Best), never sorting the row: a score below the smallest of them can never reach the k'-th place, so it is set to -inf on the spot;
// the few others are settled after the pass. The survivors become the row's candidates, so that the
// later warpers and Pipeline.Sample work on them alone.
type TopK struct {
	k int
}

// NewTopK returns the warper for top_k > 0 with min_tokens_to_keep minKeep (k is raised to minKeep).
func NewTopK(k, minKeep int) (*TopK, error) {
	if k <= 0 {
		return nil, fmt.Errorf("logits: top_k has to be a strictly positive integer, got %d", k)
	}
	if minKeep < 0 {
		return nil, fmt.Errorf("logits: min_tokens_to_keep has to be a non-negative integer, got %d", minKeep)
	}
	return &TopK{k: max(k, minKeep)}, nil
}

// Name returns "TopKLogitsWarper".
func (*TopK) Name() string { return "TopKLogitsWarper" }

func (*TopK) keepsCandidates() {}

// Process removes every score below the k-th largest.
func (p *TopK) Process(hist *History, scores []float32) {
	if p.k >= len(scores) {
		return
	}
	if hist == nil {
		hist = &History{}
	}
	hist.topK(scores, p.k, nil)
}

// temperatureTopK runs Temperature then TopK as one pass: it selects on the raw scores and divides
// only the survivors. The result equals the two stages run in turn because x -> x/T is
// non-decreasing: the k-th largest quotient is the quotient of the k-th largest score x_k, and a
// score survives iff x/T >= x_k/T.
type temperatureTopK struct {
	t *Temperature
	k *TopK
}

func (f *temperatureTopK) Name() string { return f.t.Name() + "+" + f.k.Name() }

func (*temperatureTopK) keepsCandidates() {}

func (f *temperatureTopK) Process(hist *History, scores []float32) {
	if f.k.k >= len(scores) {
		f.t.Process(hist, scores)
		return
	}
	hist.topK(scores, f.k.k, f.t)
}

// topK keeps the scores whose value is at least the k-th largest (1 <= k < len(scores)) and sets the
// others to -inf; with a temperature, the test is on x/T and the kept scores are divided by T
// (Temperature before TopK). The kept indices become the row's candidates.
func (r *History) topK(scores []float32, k int, temp *Temperature) {
	var t float32
	if temp != nil {
		t = temp.t
	}
	b := &r.best
	var pending []int32
	var nNaN int
	// One pass on the caller's core: with the vector scans a row of 128256
	// takes about 20 µs, and splitting it over two cores took 50-100 µs on
	// this project's VM (the row, just written by the caller, moves between
	// the cores' caches, and a sleeping worker wakes in about 65 µs).
	b.Reset(k)
	pending, nNaN = scanTopK(b, scores, 0, t, chunkFloor(scores, k), r.cand.idx[:0], !r.forSample)
	// The k-th largest, NaN ranking first.
	kept := pending[:0]
	if nNaN >= k {
		// The k largest are NaN: every number goes. (torch would compare with a NaN threshold
		// and remove nothing; the pass has already removed some numbers, as many as the order it
		// met them in allowed, so keeping the rest would make the row depend on that order. A
		// row with a NaN allows no choice either way.)
		for _, j := range pending {
			if x := scores[j]; x == x {
				scores[j] = negInf
			} else {
				kept = append(kept, j)
			}
		}
		r.cand.idx = kept
		r.setCandidates(scores)
		r.cand.stale = r.forSample
		return
	}
	thr := kthOf(b, scores, k, nNaN)
	if temp != nil {
		thrT := quotient(thr, temp.r)
		for _, j := range pending {
			if y := quotient(scores[j], temp.r); y < thrT {
				scores[j] = negInf
			} else {
				scores[j] = y
				kept = append(kept, j)
			}
		}
	} else {
		for _, j := range pending {
			if scores[j] < thr {
				scores[j] = negInf
			} else {
				kept = append(kept, j)
			}
		}
	}
	r.cand.idx = kept
	r.setCandidates(scores)
	r.cand.stale = r.forSample
}

// chunkFloor returns a floor under the k-th largest number of a long row: the
// smallest of the maxima of k chunks of it (k numbers are at least that), so
// that top-k's pass removes most scores before its heap is warm. It is -inf
// (no floor) for a short row, or when a chunk holds a NaN or no number.
func chunkFloor(scores []float32, k int) float32 {
	n := len(scores)
	if n < 64*k {
		return negInf
	}
	floor := float32(math.Inf(1))
	for c := range k {
		m, i, nan := numeric.MaxIndex(scores[c*n/k : (c+1)*n/k])
		if nan || i < 0 {
			return negInf
		}
		floor = min(floor, m)
	}
	return floor
}

// scanTopK is top-k's pass over scores, whose first entry has index base in
// the row: it offers every number to b (reset to k) but those below floor,
// sets to -inf each score that cannot reach the k-th place of b, which only
// grows, or the floor (unless mask is false: the caller then leaves a stale
// row), and returns the indices of the others (every NaN included), in index
// order, appended to pending, with the number of NaN.
func scanTopK(b *numeric.Best[float32], scores []float32, base int32, t, floor float32, pending []int32, mask bool) ([]int32, int) {
	nNaN := 0
	// Below cut, a score (or its quotient) is below the k-th largest.
	low := cutFor(floor, t)
	cut, root := low, negInf
	for i := 0; ; i++ {
		// Once the heap is warm nearly every score is below the cut: MaskBelow
		// sets them to -inf and stops at the next that is not (or a NaN).
		if mask {
			i = numeric.MaskBelow(scores, i, cut)
		} else {
			i = numeric.FirstNotBelow(scores, i, cut)
		}
		if i == len(scores) {
			break
		}
		x := scores[i]
		pending = append(pending, base+int32(i))
		switch {
		case x != x:
			nNaN++
		case !b.Full():
			b.Offer(numeric.Entry[float32]{Key: x})
			if b.Full() {
				root = b.Worst().Key
				cut = max(low, cutFor(root, t))
			}
		case x > root:
			b.Replace(numeric.Entry[float32]{Key: x}) // x > root: it enters
			if w := b.Worst().Key; w != root {
				root = w
				cut = max(low, cutFor(root, t))
			}
		}
	}
	return pending, nNaN
}

// cutFor returns a value below which a score is surely removed when root is the current k-th
// largest: root itself, or with a temperature t the smallest float32 whose quotient by t equals
// root/t (found by stepping down a few ulps; -inf, which removes nothing early, if many values
// share the quotient).
func cutFor(root, t float32) float32 {
	if t == 0 || math.IsInf(float64(root), 0) {
		return root
	}
	q := root / t
	lo := root
	for range 16 {
		next := math.Nextafter32(lo, negInf)
		if next/t != q {
			return lo
		}
		lo = next
	}
	return negInf
}
