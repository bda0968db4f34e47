package llamabackend_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/llamatest"
	"github.com/llamaloop/llamaloop/internal/refbackend"
	"github.com/llamaloop/llamaloop/internal/reference"
	"github.com/llamaloop/llamaloop/internal/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rowsAloneAndTogether evaluates each prompt alone in its slot, then all of
// them in shared Evals, each followed by the same steps of one token; it
// returns every row's logits of both runs, per request and step.
func rowsAloneAndTogether(t *testing.T, p llamacpp.ContextParams, prompts [][]int32, steps [][]int32) (alone, together [][][]float32) {
	t.Helper()
	m := llamaModel(t, "tiny")
	p.Threads = 1
	ctx, err := m.NewContext(p)
	require.NoError(t, err)
	t.Cleanup(func() { ctx.Close() })
	b, err := llamabackend.New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	bg := context.Background()
	alone = make([][][]float32, len(prompts))
	for i, pr := range prompts {
		for s := range b.Slots() {
			require.NoError(t, b.Clear(s))
		}
		require.NoError(t, b.Eval(bg, []backend.Feed{{Slot: i, Tokens: pr}}))
		alone[i] = append(alone[i], append([]float32(nil), b.Logits(0)...))
		for _, st := range steps {
			require.NoError(t, b.Eval(bg, []backend.Feed{{Slot: i, Tokens: st[i : i+1]}}))
			alone[i] = append(alone[i], append([]float32(nil), b.Logits(0)...))
		}
	}
	for s := range b.Slots() {
		require.NoError(t, b.Clear(s))
	}
	feeds := make([]backend.Feed, len(prompts))
	for i, pr := range prompts {
		feeds[i] = backend.Feed{Slot: i, Tokens: pr}
	}
	together = make([][][]float32, len(prompts))
	collect := func() {
		for i := range prompts {
			together[i] = append(together[i], append([]float32(nil), b.Logits(i)...))
		}
	}
	require.NoError(t, b.Eval(bg, feeds))
	collect()
	for _, st := range steps {
		for i := range feeds {
			feeds[i].Tokens = st[i : i+1]
		}
		require.NoError(t, b.Eval(bg, feeds))
		collect()
	}
	return alone, together
}

// invarianceCase draws n prompts of 1 to 40 tokens and 8 steps of one
// token per prompt.
func invarianceCase(seed uint64, n, vocab int) (prompts, steps [][]int32) {
	rng := rand.New(rand.NewPCG(seed, 7))
	tok := func() int32 { return int32(3 + rng.IntN(vocab-3)) }
	for range n {
		pr := make([]int32, 1+rng.IntN(40))
		for j := range pr {
			pr[j] = tok()
		}
		prompts = append(prompts, pr)
	}
	for range 8 {
		st := make([]int32, n)
		for j := range st {
			st[j] = tok()
		}
		steps = append(steps, st)
	}
	return prompts, steps
}

func maxRowDiff(a, b [][][]float32) float64 {
	d := 0.0
	for i := range a {
		for s := range a[i] {
			for k := range a[i][s] {
				d = math.Max(d, math.Abs(float64(a[i][s][k])-float64(b[i][s][k])))
			}
		}
	}
	return d
}

// TestBatchInvariance: a sequence's logits alone and decoded beside up to
// seven others, prompt and steps, over several draws of prompts: in
// batch-invariant mode they differ only by float32 rounding, with
// llama.cpp's defaults (f16 KV cache, flash attention auto) by up to a few
// 1e-3; the bounds are the ones ContextParams.BatchInvariant and the
// generation package state.
func TestBatchInvariance(t *testing.T) {
	if llamatest.OnGPU(t) {
		t.Skip("batch invariance is a CPU property")
	}
	vocab := llamaModel(t, "tiny").Vocab().Size()
	worstInv, worstDef := 0.0, 0.0
	for seed := range uint64(4) {
		prompts, steps := invarianceCase(seed, 8, vocab)
		base := llamacpp.ContextParams{ContextSize: 8 * 256, Sequences: 8, BatchSize: 64}
		inv := base
		inv.BatchInvariant = true
		alone, together := rowsAloneAndTogether(t, inv, prompts, steps)
		worstInv = math.Max(worstInv, maxRowDiff(alone, together))

		def := base
		def.TypeK, def.TypeV = llamacpp.KVF16, llamacpp.KVF16 // llama.cpp's default, named so the helper keeps it
		alone, together = rowsAloneAndTogether(t, def, prompts, steps)
		worstDef = math.Max(worstDef, maxRowDiff(alone, together))
	}
	t.Logf("logits alone and in a batch differ by up to %.2g in batch-invariant mode, %.2g with the defaults", worstInv, worstDef)
	assert.Less(t, worstInv, 2e-5)
	assert.Less(t, worstDef, 1e-2)
	assert.Greater(t, worstDef, 100*worstInv, "the defaults are the less invariant")
}

