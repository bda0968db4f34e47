package llamabackend_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	"github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/stretchr/testify/require"
)

// embeddingPrompt is a prompt of n tokens with input embeddings at the
// positions where pick says: the tokens' own embedding rows (rows) or
// random vectors of the rows' scale.
func embeddingPrompt(t *testing.T, ref *reference.Model, n int, rows bool, pick func(int) bool) ([]int32, [][]float32) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, uint64(n)))
	prompt := make([]int32, n)
	embd := make([][]float32, n)
	for i := range prompt {
		prompt[i] = int32(3 + r.IntN(800))
		if !pick(i) {
			continue
		}
		embd[i] = make([]float32, ref.NEmbd)
		row, err := ref.TokenEmbedding(prompt[i])
		require.NoError(t, err)
		for j := range embd[i] {
			if rows {
				embd[i][j] = float32(row[j])
			} else {
				embd[i][j] = float32(r.NormFloat64())
			}
		}
	}
	return prompt, embd
}

// tinyF32Backend is the tiny model in llama.cpp with f32 cells and flash
// attention off (where llama.cpp agrees with the float64 reference within
// 1e-4), in decodes of 16, with sequences sequences, beside its reference.
func tinyF32Backend(t *testing.T, sequences int) (*llamacpp.Model, *reference.Model, *llamabackend.Backend) {
	m := llamaModel(t, "tiny")
	path, _ := llamaModels.Load("tiny")
	ref, err := reference.Load(path.(string))
	require.NoError(t, err)
	ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 512, Sequences: sequences, BatchSize: 16, Threads: 1,
		TypeK: llamacpp.KVF32, TypeV: llamacpp.KVF32, FlashAttention: llamacpp.FlashAttentionOff})
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	lb, err := llamabackend.New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	return m, ref, lb
}

// maxDiff is the largest |a[i] - b[i]|.
func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// Feeds with input embeddings on llama.cpp give the reference backend's
// logits, with runs of tokens and embeddings split over decodes of 16 and
// several feeds in one Eval.
func TestEmbeddingFeedsMatchReference(t *testing.T) {
	m, ref, lb := tinyF32Backend(t, 2)
	rb := refbackend.New(ref, m.Vocab().Size(), 2)
	require.Equal(t, ref.NEmbd, lb.InputEmbeddingSize())

	p0, e0 := embeddingPrompt(t, ref, 37, false, func(i int) bool { return i%5 == 1 || (i >= 20 && i < 26) })
	p1, e1 := embeddingPrompt(t, ref, 9, false, func(i int) bool { return i >= 3 })
	feeds := []backend.Feed{{Slot: 0, Tokens: p0, Embd: e0}, {Slot: 1, Tokens: p1, Embd: e1}}
	require.NoError(t, lb.EvalAll(context.Background(), feeds))
	require.NoError(t, rb.EvalAll(context.Background(), feeds))
	d := 0.0
	for i, f := range feeds {
		for j := range f.Tokens {
			got, want := lb.LogitsAt(i, j), rb.LogitsAt(i, j)
			for k := range got {
				d = math.Max(d, math.Abs(float64(got[k]-want[k])))
			}
		}
	}
	t.Logf("EvalAll with random input embeddings: largest |llama.cpp - reference| %.3g", d)
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.TinyF32))

	// Eval continues the histories, a token then an embedding
	next := []backend.Feed{{Slot: 0, Tokens: []int32{5, 6}, Embd: [][]float32{nil, e1[4]}}}
	require.NoError(t, lb.Eval(context.Background(), next))
	require.NoError(t, rb.Eval(context.Background(), next))
	d = 0
	for k, v := range lb.Logits(0) {
		d = math.Max(d, math.Abs(float64(v-rb.Logits(0)[k])))
	}
	require.LessOrEqual(t, d, llamatest.Tolerance(t, llamatest.TinyF32))

	bad := []backend.Feed{{Slot: 1, Tokens: []int32{5}, Embd: [][]float32{{1, 2}}}}
	require.ErrorIs(t, lb.Eval(context.Background(), bad), backend.ErrBadEmbedding)
	require.ErrorIs(t, rb.Eval(context.Background(), bad), backend.ErrBadEmbedding)
	nan := append([]float32(nil), e1[4]...)
	nan[3] = float32(math.NaN())
	err := lb.Eval(context.Background(), []backend.Feed{{Slot: 1, Tokens: []int32{5}, Embd: [][]float32{nan}}})
	require.ErrorIs(t, err, backend.ErrBadEmbedding)
	require.ErrorContains(t, err, "feed 0, position 0 holds NaN at 3")
}

