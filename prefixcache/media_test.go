package prefixcache_test

import (
	"context"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// embdBackend is a backend.EmbeddingInput over a MemoryBackend: an input
// embedding is evaluated as the token int32(e[0]), so that the logits
// depend on it as on a token, and the MemoryBackend's history and counters
// show what was evaluated.
type embdBackend struct {
	*backend.MemoryBackend
	feeds []backend.Feed
}

func newEmbdBackend(slots int) *embdBackend {
	return &embdBackend{MemoryBackend: backend.NewMemoryBackend(vocab, slots, testmodel.HashModel(vocab))}
}

func (b *embdBackend) InputEmbeddingSize() int { return 2 }

func (b *embdBackend) rewrite(feeds []backend.Feed) ([]backend.Feed, error) {
	b.feeds = b.feeds[:0]
	for i, f := range feeds {
		if err := backend.CheckEmbd(feeds, i, b.InputEmbeddingSize()); err != nil {
			return nil, err
		}
		toks := slices.Clone(f.Tokens)
		for j := range toks {
			if e := backend.EmbdAt(f, j); e != nil {
				toks[j] = int32(e[0])
			}
		}
		b.feeds = append(b.feeds, backend.Feed{Slot: f.Slot, Tokens: toks})
	}
	return b.feeds, nil
}

func (b *embdBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	fs, err := b.rewrite(feeds)
	if err != nil {
		return err
	}
	return b.MemoryBackend.Eval(ctx, fs)
}

func (b *embdBackend) EvalAll(ctx context.Context, feeds []backend.Feed) error {
	fs, err := b.rewrite(feeds)
	if err != nil {
		return err
	}
	return b.MemoryBackend.EvalAll(ctx, fs)
}

// image is n embeddings standing for the tokens first, first+1, ...
func image(first, n int) [][]float32 {
	e := make([][]float32, n)
	for i := range e {
		e[i] = []float32{float32(first + i), 0.5}
	}
	return e
}

// mediaPrompt is 5 tokens of text, the image's placeholders (token 0) and
// 3 tokens of text, with the image's embeddings at the placeholders.
func mediaPrompt(img [][]float32) ([]int32, [][]float32) {
	p := append(append(toks(1, 5), make([]int32, len(img))...), toks(9, 3)...)
	embd := make([][]float32, len(p))
	copy(embd[5:], img)
	return p, embd
}

// The second turn of a chat about an image evaluates only its new tokens
// and gives the tokens it gives without the cache; another image of the
// same size reuses only the text before it, and so does a text prompt with
// the same placeholder tokens; an image that agrees with the first one in
// its first embeddings only is not reused in part.
func TestMediaReused(t *testing.T) {
	ctx := context.Background()
	plain := newEmbdBackend(1)
	under := newEmbdBackend(5)
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 4})
	require.NoError(t, err)
	genPlain, genCached := generation.NewGenerator(plain, nil), generation.NewGenerator(pc, nil)
	cfg, _ := config("greedy", 6)
	run := func(p []int32, embd [][]float32) ([]int32, int) {
		t.Helper()
		req := []generation.Request{{Prompt: p, PromptEmbeddings: embd, Config: cfg}}
		want, err := genPlain.Generate(ctx, req)
		require.NoError(t, err)
		under.ResetStats()
		got, err := genCached.Generate(ctx, req)
		require.NoError(t, err)
		require.Equal(t, want[0].Tokens, got[0].Tokens)
		return got[0].Tokens, under.Stats().Tokens - (len(got[0].Tokens) - 1)
	}

	p, embd := mediaPrompt(image(40, 8))
	reply, evaluated := run(p, embd)
	assert.Equal(t, len(p), evaluated)

	// The second turn: the first, its reply and new text.
	turn2 := append(append(slices.Clone(p), reply...), toks(30, 4)...)
	embd2 := append(slices.Clone(embd), make([][]float32, len(reply)+4)...)
	_, evaluated = run(turn2, embd2)
	assert.Equal(t, 4+1, evaluated, "the new text and the reply's last token")

	for name, other := range map[string][][]float32{
		"another image":       image(48, 8),
		"a text prompt":       nil,
		"an image that forks": append(image(40, 4), image(52, 4)...),
	} {
		t.Run(name, func(t *testing.T) {
			q, qe := mediaPrompt(other)
			if other == nil {
				q, qe = slices.Clone(p), nil // the placeholders as text
			}
			slot, shared, _ := pc.Lookup(q, qe)
			assert.GreaterOrEqual(t, slot, 0)
			assert.Equal(t, 5, shared, "the text before the image")
			out, evaluated := run(q, qe)
			assert.Equal(t, len(q)-5, evaluated)
			if other != nil {
				assert.NotEqual(t, reply, out, "another image, another reply")
			}
		})
	}
	// The first image is still held whole.
	_, shared, _ := pc.Lookup(p, embd)
	assert.Equal(t, len(p), shared)
	_, shared, _ = pc.Lookup(p, embd[:3])
	assert.Zero(t, shared, "embeddings that do not fit the tokens match nothing")
}

