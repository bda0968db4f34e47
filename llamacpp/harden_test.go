package llamacpp_test

import (
	"testing"

	"github.com/llamaloop/llamaloop/internal/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBatchAfterClose: every Batch method after Close reports ErrClosed or
// a harmless value, never a panic.
func TestBatchAfterClose(t *testing.T) {
	b, err := llamacpp.NewBatch(8, 2)
	require.NoError(t, err)
	_, err = b.Add(5, 0, 0, true)
	require.NoError(t, err)
	require.NoError(t, b.SetOutput(0, false))
	assert.ErrorIs(t, b.SetOutput(1, true), llamacpp.ErrInvalidArgument, "index beyond the batch's tokens")
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.SetOutput(0, true), llamacpp.ErrClosed)
	_, err = b.Add(5, 1, 0, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	_, err = b.AddShared(5, 1, []int32{0, 1}, true)
	assert.ErrorIs(t, err, llamacpp.ErrClosed)
	b.Clear()
	assert.Equal(t, 0, b.Len())
	assert.Equal(t, 8, b.Cap())
	require.NoError(t, b.Close())
}

// TestNewBatchBounds: capacities beyond MaxBatch are refused before any
// allocation, and a batch that does not fit in the memory left gives
// ErrNoMemory naming the capacity (checked in a child process whose address
// space may grow by 64 MB; the batch needs about 300 MB).
func TestNewBatchBounds(t *testing.T) {
	_, err := llamacpp.NewBatch(llamacpp.MaxBatch+1, 1)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	if !llamatest.UnderAddressLimit(t, 64<<20) {
		return
	}
	_, err = llamacpp.NewBatch(llamacpp.MaxBatch, 64)
	require.ErrorIs(t, err, llamacpp.ErrNoMemory)
	assert.ErrorContains(t, err, "a batch of capacity 1048576 with 64 sequences per token needs 307 MB")
	b, err := llamacpp.NewBatch(512, 1)
	require.NoError(t, err, "small batches still fit")
	require.NoError(t, b.Close())
}
