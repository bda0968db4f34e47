package llamabackend_test

import (
	"context"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// Feeds out of slot order (a prefix cache moves requests between
// sequences) are evaluated in slot order, for llama.cpp's micro-batches,
// and each still gets the logits of its own slot: those of the float64
// reference, which evaluates them in the caller's order.
func TestFeedsOutOfSlotOrder(t *testing.T) {
	m, ref, lb := tinyF32Backend(t, 4)
	rb := refbackend.New(ref, m.Vocab().Size(), 4)
	ctx := context.Background()
	tol := llamatest.Tolerance(t, llamatest.TinyF32)
	vocab := m.Vocab().Size()
	steps := [][]backend.Feed{
		{{Slot: 3, Tokens: llamaTokens(1, 5, vocab)}, {Slot: 0, Tokens: llamaTokens(2, 3, vocab)},
			{Slot: 2, Tokens: llamaTokens(3, 21, vocab)}, {Slot: 1, Tokens: llamaTokens(4, 1, vocab)}},
		{{Slot: 1, Tokens: llamaTokens(5, 1, vocab)}, {Slot: 3, Tokens: llamaTokens(6, 1, vocab)}},
		{{Slot: 2, Tokens: llamaTokens(7, 1, vocab)}, {Slot: 1, Tokens: llamaTokens(8, 2, vocab)},
			{Slot: 0, Tokens: llamaTokens(9, 1, vocab)}, {Slot: 3, Tokens: llamaTokens(10, 1, vocab)}},
	}
	for s, feeds := range steps {
		require.NoError(t, lb.Eval(ctx, feeds))
		require.NoError(t, rb.Eval(ctx, feeds))
		for i, f := range feeds {
			d := maxDiff(lb.Logits(i), rb.Logits(i))
			require.LessOrEqual(t, d, tol, "step %d, feed %d (slot %d)", s, i, f.Slot)
		}
	}
	// EvalAll: every position of each feed, through the caller's indices.
	feeds := []backend.Feed{{Slot: 2, Tokens: llamaTokens(11, 4, vocab)}, {Slot: 0, Tokens: llamaTokens(12, 6, vocab)}}
	require.NoError(t, lb.EvalAll(ctx, feeds))
	require.NoError(t, rb.EvalAll(ctx, feeds))
	for i, f := range feeds {
		for j := range f.Tokens {
			require.LessOrEqual(t, maxDiff(lb.LogitsAt(i, j), rb.LogitsAt(i, j)), tol, "feed %d, position %d", i, j)
		}
		require.Nil(t, lb.LogitsAt(i, len(f.Tokens)))
		require.LessOrEqual(t, maxDiff(lb.Logits(i), rb.Logits(i)), tol, "feed %d", i)
	}

	// The contract's one feed per slot, in order or not.
	for _, twice := range [][]backend.Feed{
		{{Slot: 1, Tokens: []int32{5}}, {Slot: 1, Tokens: []int32{6}}},
		{{Slot: 2, Tokens: []int32{5}}, {Slot: 0, Tokens: []int32{6}}, {Slot: 2, Tokens: []int32{7}}},
	} {
		require.ErrorIs(t, lb.Eval(ctx, twice), llamacpp.ErrInvalidArgument)
		require.ErrorIs(t, lb.EvalAll(ctx, twice), llamacpp.ErrInvalidArgument)
	}
}