// A reused prefix never ends inside an image: a prompt that ends in the
// image reuses the text before it only, and so does one whose image is a
// shorter run of the same embeddings; the logits are those of the whole
// prompt evaluated alone.
func TestMediaReusedWhole(t *testing.T) {
	ctx := context.Background()
	plain := newEmbdBackend(1)
	under := newEmbdBackend(2)
	pc, err := prefixcache.New(under, prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	p, embd := mediaPrompt(image(40, 8))
	require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p, Embd: embd}}))
	require.NoError(t, pc.Clear(0))

	for name, n := range map[string]int{"ends in the image": 5 + 8, "a shorter image": 5 + 6} {
		t.Run(name, func(t *testing.T) {
			q, qe := slices.Clone(p[:n]), slices.Clone(embd[:n])
			if n < 13 {
				q, qe = append(q, toks(9, 3)...), append(qe, nil, nil, nil)
			}
			under.ResetStats()
			require.NoError(t, pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: q, Embd: qe}}))
			assert.Equal(t, len(q)-5, under.Stats().Tokens)
			require.NoError(t, plain.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: q, Embd: qe}}))
			assert.Equal(t, plain.Logits(0), pc.Logits(0))
			require.NoError(t, plain.Clear(0))
			require.NoError(t, pc.Clear(0))
		})
	}
}

// A feed with embeddings over a backend that takes none is refused, and so
// is one whose embeddings do not fit its tokens; the generator refuses a
// request with embeddings on such a cache before it runs.
func TestMediaRefused(t *testing.T) {
	ctx := context.Background()
	pc, err := prefixcache.New(backend.NewMemoryBackend(vocab, 2, testmodel.HashModel(vocab)), prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	p, embd := mediaPrompt(image(40, 2))
	assert.Zero(t, pc.InputEmbeddingSize())
	err = pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p, Embd: embd}})
	require.ErrorIs(t, err, backend.ErrBadEmbedding)
	assert.ErrorContains(t, err, "takes no input embeddings")
	_, err = generation.NewGenerator(pc, nil).Generate(ctx, []generation.Request{{Prompt: p, PromptEmbeddings: embd}})
	require.ErrorIs(t, err, backend.ErrBadEmbedding)

	pc, err = prefixcache.New(newEmbdBackend(2), prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	assert.Equal(t, 2, pc.InputEmbeddingSize())
	err = pc.Eval(ctx, []backend.Feed{{Slot: 0, Tokens: p, Embd: embd[1:]}})
	require.ErrorIs(t, err, backend.ErrBadEmbedding)
	assert.ErrorContains(t, err, "embedding entries for")
}

// Prompt lookup speculates over the cache with a prompt that ends in an
// image: the image's last embedding is fed with the first candidates, and
// the tokens are those of plain greedy decoding.
func TestMediaPromptLookup(t *testing.T) {
	ctx := context.Background()
	p, embd := mediaPrompt(image(40, 8))
	p, embd = p[:13], embd[:13] // the text and the image
	p = append(p, toks(9, 3)...)
	p = append(p, p[:13]...) // the same again, for prompt lookup to find
	embd = append(embd, nil, nil, nil)
	embd = append(embd, embd[:13]...)
	cfg, _ := config("greedy", 12)
	want, err := generation.NewGenerator(newEmbdBackend(1), nil).Generate(ctx, []generation.Request{{Prompt: p, PromptEmbeddings: embd, Config: cfg}})
	require.NoError(t, err)

	lookup := cfg.Clone()
	k := 4
	lookup.PromptLookupNumTokens = &k
	pc, err := prefixcache.New(newEmbdBackend(2), prefixcache.Options{CacheSlots: 1})
	require.NoError(t, err)
	got, err := generation.NewGenerator(pc, nil).Generate(ctx, []generation.Request{{Prompt: p, PromptEmbeddings: embd, Config: lookup}})
	require.NoError(t, err)
	assert.Equal(t, want[0].Tokens, got[0].Tokens)
	assert.Positive(t, got[0].Speculation.Drafted)
}

// BenchmarkMediaLookup looks up a prompt holding an image of 256
// embeddings of width 2048 (a SigLIP-sized image for a 2B model): the cost
// of hashing it, which every Eval with embeddings and every Lookup pays
// once.
func BenchmarkMediaLookup(b *testing.B) {
	img := make([][]float32, 256)
	for i := range img {
		img[i] = make([]float32, 2048)
		for j := range img[i] {
			img[i][j] = float32(i*2048+j) * 1e-3
		}
	}
	p, embd := mediaPrompt(img)
	pc, err := prefixcache.New(newEmbdBackend(2), prefixcache.Options{CacheSlots: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(256 * 2048 * 4)
	b.ReportAllocs()
	for b.Loop() {
		pc.Lookup(p, embd)
	}
}
