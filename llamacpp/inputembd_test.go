package llamacpp_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// decodeInputs decodes inputs as sequence 0 from position 0, a decode per
// run of tokens or of embeddings, every output flagged, and returns the
// logits rows.
func decodeInputs(t *testing.T, ctx *llamacpp.Context, b *llamacpp.Batch, inputs []reference.Input) [][]float32 {
	t.Helper()
	return decodeRuns(t, ctx, b, inputs, false)
}

// decodeRuns is decodeInputs with each run of embeddings decoded with
// causal attention off when nonCausal (Context.DecodeNonCausal).
func decodeRuns(t *testing.T, ctx *llamacpp.Context, b *llamacpp.Batch, inputs []reference.Input, nonCausal bool) [][]float32 {
	t.Helper()
	var rows [][]float32
	for start := 0; start < len(inputs); {
		b.Clear()
		end := start
		for ; end < len(inputs) && (inputs[end].Embd == nil) == (inputs[start].Embd == nil); end++ {
			var err error
			if e := inputs[end].Embd; e != nil {
				v := make([]float32, len(e))
				for i, x := range e {
					v[i] = float32(x)
				}
				_, err = b.AddEmbedding(v, int32(end), 0, true)
			} else {
				_, err = b.Add(inputs[end].Token, int32(end), 0, true)
			}
			require.NoError(t, err)
		}
		if nonCausal && inputs[start].Embd != nil {
			require.NoError(t, ctx.DecodeNonCausal(context.Background(), b))
		} else {
			require.NoError(t, ctx.Decode(context.Background(), b))
		}
		for i := range end - start {
			row, err := ctx.CopyLogits(nil, i)
			require.NoError(t, err)
			rows = append(rows, row)
		}
		start = end
	}
	return rows
}

// A prompt whose middle positions are the token embedding rows of their
// tokens gives the logits of the tokens themselves; arbitrary vectors give
// the reference's logits for them.
func TestInputEmbeddingsMatchReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	require.Equal(t, ref.NEmbd, m.InputEmbeddingSize())
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64})
	b := newBatch(t, 64, 1)
	tokens := randomTokens(31, 30, 856)
	want, err := ref.Logits(tokens)
	require.NoError(t, err)

	asRows := make([]reference.Input, len(tokens))
	for i, tok := range tokens {
		asRows[i].Token = tok
		if i >= 8 && i < 20 {
			asRows[i].Embd, err = ref.TokenEmbedding(tok)
			require.NoError(t, err)
		}
	}
	d := maxDiff(t, decodeInputs(t, ctx, b, asRows), want)
	t.Logf("token embedding rows for positions 8-19: largest |llama.cpp - reference of the tokens| %.3g", d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.TinyF32))

	// arbitrary vectors, the scale of the embedding rows (standard deviation 1)
	require.NoError(t, ctx.ClearCache())
	r := rand.New(rand.NewPCG(1, 2))
	mixed := make([]reference.Input, len(tokens))
	for i, tok := range tokens {
		mixed[i].Token = tok
		if i%7 == 3 || i == 0 {
			mixed[i].Embd = make([]float64, ref.NEmbd)
			for j := range mixed[i].Embd {
				mixed[i].Embd[j] = float64(float32(r.NormFloat64()))
			}
		}
	}
	wantMixed, _, err := ref.NewSequence().EvalInputs(mixed)
	require.NoError(t, err)
	d = maxDiff(t, decodeInputs(t, ctx, b, mixed), wantMixed)
	t.Logf("random vectors at every 7th position: largest |llama.cpp - reference| %.3g", d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.TinyF32))
	require.Greater(t, maxDiff(t, decodeInputs(t, newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64}), b, asRows),
		wantMixed), 0.1, "the vectors change the logits")
}

func TestInputEmbeddingErrors(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64})
	b := newBatch(t, 64, 1)
	v := make([]float32, m.InputEmbeddingSize())
	_, err := b.Add(5, 0, 0, true)
	require.NoError(t, err)
	_, err = b.AddEmbedding(v, 1, 0, true)
	require.ErrorContains(t, err, "the batch holds tokens: llama.cpp decodes a batch of tokens or of embeddings")
	b.Clear()
	_, err = b.AddEmbedding(v, 0, 0, true)
	require.NoError(t, err)
	_, err = b.Add(5, 1, 0, true)
	require.ErrorContains(t, err, "the batch holds input embeddings")
	_, err = b.AddEmbedding(v[:10], 1, 0, true)
	require.ErrorContains(t, err, "input embedding of width 10 in a batch of width 256")
	nan := append([]float32(nil), v...)
	nan[7] = float32(math.NaN())
	_, err = b.AddEmbedding(nan, 1, 0, true)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "input embedding at batch index 1 holds NaN at 7")
	require.NoError(t, ctx.Decode(context.Background(), b), "the refusals left the batch as it was")

	b.Clear()
	_, err = b.AddEmbedding(v[:10], 0, 0, true)
	require.NoError(t, err)
	err = ctx.Decode(context.Background(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "input embeddings of width 10; the model takes 256")
}

// DecodeNonCausal takes at most MicroBatchSize entries (llama.cpp asserts
// n_ubatch >= n_tokens with causal attention off): more is refused, naming
// the bound, before anything reaches llama.cpp, and the context decodes
// on; a closed context is refused too.
func TestDecodeNonCausalBound(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 16, MicroBatchSize: 4})
	b := newBatch(t, 16, 1)
	vec := make([]float32, m.InputEmbeddingSize())
	for i := range vec {
		vec[i] = float32(i%7)/7 - 0.5
	}
	fill := func(n int) {
		b.Clear()
		for i := range n {
			_, err := b.AddEmbedding(vec, int32(i), 0, i == n-1)
			require.NoError(t, err)
		}
	}
	fill(5)
	err := ctx.DecodeNonCausal(context.Background(), b)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "MicroBatchSize (n_ubatch) 4")
	fill(4)
	require.NoError(t, ctx.DecodeNonCausal(context.Background(), b))
	_, err = ctx.Logits(3)
	require.NoError(t, err)
	require.NoError(t, ctx.Close())
	require.ErrorIs(t, ctx.DecodeNonCausal(context.Background(), b), llamacpp.ErrClosed)
}
