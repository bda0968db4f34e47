package llamacpp_test

import (
	"context"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/require"
)

// refPooled is the float64 reference of a pooled, normalised embedding.
func refPooled(t *testing.T, ref *reference.Model, tokens []int32, p embedding.Pooling, norm embedding.Norm) []float64 {
	t.Helper()
	rows, err := ref.Embeddings(tokens)
	require.NoError(t, err)
	v, err := embedding.Pool(rows, p)
	require.NoError(t, err)
	embedding.Normalize(v, norm)
	return v
}

// embeddingTolerance is about twice the largest difference measured between
// llama.cpp's and the reference's raw embeddings of tiny-f32 on the CPU (f32
// KV cache, flash attention off; 4.3e-6 for values of about 1, 9.6e-8
// once L2-normalised). On a GPU, unmeasured, the logits' bound stands in.
func embeddingTolerance(t *testing.T) float64 {
	if llamatest.OnGPU(t) {
		return llamatest.Tolerance(t, llamatest.TinyF32)
	}
	return 1e-5
}

// Pooled embeddings of several inputs, each as the reference pools it, for
// every pooling, with a split and a unified cache (where the inputs share
// decodes).
func TestEmbedMatchesReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	inputs := [][]int32{randomTokens(11, 7, 856), randomTokens(12, 1, 856), randomTokens(13, 40, 856), randomTokens(14, 19, 856)}
	for _, unified := range []bool{false, true} {
		for _, p := range []embedding.Pooling{embedding.PoolingMean, embedding.PoolingCLS, embedding.PoolingLast} {
			// a batch of a multiple of 3 tokens: see the mean-pooling refusal
			ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 512, BatchSize: 66, Sequences: 3, UnifiedKV: unified,
				Embeddings: true, Pooling: p})
			require.Equal(t, p, ctx.Pooling())
			b := newBatch(t, 66, 1)
			for _, norm := range []embedding.Norm{embedding.NormNone, embedding.NormL2} {
				got, err := ctx.Embed(context.Background(), b, inputs, norm)
				require.NoError(t, err)
				require.Len(t, got, len(inputs))
				d := 0.0
				for i, in := range inputs {
					want := refPooled(t, ref, in, p, norm)
					d = max(d, maxDiff(t, [][]float32{got[i]}, [][]float64{want}))
				}
				t.Logf("unified %v, pooling %s, norm %d: largest |llama.cpp - reference| %.3g", unified, p, norm, d)
				require.LessOrEqual(t, d, embeddingTolerance(t))
			}
		}
	}
}

// The model's GGUF key chooses the pooling; the override wins over it.
func TestEmbedModelPooling(t *testing.T) {
	m := loadModel(t, "tiny-last")
	ref := loadReference(t, "tiny-last")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64, Embeddings: true})
	require.Equal(t, embedding.PoolingLast, ctx.Pooling())
	in := randomTokens(5, 9, 856)
	got, err := ctx.Embed(context.Background(), newBatch(t, 64, 1), [][]int32{in}, embedding.NormL2)
	require.NoError(t, err)
	require.LessOrEqual(t, maxDiff(t, got, [][]float64{refPooled(t, ref, in, embedding.PoolingLast, embedding.NormL2)}), embeddingTolerance(t))
	n := 0.0
	for _, v := range got[0] {
		n += float64(v) * float64(v)
	}
	require.InDelta(t, 1, math.Sqrt(n), 1e-6)

	mean := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64, Embeddings: true, Pooling: embedding.PoolingMean})
	require.Equal(t, embedding.PoolingMean, mean.Pooling())
	plain := loadModel(t, "tiny-f32")
	none := newContext(t, plain, llamacpp.ContextParams{ContextSize: 256, BatchSize: 64, Embeddings: true})
	require.Equal(t, embedding.PoolingNone, none.Pooling(), "llama.cpp's default for a llama model without the key")
}

