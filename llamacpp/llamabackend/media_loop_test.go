//go:build !llamacpp_external

package llamabackend_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/llamaloop/llamaloop/statefile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The mixed prompts of these tests: text, the image of the self-made gemma3
// projector (16 embeddings, decoded causally) and text.
const mediaText = "look: <__media__> and say"

// imagePrompter loads the tiny gemma3 projector beside m and returns a
// function that makes the prompt of text with an image whose pixels depend
// on seed: its tokens (placeholder 3 at the image) and embeddings.
func imagePrompter(t *testing.T, m *llamacpp.Model) func(seed byte, text string) ([]int32, [][]float32) {
	t.Helper()
	mmproj := filepath.Join(t.TempDir(), "tiny-gemma3.mmproj.gguf")
	spec := testmodel.TinyGemma3Projector()
	require.NoError(t, spec.Write(mmproj))
	p, err := llamacpp.LoadProjector(mmproj, m, llamacpp.ProjectorParams{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return func(seed byte, text string) ([]int32, [][]float32) {
		t.Helper()
		rgb := make([]byte, 3*spec.ImageSize*spec.ImageSize)
		for i := range rgb {
			rgb[i] = byte(i*37) ^ seed
		}
		img, err := llamacpp.ImageRGB(spec.ImageSize, spec.ImageSize, rgb)
		require.NoError(t, err)
		pr, err := p.Tokenize(text, []llamacpp.Media{img}, llamacpp.TokenizeOptions{AddSpecial: true})
		require.NoError(t, err)
		defer pr.Close()
		toks, embd, err := pr.Inputs(llamacpp.InputsOptions{Placeholder: 3})
		require.NoError(t, err)
		return toks, embd
	}
}

// firstEmbedding is the position of the first input embedding of embd.
func firstEmbedding(embd [][]float32) int {
	return slices.IndexFunc(embd, func(e []float32) bool { return e != nil })
}

// Over the prefix cache on llama.cpp, the second turn of a chat about an
// image evaluates only its new tokens; another image of the same size at
// the same place reuses only the text before it (its first scores are not
// the first image's), and so does a text prompt with the same placeholder
// tokens; every request gives the tokens it gives without the cache.
func TestMediaPrefixCache(t *testing.T) {
	m := llamaModel(t, "tiny")
	prompt := imagePrompter(t, m)
	ctx := context.Background()
	plain, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	cached, pc, _ := cachedGenerator(t, m, llamacpp.ContextParams{ContextSize: 2048, Sequences: 4, BatchSize: 16}, 2)
	cfg := greedyConfig(10)
	run := func(p []int32, embd [][]float32) (generation.Result, []float32, int64) {
		t.Helper()
		req := generation.Request{Prompt: p, PromptEmbeddings: embd, Config: cfg}
		want, err := plain.Generate(ctx, []generation.Request{req})
		require.NoError(t, err)
		var first []float32
		req.ObserveScores = func(s []float32) {
			if first == nil {
				first = slices.Clone(s)
			}
		}
		saved := pc.Stats().TokensSaved
		got, err := cached.Generate(ctx, []generation.Request{req})
		require.NoError(t, err)
		require.Equal(t, want[0].Tokens, got[0].Tokens)
		return got[0], first, pc.Stats().TokensSaved - saved
	}

	a, ea := prompt(0, mediaText)
	before := firstEmbedding(ea)
	require.Positive(t, before)
	resA, scoresA, saved := run(a, ea)
	assert.Zero(t, saved)

	more, err := m.Vocab().Tokenize(" and then?", false, false)
	require.NoError(t, err)
	turn2 := append(append(slices.Clone(a), resA.Tokens...), more...)
	embd2 := append(slices.Clone(ea), make([][]float32, len(resA.Tokens)+len(more))...)
	_, _, saved = run(turn2, embd2)
	assert.EqualValues(t, len(a)+len(resA.Tokens)-1, saved, "the second turn evaluates its new tokens and the reply's last")

	b, eb := prompt(97, mediaText)
	require.Equal(t, a, b, "the same placeholders")
	_, scoresB, saved := run(b, eb)
	assert.EqualValues(t, before, saved, "another image: only the text before it is reused")
	assert.Greater(t, maxDiff(scoresA, scoresB), 1e-3, "another image, other scores")

	_, _, saved = run(a, nil)
	assert.EqualValues(t, before, saved, "the placeholders as text: only the text before them is reused")
}

// A request with an image and a text-only request in the same steps each
// give the tokens they give alone (greedy, f32 cache): through
// Generator.Generate, and through an Engine over the prefix cache whose
// prompt chunks of 5 tokens split the image.
func TestMediaBatchedWithText(t *testing.T) {
	m := llamaModel(t, "tiny")
	prompt := imagePrompter(t, m)
	a, ea := prompt(0, mediaText)
	b, eb := prompt(97, "see <__media__>, then answer")
	text, err := m.Vocab().Tokenize("The model said: llama loop", true, false)
	require.NoError(t, err)
	reqs := []generation.Request{
		{Prompt: a, PromptEmbeddings: ea, Config: greedyConfig(12)},
		{Prompt: text, Config: greedyConfig(12)},
		{Prompt: b, PromptEmbeddings: eb, Config: greedyConfig(9)},
	}
	one, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	alone := make([][]int32, len(reqs))
	for i := range reqs {
		res, err := one.Generate(context.Background(), reqs[i:i+1])
		require.NoError(t, err)
		alone[i] = res[0].Tokens
		require.NotEmpty(t, alone[i])
	}
	require.NotEqual(t, alone[0], alone[1])

	gen, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 1536, Sequences: 3, BatchSize: 16})
	res, err := gen.Generate(context.Background(), reqs)
	require.NoError(t, err)
	for i := range reqs {
		assert.Equal(t, alone[i], res[i].Tokens, "request %d in one batch", i)
	}

	_, lb := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 2048, Sequences: 4, BatchSize: 16})
	pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	e, err := generation.NewEngine(pc, llamabackend.Tokenizer{Vocab: m.Vocab()}, generation.EngineOptions{PromptChunk: 5})
	require.NoError(t, err)
	for round := range 2 { // the second round over the cache's entries
		res, err = e.Generate(context.Background(), reqs)
		require.NoError(t, err)
		for i := range reqs {
			assert.Equal(t, alone[i], res[i].Tokens, "round %d, request %d through the engine", round, i)
		}
	}
	require.NoError(t, e.Close())
	assert.Positive(t, pc.Stats().TokensSaved)
}