// TestBatchInvariantGeneration: in batch-invariant mode sampled requests
// give the same tokens alone and batched, over many prompts and seeds.
func TestBatchInvariantGeneration(t *testing.T) {
	if llamatest.OnGPU(t) {
		t.Skip("batch invariance is a CPU property")
	}
	m := llamaModel(t, "tiny")
	gen, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 8 * 256, Sequences: 8, BatchSize: 32, BatchInvariant: true})
	texts := []string{"Hello", "The model said: llama loop is a Go text", "We want to", "a", "loop", "Go is", "text text text", "said the"}
	var reqs []generation.Request
	for i := range 32 {
		reqs = append(reqs, generation.Request{Text: texts[i%len(texts)], Config: sampleConfig(16), Seed: uint64(1000 + i)})
	}
	batched, err := gen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	for i := range reqs {
		alone, err := gen.Generate(context.Background(), reqs[i:i+1])
		require.NoError(t, err)
		assert.Equal(t, alone[0].Tokens, batched[i].Tokens, "request %d", i)
	}
}

// TestBatchInvariantOptions: the mode refuses the options it would
// override.
func TestBatchInvariantOptions(t *testing.T) {
	m := llamaModel(t, "tiny")
	_, err := m.NewContext(llamacpp.ContextParams{BatchInvariant: true, TypeK: llamacpp.KVF16, Threads: 1})
	require.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	assert.ErrorContains(t, err, `BatchInvariant needs TypeK and TypeV f32 and FlashAttention off (got TypeK "f16", TypeV "", FlashAttention auto)`)
	_, err = m.NewContext(llamacpp.ContextParams{BatchInvariant: true, FlashAttention: llamacpp.FlashAttentionOn, Threads: 1})
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
	ctx, err := m.NewContext(llamacpp.ContextParams{BatchInvariant: true, TypeK: llamacpp.KVF32, Threads: 1})
	require.NoError(t, err)
	require.NoError(t, ctx.Close())
}

// referenceLogProb is the float64 reference's log-probability of tokens
// after prompt: the sum of log_softmax at each generated token.
func referenceLogProb(t *testing.T, rb *refbackend.Backend, prompt, tokens []int32) float64 {
	t.Helper()
	require.NoError(t, rb.Clear(0))
	bg := context.Background()
	require.NoError(t, rb.Eval(bg, []backend.Feed{{Slot: 0, Tokens: prompt}}))
	sum := 0.0
	for _, tok := range tokens {
		sum += logSoftmaxAt(rb.Logits(0), tok)
		require.NoError(t, rb.Eval(bg, []backend.Feed{{Slot: 0, Tokens: []int32{tok}}}))
	}
	return sum
}

// TestBeamLogProbPrecision: the README's beam search (4 beams, 2 returned,
// 32 new tokens, unified KV cache) on llama.cpp gives log-probabilities
// whose distance to the float64 reference's log-probability of the same
// tokens is what the README states for each mode: about 1e-5 in
// batch-invariant mode (f32 KV cache, no flash attention), about 1e-2 with
// llama.cpp's defaults.
func TestBeamLogProbPrecision(t *testing.T) {
	if llamatest.OnGPU(t) {
		t.Skip("CPU precision")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, testmodel.WriteRandom(path, testmodel.TinySpec(gguf.TensorF32)))
	m, err := llamacpp.LoadModel(path, llamacpp.ModelParams{})
	require.NoError(t, err)
	defer m.Close()
	ref, err := reference.Load(path)
	require.NoError(t, err)
	rb := refbackend.New(ref, m.Vocab().Size(), 1)
	texts := []string{"The model said", "We want to go", "a", "Hello", "loop", "text text", "said the", "Go is"}
	var prompts [][]int32
	for _, s := range texts {
		p, err := m.Vocab().Tokenize(s, true, false)
		require.NoError(t, err)
		prompts = append(prompts, p)
	}
	cfg := llamaBeamConfig(4, 32, m.Vocab().EOGTokens())
	cfg.NumReturnSequences = 2
	worst := map[bool]float64{}
	for _, invariant := range []bool{false, true} {
		ctx, err := m.NewContext(llamacpp.ContextParams{ContextSize: 2048, Sequences: 4, UnifiedKV: true, Threads: 1, BatchInvariant: invariant})
		require.NoError(t, err)
		lb, err := llamabackend.New(ctx)
		require.NoError(t, err)
		off, n := 0, 0
		for _, p := range prompts {
			res, err := beam.Search(context.Background(), lb, [][]int32{p}, beam.Options{Config: cfg})
			require.NoError(t, err)
			for _, h := range res.Hypotheses[0] {
				d := math.Abs(h.LogProb - referenceLogProb(t, rb, p, h.Tokens))
				worst[invariant] = math.Max(worst[invariant], d)
				n++
				if d > 1e-3 {
					off++
				}
			}
		}
		t.Logf("batch-invariant %v: %d hypotheses, largest log-prob difference %.2g, %d off by more than 1e-3", invariant, n, worst[invariant], off)
		lb.Close()
		ctx.Close()
	}
	assert.Less(t, worst[true], 1e-4)
	assert.Less(t, worst[false], 5e-2)
}
