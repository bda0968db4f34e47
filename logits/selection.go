package logits

import (
	"cmp"
	"slices"
)

// kthLargest returns the k-th largest value of xs (1 <= k <= len(xs)), counting duplicates, with NaN
// ranked above every number as torch.topk ranks it. It keeps a min-heap of k values in r.heap, so
// a pass over xs costs one comparison per value once the heap holds large values; it never sorts xs.
func (r *History) kthLargest(xs []float32, k int) float32 {
	if cap(r.heap) < k {
		r.heap = make([]float32, 0, k)
	}
	h := r.heap[:0]
	nNaN := 0
	i := 0
	for ; i < len(xs) && len(h) < k; i++ {
		x := xs[i]
		if x != x {
			nNaN++
			continue
		}
		h = append(h, x)
		heapUp(h, len(h)-1)
	}
	if len(h) == k {
		root := h[0]
		for _, x := range xs[i:] {
			if x > root {
				h[0] = x
				heapDown(h)
				root = h[0]
			} else if x != x {
				nNaN++
			}
		}
	}
	r.heap = h
	if nNaN >= k {
		return xs[slices.IndexFunc(xs, func(x float32) bool { return x != x })]
	}
	if nNaN == 0 {
		return h[0]
	}
	// The k-th largest overall is the (k-nNaN)-th largest number.
	slices.Sort(h)
	return h[len(h)-(k-nNaN)]
}

// heapUp and heapDown maintain a min-heap of float32 (no NaN inside).
func heapUp(h []float32, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent] <= h[i] {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func heapDown(h []float32) {
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
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
