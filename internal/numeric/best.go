package numeric

import "cmp"

// Entry is one item of a ranking: its key, and the index that orders equal keys (a token id, a
// flat candidate index).
type Entry[K cmp.Ordered] struct {
	Key   K
	Index int32
}

// Before reports whether e ranks before o: a larger key, or an equal key and a smaller index.
func (e Entry[K]) Before(o Entry[K]) bool {
	if e.Key > o.Key {
		return true
	}
	return !(e.Key < o.Key) && e.Index < o.Index
}

// Best keeps the n best entries offered to it: the n that rank first under [Entry.Before]. Once it
// holds n entries it is a min-heap whose root is the worst one kept, so an entry that cannot enter
// costs one comparison and one that does O(log n); the first n are only appended, then arranged
// into a heap at once (O(n)). Keys must not be NaN (rank NaN before Offer).
//
// A caller that offers the entries of a row in increasing index order can test the key alone
// ([Best.Admits]) before it builds an entry: an entry whose key equals the worst one's has a
// larger index and cannot enter. The zero value keeps nothing; [Best.Reset] sets n and keeps the
// storage, so that a Best reused from step to step does not allocate.
type Best[K cmp.Ordered] struct {
	h []Entry[K]
	n int
}

// Reset empties b and sets the number of entries it keeps (n >= 0).
func (b *Best[K]) Reset(n int) {
	if cap(b.h) < n {
		b.h = make([]Entry[K], 0, n)
	}
	b.h, b.n = b.h[:0], n
}

// Len returns the number of entries kept.
func (b *Best[K]) Len() int { return len(b.h) }

// Full reports whether b keeps n entries, so that an entry enters only by displacing the worst.
func (b *Best[K]) Full() bool { return len(b.h) >= b.n }

// Worst returns the worst entry kept; b must be full (and n > 0): the worst of fewer is not
// tracked.
func (b *Best[K]) Worst() Entry[K] { return b.h[0] }

// Admits reports whether an entry of key k, offered after every entry kept in index order (so
// with a larger index), would enter: b is not full, or k is larger than the worst key kept. It
// is the test a scan of a row makes before it builds an entry.
func (b *Best[K]) Admits(k K) bool { return len(b.h) < b.n || (b.n > 0 && k > b.h[0].Key) }

// Offer enters e when b is not full, or when e ranks before the worst entry kept, which it then
// displaces. It reports whether e entered.
func (b *Best[K]) Offer(e Entry[K]) bool {
	if len(b.h) < b.n {
		b.h = append(b.h, e)
		if len(b.h) == b.n {
			b.heapify()
		}
		return true
	}
	if len(b.h) == 0 || !e.Before(b.h[0]) {
		return false
	}
	b.sift(0, e)
	return true
}

// Replace puts e in place of the worst entry kept, which e must rank before (a full b, and an
// entry that Admits or Before has let in): Offer for a scan that has already compared, with one
// call less per entry that enters, which is most of the cost of a top-k over a row.
func (b *Best[K]) Replace(e Entry[K]) { b.sift(0, e) }

// Sorted returns the entries kept, best first, and leaves b empty; the slice aliases b's storage
// and is valid until the next Reset or Offer.
func (b *Best[K]) Sorted() []Entry[K] {
	if len(b.h) < b.n {
		b.heapify() // fewer than n were offered: they are not a heap yet
	}
	h := b.h
	// Heap sort: the root, the worst, goes to the end of what is left.
	for end := len(h) - 1; end > 0; end-- {
		last := h[end]
		h[end] = h[0]
		b.h = h[:end]
		b.sift(0, last)
	}
	b.h = h[:0]
	return h
}

// Keys appends the keys of the entries kept, in heap order, to dst (for a caller that only needs
// their values, such as the k-th largest key, without ordering them).
func (b *Best[K]) Keys(dst []K) []K {
	for _, e := range b.h {
		dst = append(dst, e.Key)
	}
	return dst
}

// heapify arranges the entries into a heap, bottom up (Floyd): O(n), where n pushes would cost
// O(n log n).
func (b *Best[K]) heapify() {
	for i := len(b.h)/2 - 1; i >= 0; i-- {
		b.sift(uint(i), b.h[i])
	}
}

// sift puts e at h[i] and moves it towards the leaves while a child ranks after it, through a
// hole rather than swaps. The indices are unsigned so that the compiler can drop the bounds
// checks.
func (b *Best[K]) sift(i uint, e Entry[K]) {
	h := b.h
	n := uint(len(h))
	for {
		l := 2*i + 1
		if l >= n || l < i { // the end of the heap (or an overflow)
			break
		}
		w, c := l, h[l] // the worse child
		if r := l + 1; r < n {
			if hr := h[r]; c.Before(hr) {
				w, c = r, hr
			}
		}
		if !e.Before(c) {
			break
		}
		h[i] = c
		i = w
	}
	if i < n {
		h[i] = e
	}
}