// Beam search with an image in the prompt: on llama.cpp the hypotheses of
// the float64 reference fed the same embeddings, other ones for another
// image with the same placeholders; with one beam, the tokens of greedy
// generation. Embeddings that do not fit the prompts are refused.
func TestMediaBeamSearch(t *testing.T) {
	lb, rb, m := llamaSetup(t, "tiny", 8)
	prompt := imagePrompter(t, m)
	a, ea := prompt(0, mediaText)
	b, eb := prompt(97, mediaText)
	ctx := context.Background()
	eog := m.Vocab().EOGTokens()

	opts := beam.Options{Config: llamaBeamConfig(4, 6, eog), PromptEmbeddings: [][][]float32{ea, eb}}
	got, err := beam.Search(ctx, lb, [][]int32{a, b}, opts)
	require.NoError(t, err)
	want, err := beam.Search(ctx, rb, [][]int32{a, b}, opts)
	require.NoError(t, err)
	for i := range 2 {
		require.Len(t, got.Hypotheses[i], len(want.Hypotheses[i]))
		for j, h := range got.Hypotheses[i] {
			w := want.Hypotheses[i][j]
			assert.Equal(t, w.Tokens, h.Tokens, "prompt %d, hypothesis %d", i, j)
			assert.InDelta(t, w.LogProb, h.LogProb, llamatest.Tolerance(t, llamatest.BeamLogProb), "prompt %d, hypothesis %d", i, j)
		}
	}
	assert.Greater(t, math.Abs(got.Hypotheses[0][0].LogProb-got.Hypotheses[1][0].LogProb), 1e-4, "another image, other hypotheses")
	for s := range lb.Slots() {
		assert.Zero(t, lb.Len(s), "slot %d", s)
	}

	greedy, err := beam.Search(ctx, lb, [][]int32{a}, beam.Options{Config: llamaBeamConfig(1, 8, eog), PromptEmbeddings: [][][]float32{ea}})
	require.NoError(t, err)
	gen := generation.NewGenerator(lb, llamabackend.Tokenizer{Vocab: m.Vocab()})
	res, err := gen.Generate(ctx, []generation.Request{{Prompt: a, PromptEmbeddings: ea, Config: greedyConfig(8)}})
	require.NoError(t, err)
	assert.Equal(t, res[0].Tokens, greedy.Hypotheses[0][0].Tokens)

	_, err = beam.Search(ctx, lb, [][]int32{a}, beam.Options{Config: llamaBeamConfig(2, 4, eog), PromptEmbeddings: [][][]float32{ea[:3]}})
	require.ErrorIs(t, err, beam.ErrInvalid)
	assert.ErrorContains(t, err, "3 PromptEmbeddings entries for")
	_, err = beam.Search(ctx, lb, [][]int32{a}, beam.Options{Config: llamaBeamConfig(2, 4, eog), PromptEmbeddings: [][][]float32{ea, eb}})
	require.ErrorIs(t, err, beam.ErrInvalid)
}

