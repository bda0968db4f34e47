package llamabackend_test

import (
	"context"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// Non-causal runs of embeddings (a Gemma 3 image, as llama.cpp's helper
// decodes it) on llama.cpp give the reference backend's logits, whose runs
// attend to themselves both ways: in one Eval with a text feed beside them
// (which stays causal), runs mid-feed and at a feed's end, decodes of 16;
// through EvalAll at every position; and the tokens after them causal.
// The causal reading of the same feeds is far off, so the check can fail.
// A run over the context's micro-batch is refused, naming n_ubatch.
func TestNonCausalFeedsMatchReference(t *testing.T) {
	m, ref, lb := tinyF32Backend(t, 3)
	require.Equal(t, 16, lb.MaxNonCausal())

	inRuns := func(i int) bool { return (i >= 5 && i < 13) || (i >= 20 && i < 36) }
	p0, e0 := embeddingPrompt(t, ref, 40, false, func(i int) bool { return i == 2 || inRuns(i) })
	p1, e1 := embeddingPrompt(t, ref, 9, false, func(i int) bool { return i >= 3 })
	p2, _ := embeddingPrompt(t, ref, 11, false, func(int) bool { return false })
	feeds := []backend.Feed{
		{Slot: 0, Tokens: p0, Embd: e0, NonCausal: []backend.Span{{Start: 5, End: 13}, {Start: 20, End: 36}}},
		{Slot: 1, Tokens: p1, Embd: e1, NonCausal: []backend.Span{{Start: 3, End: 9}}},
		{Slot: 2, Tokens: p2},
	}
	next := []backend.Feed{{Slot: 0, Tokens: []int32{5, 6}}, {Slot: 1, Tokens: []int32{7}}, {Slot: 2, Tokens: []int32{8}}}
	tol := llamatest.Tolerance(t, llamatest.TinyF32)

	rb := refbackend.New(ref, m.Vocab().Size(), 3)
	require.NoError(t, lb.Eval(context.Background(), feeds))
	require.NoError(t, rb.Eval(context.Background(), feeds))
	d := 0.0
	for i := range feeds {
		d = math.Max(d, maxDiff(lb.Logits(i), rb.Logits(i)))
	}
	require.NoError(t, lb.Eval(context.Background(), next))
	require.NoError(t, rb.Eval(context.Background(), next))
	for i := range next {
		d = math.Max(d, maxDiff(lb.Logits(i), rb.Logits(i)))
	}
	t.Logf("Eval with non-causal runs, then tokens: largest |llama.cpp - reference| %.3g", d)
	require.LessOrEqual(t, d, tol)

	for s := range 3 {
		require.NoError(t, lb.Clear(s))
		require.NoError(t, rb.Clear(s))
	}
	require.NoError(t, lb.EvalAll(context.Background(), feeds))
	require.NoError(t, rb.EvalAll(context.Background(), feeds))
	causal := refbackend.New(ref, m.Vocab().Size(), 3)
	causalFeeds := append([]backend.Feed(nil), feeds...)
	for i := range causalFeeds {
		causalFeeds[i].NonCausal = nil
	}
	require.NoError(t, causal.EvalAll(context.Background(), causalFeeds))
	d, apart := 0.0, 0.0
	for i, f := range feeds {
		for j := range f.Tokens {
			d = math.Max(d, maxDiff(lb.LogitsAt(i, j), rb.LogitsAt(i, j)))
			apart = math.Max(apart, maxDiff(lb.LogitsAt(i, j), causal.LogitsAt(i, j)))
		}
	}
	t.Logf("EvalAll with non-causal runs: largest |llama.cpp - reference| %.3g; against the causal reading %.3g", d, apart)
	require.LessOrEqual(t, d, tol)
	require.Greater(t, apart, 0.5, "the runs attend both ways (far over either device's tolerance)")
	require.NoError(t, lb.Eval(context.Background(), next))
	require.NoError(t, rb.Eval(context.Background(), next))
	d = 0
	for i := range next {
		d = math.Max(d, maxDiff(lb.Logits(i), rb.Logits(i)))
	}
	require.LessOrEqual(t, d, tol)

	// refusals: a run over the micro-batch, a run over a token, a run without embeddings
	long := []backend.Feed{{Slot: 0, Tokens: p0, Embd: e0, NonCausal: []backend.Span{{Start: 20, End: 37}}}}
	require.NoError(t, lb.Clear(0))
	err := lb.Eval(context.Background(), long)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "n_ubatch")
	long[0].NonCausal = []backend.Span{{Start: 1, End: 6}}
	require.ErrorIs(t, lb.Eval(context.Background(), long), backend.ErrBadEmbedding)
	require.ErrorIs(t, lb.Eval(context.Background(), []backend.Feed{{Slot: 0, Tokens: p2, NonCausal: []backend.Span{{Start: 0, End: 1}}}}),
		backend.ErrBadEmbedding)
}
