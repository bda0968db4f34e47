package llamacpp_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A context evaluating on a thread of its own (what an OpenMP build of
// ggml gets) agrees with the float64 reference when every decode comes
// from a different OS thread, and a decode through it allocates nothing.
func TestEvalThread(t *testing.T) {
	llamacpp.ForceEvalThread(t)
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64, Threads: 2})
	b := newBatch(t, 64, 1)
	tokens := randomTokens(7, 40, m.Vocab().Size())
	want, err := ref.Logits(tokens)
	require.NoError(t, err)
	got := decodeSeq(t, ctx, b, 0, 0, tokens[:8])
	for i := 8; i < len(tokens); i++ {
		rows := make(chan [][]float32)
		go func() {
			runtime.LockOSThread() // a calling thread no other decode used
			defer runtime.UnlockOSThread()
			defer close(rows)
			rows <- decodeSeq(t, ctx, b, 0, i, tokens[i:i+1])
		}()
		got = append(got, <-rows...)
	}
	d := maxDiff(t, got, want)
	t.Logf("largest |llama.cpp - reference| over %d positions: %.3g", len(tokens), d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.Check("tiny-f32")))

	require.NoError(t, ctx.ClearCache())
	pos := int32(0)
	allocs := testing.AllocsPerRun(20, func() {
		b.Clear()
		_, err := b.Add(tokens[pos], pos, 0, true)
		require.NoError(t, err)
		require.NoError(t, ctx.Decode(context.Background(), b))
		pos++
	})
	assert.Zero(t, allocs)
}