// Prompt lookup speculates with an image in the prompt, over the prefix
// cache, with exactly the tokens of plain greedy decoding; a draft model is
// refused, saying why.
func TestMediaSpeculation(t *testing.T) {
	m := llamaModel(t, "tiny")
	prompt := imagePrompter(t, m)
	a, ea := prompt(0, mediaText)
	plain, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	want, err := plain.Generate(context.Background(), []generation.Request{{Prompt: a, PromptEmbeddings: ea, Config: greedyConfig(24)}})
	require.NoError(t, err)

	cfg := greedyConfig(24)
	k := 3
	cfg.PromptLookupNumTokens = &k
	cached, _, _ := cachedGenerator(t, m, llamacpp.ContextParams{ContextSize: 1024, Sequences: 2, BatchSize: 16}, 1)
	for round := range 2 {
		got, err := cached.Generate(context.Background(), []generation.Request{{Prompt: a, PromptEmbeddings: ea, Config: cfg}})
		require.NoError(t, err)
		assert.Equal(t, want[0].Tokens, got[0].Tokens, "round %d", round)
	}

	_, draft := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1})
	_, target := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1})
	gen, err := generation.New(target, nil, generation.Options{Draft: draft})
	require.NoError(t, err)
	_, err = gen.Generate(context.Background(), []generation.Request{{Prompt: a, PromptEmbeddings: ea, Config: greedyConfig(4)}})
	require.ErrorContains(t, err, "the draft model cannot read the prompt's embeddings")
}

// A request with an image, stopped and resumed from its state, gives the
// tokens of the uninterrupted request, and over the prefix cache that kept
// its slot evaluates only its last token; its state refuses another image.
// A state file, which holds tokens alone, cannot capture the sequence.
func TestMediaResume(t *testing.T) {
	m := llamaModel(t, "tiny")
	prompt := imagePrompter(t, m)
	a, ea := prompt(0, mediaText)
	_, eb := prompt(97, mediaText)
	ctx := context.Background()
	req := generation.Request{Prompt: a, PromptEmbeddings: ea, Config: greedyConfig(20)}
	plain, _ := llamaGenerator(t, m, llamacpp.ContextParams{ContextSize: 512, Sequences: 1, BatchSize: 16})
	full, err := plain.Generate(ctx, []generation.Request{req})
	require.NoError(t, err)
	require.Greater(t, len(full[0].Tokens), 8)

	gen, pc, lb := cachedGenerator(t, m, llamacpp.ContextParams{ContextSize: 2048, Sequences: 2, BatchSize: 16}, 1)
	const k = 7
	var st *generation.RequestState
	n := 0
	for _, err := range gen.Stream(ctx, []generation.Request{req}) {
		require.NoError(t, err)
		if n++; n == k {
			st, err = gen.State(0)
			require.NoError(t, err)
			break
		}
	}
	require.NotEmpty(t, st.Embeddings)
	data, err := st.MarshalBinary()
	require.NoError(t, err)
	var back generation.RequestState
	require.NoError(t, back.UnmarshalBinary(data))
	require.Equal(t, st, &back)

	_, err = statefile.Capture(pc, lb, append(slices.Clone(st.Prompt), st.Tokens[:k-1]...))
	require.Error(t, err, "a state file holds no media")

	other := req
	other.PromptEmbeddings = eb
	err = nil
	for _, e := range gen.Resume(ctx, []generation.Request{other}, []*generation.RequestState{&back}) {
		err = e
		break
	}
	require.ErrorContains(t, err, "the state's prompt embeddings (its media) are not the request's")

	saved := pc.Stats().TokensSaved
	var rest []int32
	for ev, err := range gen.Resume(ctx, []generation.Request{req}, []*generation.RequestState{&back}) {
		require.NoError(t, err)
		if ev.Token >= 0 {
			rest = append(rest, ev.Token)
		}
	}
	assert.Equal(t, full[0].Tokens, append(slices.Clone(back.Tokens), rest...))
	assert.EqualValues(t, len(a)+k-1, pc.Stats().TokensSaved-saved, "only the last saved token was evaluated")
}
