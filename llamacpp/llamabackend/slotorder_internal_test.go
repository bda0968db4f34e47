package llamabackend

import (
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/stretchr/testify/require"
)

// inSlotOrder gives llama.cpp the feeds in increasing slot order, keeps the
// caller's slice when it is in order already, and maps the caller's indices
// to the evaluated ones; without allocating once its buffers have grown.
func TestInSlotOrder(t *testing.T) {
	var b Backend
	feeds := []backend.Feed{{Slot: 5}, {Slot: 0}, {Slot: 7}, {Slot: 2}, {Slot: 3}, {Slot: 1}, {Slot: 6}, {Slot: 4}}
	got, err := b.inSlotOrder(feeds)
	require.NoError(t, err)
	slots := make([]int, len(got))
	for k, f := range got {
		slots[k] = f.Slot
	}
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, slots)
	for i, f := range feeds {
		require.Equal(t, f.Slot, got[b.place(i)].Slot, "feed %d", i)
	}

	ordered := []backend.Feed{{Slot: 0}, {Slot: 2}, {Slot: 3}}
	got, err = b.inSlotOrder(ordered)
	require.NoError(t, err)
	require.Same(t, &ordered[0], &got[0])
	require.Equal(t, 2, b.place(2))

	_, err = b.inSlotOrder([]backend.Feed{{Slot: 3}, {Slot: 1}, {Slot: 3}})
	require.Error(t, err)

	allocs := testing.AllocsPerRun(100, func() {
		if _, err := b.inSlotOrder(feeds); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
