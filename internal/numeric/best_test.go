package numeric

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bruteBest ranks every entry with a full sort and keeps the first n: the oracle.
func bruteBest[K float32 | float64](keys []K, n int) []Entry[K] {
	all := make([]Entry[K], len(keys))
	for i, k := range keys {
		all[i] = Entry[K]{Key: k, Index: int32(i)}
	}
	slices.SortFunc(all, func(a, b Entry[K]) int {
		switch {
		case a.Key > b.Key:
			return -1
		case a.Key < b.Key:
			return 1
		}
		return int(a.Index - b.Index)
	})
	return all[:min(n, len(all))]
}

// Best against a full sort, on streams with many ties, offered in index order and shuffled, for
// every n from 0 to past the stream's length; one Best reused throughout.
func TestBestMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var b Best[float32]
	for iter := range 400 {
		n := r.IntN(300)
		keys := make([]float32, n)
		for i := range keys {
			keys[i] = float32(r.IntN(1 + iter%40)) // few distinct keys: many ties
		}
		want := n
		if n > 0 {
			want = r.IntN(n + 3)
		}
		order := r.Perm(n)
		if iter%2 == 0 {
			slices.Sort(order)
		}
		b.Reset(want)
		for _, i := range order {
			b.Offer(Entry[float32]{Key: keys[i], Index: int32(i)})
		}
		require.Equal(t, min(want, n), b.Len())
		got := b.Sorted()
		require.Equal(t, bruteBest(keys, want), got, "iter %d n=%d keep %d", iter, n, want)
		assert.Zero(t, b.Len(), "Sorted empties b")
	}
}

// A key equal to the worst one's cannot enter when offered later in index order: the test a
// caller may make on the key alone.
func TestBestTiesLose(t *testing.T) {
	var b Best[float64]
	b.Reset(2)
	assert.True(t, b.Offer(Entry[float64]{Key: 1, Index: 0}))
	assert.True(t, b.Offer(Entry[float64]{Key: 3, Index: 1}))
	assert.True(t, b.Full())
	assert.Equal(t, Entry[float64]{Key: 1, Index: 0}, b.Worst())
	assert.False(t, b.Admits(1))
	assert.True(t, b.Admits(1.5))
	assert.False(t, b.Offer(Entry[float64]{Key: 1, Index: 2}))
	assert.True(t, b.Offer(Entry[float64]{Key: 2, Index: 3}))
	assert.Equal(t, []float64{2, 3}, slices.Sorted(slices.Values(b.Keys(nil))))
	assert.Equal(t, []Entry[float64]{{3, 1}, {2, 3}}, b.Sorted())

	// Replace for an entry already known to rank before the worst.
	b.Reset(3)
	for i, k := range []float64{5, 1, 4} {
		b.Offer(Entry[float64]{Key: k, Index: int32(i)})
	}
	require.True(t, b.Admits(2))
	b.Replace(Entry[float64]{Key: 2, Index: 3})
	assert.Equal(t, Entry[float64]{Key: 2, Index: 3}, b.Worst())
	assert.Equal(t, []Entry[float64]{{5, 0}, {4, 2}, {2, 3}}, b.Sorted())

	b.Reset(0)
	assert.True(t, b.Full())
	assert.False(t, b.Admits(9))
	assert.False(t, b.Offer(Entry[float64]{Key: 9, Index: 0}))
	assert.Empty(t, b.Sorted())
}

func TestBestDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]float32, 10000)
	for i := range keys {
		keys[i] = float32(r.NormFloat64())
	}
	var b Best[float32]
	b.Reset(64)
	allocs := testing.AllocsPerRun(10, func() {
		b.Reset(64)
		for i, k := range keys {
			if b.Admits(k) {
				b.Offer(Entry[float32]{Key: k, Index: int32(i)})
			}
		}
		_ = b.Sorted()
	})
	assert.Zero(t, allocs)
}