// Per-token embeddings over several decodes (the cache carries the history
// between them) against the reference's hidden states.
func TestEmbedTokensMatchReference(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	ref := loadReference(t, "tiny-f32")
	ctx := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 32, Embeddings: true, Pooling: embedding.PoolingNone})
	tokens := randomTokens(21, 70, 856)
	want, err := ref.Embeddings(tokens)
	require.NoError(t, err)
	got, err := ctx.EmbedTokens(context.Background(), newBatch(t, 32, 1), tokens, embedding.NormNone)
	require.NoError(t, err)
	d := maxDiff(t, got, want)
	t.Logf("per-token embeddings, %d positions: largest |llama.cpp - reference| %.3g", len(tokens), d)
	require.LessOrEqual(t, d, embeddingTolerance(t))
	// the logits of a context with embeddings stay the generation logits
	b := newBatch(t, 32, 1)
	wantLogits, err := ref.Logits(tokens[:20])
	require.NoError(t, err)
	require.LessOrEqual(t, maxDiff(t, decodeSeq(t, ctx, b, 0, 0, tokens[:20]), wantLogits), 1e-4)
	row, err := ctx.TokenEmbedding(19)
	require.NoError(t, err)
	require.LessOrEqual(t, maxDiff(t, [][]float32{row}, want[19:20]), embeddingTolerance(t))
}

func TestEmbeddingErrors(t *testing.T) {
	m := loadModel(t, "tiny-f32")
	gen := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 32})
	b := newBatch(t, 32, 1)
	_, err := gen.Embed(context.Background(), b, [][]int32{{5}}, embedding.NormL2)
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	require.ErrorContains(t, err, "the context computes no embeddings: create it with ContextParams.Embeddings")
	_, err = gen.SequenceEmbedding(0)
	require.ErrorContains(t, err, "the context computes no embeddings")

	pooled := newContext(t, m, llamacpp.ContextParams{ContextSize: 256, BatchSize: 32, Embeddings: true, Pooling: embedding.PoolingMean})
	_, err = pooled.EmbedTokens(context.Background(), b, []int32{5}, embedding.NormL2)
	require.ErrorContains(t, err, "the context pools its embeddings (mean): per-token embeddings need Pooling none")
	_, err = pooled.Embed(context.Background(), b, [][]int32{randomTokens(1, 33, 856)}, embedding.NormL2)
	require.ErrorContains(t, err, "input 0 has 33 tokens, more than the 32 of one decode")
	_, err = pooled.Embed(context.Background(), b, [][]int32{{5}, {}}, embedding.NormL2)
	require.ErrorContains(t, err, "input 1 is empty")
	_, err = pooled.Embed(context.Background(), b, [][]int32{{5, 100000}}, embedding.NormL2)
	require.ErrorContains(t, err, "token 100000 at batch index 1 outside the vocabulary")
	_, err = pooled.SequenceEmbedding(0)
	require.ErrorContains(t, err, "no successful decode")
	// the context still works after the refusals
	_, err = pooled.Embed(context.Background(), b, [][]int32{{5, 6}}, embedding.NormL2)
	require.NoError(t, err)

	_, err = m.NewContext(llamacpp.ContextParams{Embeddings: true, Pooling: embedding.PoolingRank})
	require.ErrorContains(t, err, "Pooling rank is a reranker's classification head")
	// llama.cpp would abort reserving the graph of this one
	_, err = m.NewContext(llamacpp.ContextParams{ContextSize: 512, BatchSize: 64, Sequences: 3, Embeddings: true, Pooling: embedding.PoolingMean})
	require.ErrorContains(t, err, "mean pooling with 3 sequences needs min(ContextSize, BatchSize) = 64 to be a multiple of 3")
	_, err = m.NewContext(llamacpp.ContextParams{Pooling: embedding.PoolingMean})
	require.ErrorContains(t, err, "Pooling mean without Embeddings")
}
