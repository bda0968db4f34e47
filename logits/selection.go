package logits

import (
	"cmp"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// kthLargest returns the k-th largest value of xs (1 <= k <= len(xs)), counting duplicates, with NaN
// ranked above every number as torch.topk ranks it. It keeps the k largest numbers in r.best, so a
// pass over xs costs one comparison per value once the kept values are large; it never sorts xs.
// Only values matter here, so the entries carry no index: equal values then rank as equals, and a
// row of many ties costs no reordering among them.
func (r *History) kthLargest(xs []float32, k int) float32 {
	b := &r.best
	b.Reset(k)
	nNaN := 0
	i := 0
	for ; i < len(xs) && !b.Full(); i++ {
		if x := xs[i]; x == x {
			b.Offer(numeric.Entry[float32]{Key: x})
		} else {
			nNaN++
		}
	}
	if b.Full() {
		root := b.Worst().Key
		for ; i < len(xs); i++ {
			if x := xs[i]; x > root {
				b.Replace(numeric.Entry[float32]{Key: x})
				root = b.Worst().Key
			} else if x != x {
				nNaN++
			}
		}
	}
	return kthOf(b, xs, k, nNaN)
}

// kthOf returns the k-th largest value of a row from the nNaN NaNs it holds and b, its largest
// numbers (at least k - nNaN of them, or all): the first NaN when k <= nNaN, else the
// (k-nNaN)-th largest number.
func kthOf(b *numeric.Best[float32], xs []float32, k, nNaN int) float32 {
	switch {
	case nNaN >= k:
		return xs[slices.IndexFunc(xs, func(x float32) bool { return x != x })]
	case nNaN == 0:
		return b.Worst().Key
	}
	return b.Sorted()[k-nNaN-1].Key
}

// cmpDesc orders entries by key descending (NaN first), then index ascending: the tie order this
// package uses wherever torch's sort leaves ties unspecified.
func cmpDesc(a, b scored) int {
	an, bn := a.v != a.v, b.v != b.v
	switch {
	case an && !bn:
		return -1
	case bn && !an:
		return 1
	case a.v > b.v:
		return -1
	case a.v < b.v:
		return 1
	}
	return cmp.Compare(a.i, b.i)
}

// topSorted fills r.pairs with the entries of keys that are not -inf and whose key is at least the
// k-th largest (all of them when k >= their number), sorted by cmpDesc, and returns them with the
// number of entries that are not -inf. With cand non-nil, only the listed indices count.
func (r *History) topSorted(keys []float32, cand []int32, k int) (top []scored, total int) {
	pairs := r.pairs[:0]
	if cand != nil {
		for _, i := range cand {
			if keys[i] != negInf {
				pairs = append(pairs, scored{keys[i], i})
			}
		}
		total = len(pairs)
		if k < total {
			thr := r.kthOfPairs(pairs, k)
			pairs = slices.DeleteFunc(pairs, func(p scored) bool { return p.v < thr })
		}
	} else {
		for _, x := range keys {
			if x != negInf {
				total++
			}
		}
		thr := negInf
		if k < total {
			thr = r.kthLargest(keys, k)
		}
		for i, x := range keys {
			if x >= thr && x != negInf || x != x {
				pairs = append(pairs, scored{x, int32(i)})
			}
		}
	}
	slices.SortFunc(pairs, cmpDesc)
	r.pairs = pairs
	return pairs, total
}

// kthOfPairs is kthLargest over the keys of pairs.
func (r *History) kthOfPairs(pairs []scored, k int) float32 {
	keys := r.scratchKeys(len(pairs))
	for i, p := range pairs {
		keys[i] = p.v
	}
	return r.kthLargest(keys, k)
}

// keepTop sets to -inf every entry of scores (or of the candidates, when the row trusts them) that is
// not among top[:keep], where top is a prefix of keys (scores, or a key per entry) in cmpDesc order,
// and updates the candidates. Entries tied with the last kept one are kept lowest index first, as top
// orders them.
func (r *History) keepTop(scores, keys []float32, top []scored, keep int) {
	keep = min(keep, len(top))
	if keep <= 0 {
		return
	}
	thr := top[keep-1].v
	ties := 0
	for _, p := range top[:keep] {
		if p.v == thr {
			ties++
		}
	}
	keepIt := func(x float32) bool {
		switch {
		case x > thr || x != x:
			return true
		case x == thr && ties > 0:
			ties--
			return true
		}
		return false
	}
	if r.trustCandidates(scores) {
		idx := r.cand.idx[:0]
		for _, i := range r.cand.idx {
			if keepIt(keys[i]) {
				idx = append(idx, i)
			} else {
				scores[i] = negInf
			}
		}
		r.cand.idx = idx
		return
	}
	idx := r.cand.idx[:0]
	for i, x := range keys {
		if keepIt(x) {
			idx = append(idx, int32(i))
		} else {
			scores[i] = negInf
		}
	}
	r.cand.idx = idx
	r.setCandidates(scores)
}
