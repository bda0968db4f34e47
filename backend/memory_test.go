package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingModel returns logits whose entry t is the number of times t occurs
// in the history, so every row of logits is a function of the whole history.
func countingModel(vocab int) ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		clear(buf)
		for _, t := range history {
			buf[t]++
		}
		return buf, nil
	}
}

func TestMemoryBackendEval(t *testing.T) {
	b := NewMemoryBackend(4, 2, countingModel(4))
	require.Equal(t, 4, b.VocabSize())
	require.Equal(t, 2, b.Slots())
	b.SetBatchSize(2)
	ctx := context.Background()
	require.NoError(t, b.Eval(ctx, []Feed{{Slot: 1, Tokens: []int32{0, 0, 3}}, {Slot: 0, Tokens: []int32{2}}}))
	require.Equal(t, []float32{2, 0, 0, 1}, b.Logits(0))
	require.Equal(t, []float32{0, 0, 1, 0}, b.Logits(1))
	require.Nil(t, b.Logits(2))
	// The caller may modify logits in place: the next Eval is unaffected.
	b.Logits(0)[0] = 99
	require.NoError(t, b.Eval(ctx, []Feed{{Slot: 1, Tokens: []int32{3}}}))
	require.Equal(t, []float32{2, 0, 0, 2}, b.Logits(0))
	require.Equal(t, []int32{0, 0, 3, 3}, b.History(1))
	require.Equal(t, MemoryStats{EvalCalls: 2, Chunks: 3, ModelCalls: 3, Tokens: 5}, b.Stats())

	require.NoError(t, b.Copy(0, 1))
	require.Equal(t, []int32{0, 0, 3, 3}, b.History(0))
	require.NoError(t, b.Clear(1))
	require.Empty(t, b.History(1))
	require.Equal(t, []int32{0, 0, 3, 3}, b.History(0))
	require.Nil(t, b.Logits(0), "logits are invalid after Clear")
}

func TestMemoryBackendTruncate(t *testing.T) {
	b := NewMemoryBackend(4, 1, countingModel(4))
	ctx := context.Background()
	require.NoError(t, b.Eval(ctx, []Feed{{Slot: 0, Tokens: []int32{1, 2, 3}}}))
	require.NoError(t, b.Truncate(0, 3), "keeping everything is allowed")
	require.NoError(t, b.Truncate(0, 1))
	require.Equal(t, []int32{1}, b.History(0))
	require.NoError(t, b.Eval(ctx, []Feed{{Slot: 0, Tokens: []int32{1}}}))
	require.Equal(t, []float32{0, 2, 0, 0}, b.Logits(0), "the forgotten tokens no longer count")
	require.Error(t, b.Truncate(0, 3), "cannot keep more than the history holds")
	require.Error(t, b.Truncate(0, -1))
	require.Error(t, b.Truncate(1, 0))
}

func TestMemoryBackendRejectsBadFeeds(t *testing.T) {
	b := NewMemoryBackend(4, 2, countingModel(4))
	b.SetCapacity(3)
	ctx := context.Background()
	require.NoError(t, b.Eval(ctx, []Feed{{Slot: 0, Tokens: []int32{1, 2}}}))
	require.Equal(t, 1, b.Room(0))
	require.Equal(t, 3, b.Room(1))
	for name, feeds := range map[string][]Feed{
		"slot":     {{Slot: 2, Tokens: []int32{1}}},
		"empty":    {{Slot: 1}},
		"twice":    {{Slot: 1, Tokens: []int32{1}}, {Slot: 1, Tokens: []int32{1}}},
		"token":    {{Slot: 1, Tokens: []int32{4}}},
		"negative": {{Slot: 1, Tokens: []int32{-1}}},
		"full":     {{Slot: 1, Tokens: []int32{1}}, {Slot: 0, Tokens: []int32{1, 1}}},
	} {
		require.Error(t, b.Eval(ctx, feeds), name)
		require.Equal(t, []int32{1, 2}, b.History(0), name)
		require.Empty(t, b.History(1), name)
	}
	err := b.Eval(ctx, []Feed{{Slot: 1, Tokens: []int32{7}}})
	require.True(t, errors.Is(err, ErrTokenOutOfRange))

	bad := NewMemoryBackend(4, 1, func([]int32) ([]float32, error) { return make([]float32, 3), nil })
	require.Error(t, bad.Eval(ctx, []Feed{{Slot: 0, Tokens: []int32{1}}}))
}

func TestMemoryBackendCancelBetweenChunks(t *testing.T) {
	b := NewMemoryBackend(4, 1, countingModel(4))
	b.SetBatchSize(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.Eval(ctx, []Feed{{Slot: 0, Tokens: []int32{1, 2, 3}}}), context.Canceled)
	require.Zero(t, b.Stats().ModelCalls)
}