// A request whose prompt positions are given as their tokens' embedding
// rows generates, with repetition_penalty (a processor that reads the
// prompt), exactly the tokens of the plain prompt: the processors see the
// placeholder ids. Random vectors give the reference backend's greedy
// tokens, also through the prefix cache.
func TestGenerateWithPromptEmbeddings(t *testing.T) {
	m := llamaModel(t, "tiny")
	path, _ := llamaModels.Load("tiny")
	ref, err := reference.Load(path.(string))
	require.NoError(t, err)
	gen, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 2, BatchSize: 16})
	refGen := generation.NewGenerator(refbackend.New(ref, m.Vocab().Size(), 2), llamabackend.Tokenizer{Vocab: m.Vocab()})

	cfg := greedyConfig(20)
	cfg.RepetitionPenalty = 1.5
	prompt, asRows := embeddingPrompt(t, ref, 24, true, func(i int) bool { return i >= 4 && i < 18 })
	plain, err := gen.Generate(context.Background(), []generation.Request{{Prompt: prompt, Config: cfg}})
	require.NoError(t, err)
	rows, err := gen.Generate(context.Background(), []generation.Request{{Prompt: prompt, PromptEmbeddings: asRows, Config: cfg}})
	require.NoError(t, err)
	require.Equal(t, plain[0].Tokens, rows[0].Tokens)

	_, random := embeddingPrompt(t, ref, 24, false, func(i int) bool { return i >= 4 && i < 18 })
	req := []generation.Request{{Prompt: prompt, PromptEmbeddings: random, Config: cfg}}
	got, err := gen.Generate(context.Background(), req)
	require.NoError(t, err)
	want, err := refGen.Generate(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, want[0].Tokens, got[0].Tokens)
	require.NotEqual(t, plain[0].Tokens, got[0].Tokens, "the vectors change the reply")

	// refusals: wrong counts and widths, a backend without input embeddings
	_, err = gen.Generate(context.Background(), []generation.Request{{Prompt: prompt, PromptEmbeddings: random[:3], Config: cfg}})
	require.ErrorContains(t, err, "3 PromptEmbeddings entries for 24 prompt tokens")
	short := append([][]float32(nil), random...)
	short[5] = short[5][:7]
	_, err = gen.Generate(context.Background(), []generation.Request{{Prompt: prompt, PromptEmbeddings: short, Config: cfg}})
	require.ErrorContains(t, err, "PromptEmbeddings[5] has width 7, the model's is 256")
	_, err = gen.Generate(context.Background(), []generation.Request{{Text: "x", PromptEmbeddings: random, Config: cfg}})
	require.ErrorContains(t, err, "PromptEmbeddings need Prompt")
	_, err = generation.NewGenerator(backend.NewMemoryBackend(m.Vocab().Size(), 1, nil), nil).Generate(context.Background(), req)
	require.ErrorIs(t, err, backend.ErrBadEmbedding)
	require.ErrorContains(t, err, "PromptEmbeddings on a backend without input embeddings (*backend.MemoryBackend)")

	// The prefix cache passes them on.
	_, lb := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 1024, Sequences: 4})
	pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: 2})
	require.NoError(t, err)
	cached, err := generation.NewGenerator(pc, nil).Generate(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, got[0].Tokens, cached[0].Tokens)
}
