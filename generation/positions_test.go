package generation

import (
	"context"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// positionMemory is a MemoryBackend that takes positions (as an M-RoPE
// model would, when mrope) and records each slot's feeds' positions.
type positionMemory struct {
	*backend.MemoryBackend
	mrope bool
	fed   [][]backend.Pos // per Eval feed, in order
}

func (b *positionMemory) MRoPE() bool             { return b.mrope }
func (b *positionMemory) InputEmbeddingSize() int { return 4 }

func (b *positionMemory) Eval(ctx context.Context, feeds []backend.Feed) error {
	stripped := slices.Clone(feeds)
	for i := range stripped {
		b.fed = append(b.fed, feeds[i].Pos)
		stripped[i].Pos, stripped[i].Embd = nil, nil
	}
	return b.MemoryBackend.Eval(ctx, stripped)
}

func (b *positionMemory) EvalAll(ctx context.Context, feeds []backend.Feed) error {
	stripped := slices.Clone(feeds)
	for i := range stripped {
		b.fed = append(b.fed, slices.Clone(feeds[i].Pos))
		stripped[i].Pos, stripped[i].Embd = nil, nil
	}
	return b.MemoryBackend.EvalAll(ctx, stripped)
}

// A request's positions go with its prompt's chunks; its generated tokens
// come without (the backend continues them).
func TestPromptPositionsFed(t *testing.T) {
	b := &positionMemory{MemoryBackend: backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0)), mrope: true}
	e := []float32{1, 2, 3, 4}
	prompt := []int32{6, 7, 3, 3, 3, 3, 8}
	pos := []backend.Pos{at(0, 0, 0), at(1, 1, 1), at(2, 2, 2), at(2, 2, 3), at(2, 3, 2), at(2, 3, 3), at(4, 4, 4)}
	embd := [][]float32{nil, nil, e, e, e, e, nil}
	g := NewGenerator(b, nil)
	g.chunk = 3 // as an Engine's PromptChunk
	_, err := g.Generate(context.Background(), []Request{{Prompt: prompt, PromptEmbeddings: embd, PromptPositions: pos, Config: greedyConfig(2)}})
	require.NoError(t, err)
	assert.Equal(t, [][]backend.Pos{pos[:3], pos[3:6], pos[6:], nil}, b.fed)
}

// Positions are refused where they cannot be honoured, before anything
// runs: on a backend without positions or whose model has one position per
// input, in the wrong number or out of order; and an M-RoPE model's
// embeddings without positions.
func TestPromptPositionsRefused(t *testing.T) {
	mem := func() *backend.MemoryBackend { return backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0)) }
	prompt := []int32{6, 7, 8}
	pos := []backend.Pos{at(0, 0, 0), at(1, 1, 1), at(2, 2, 2)}
	cfg := greedyConfig(2)
	for name, tc := range map[string]struct {
		b    backend.Backend
		req  Request
		want string
	}{
		"memory":     {mem(), Request{Prompt: prompt, PromptPositions: pos}, "backend without input positions"},
		"no mrope":   {&positionMemory{MemoryBackend: mem()}, Request{Prompt: prompt, PromptPositions: pos}, "one position per input"},
		"count":      {&positionMemory{MemoryBackend: mem(), mrope: true}, Request{Prompt: prompt, PromptPositions: pos[:2]}, "2 PromptPositions entries for 3 prompt tokens"},
		"text":       {&positionMemory{MemoryBackend: mem(), mrope: true}, Request{Text: "Hello", PromptPositions: pos[:2]}, "need Prompt"},
		"order":      {&positionMemory{MemoryBackend: mem(), mrope: true}, Request{Prompt: prompt, PromptPositions: []backend.Pos{at(0, 0, 0), at(2, 2, 2), at(1, 1, 1)}}, "before the history's next position 3"},
		"embeddings": {&positionMemory{MemoryBackend: mem(), mrope: true}, Request{Prompt: prompt, PromptEmbeddings: make([][]float32, 3)}, "need PromptPositions"},
	} {
		if tc.req.Config == nil {
			tc.req.Config = cfg
		}
		_, err := NewGenerator(tc.b, testTokenizer{}).Generate(context.Background(), []Request{tc.req})
		assert.ErrorContains(t, err, tc.want, name)
		if name != "text" {
			assert.ErrorIs(t, err, backend.ErrBadPosition, name)
		}
	}
}

// Prompt lookup speculates with positions: the last prompt token goes with
// the first candidates, which take the text positions after the prompt's
// largest (an image's 2×2 grid at temporal position 2 makes the text after
// it start at 4); the feeds after it go without positions, and the tokens
// are plain greedy decoding's. A draft model is refused, saying why.
func TestPromptPositionsLookup(t *testing.T) {
	e := []float32{1, 2, 3, 4}
	prompt := []int32{6, 7, 3, 3, 3, 3, 8, 9, 10, 11, 8, 9}
	embd := [][]float32{nil, nil, e, e, e, e, nil, nil, nil, nil, nil, nil}
	pos := []backend.Pos{at(0, 0, 0), at(1, 1, 1), at(2, 2, 2), at(2, 2, 3), at(2, 3, 2), at(2, 3, 3)}
	for p := int32(4); p < 10; p++ {
		pos = append(pos, backend.TextPos(p))
	}
	lookup := greedyConfig(6)
	lookup.PromptLookupNumTokens = intp(2)
	newMem := func() *positionMemory {
		return &positionMemory{MemoryBackend: backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0)), mrope: true}
	}
	plain, spec := newMem(), newMem()
	want, err := NewGenerator(plain, nil).Generate(context.Background(), []Request{{Prompt: prompt, PromptEmbeddings: embd, PromptPositions: pos, Config: greedyConfig(6)}})
	require.NoError(t, err)
	got, err := NewGenerator(spec, nil).Generate(context.Background(), []Request{{Prompt: prompt, PromptEmbeddings: embd, PromptPositions: pos, Config: lookup}})
	require.NoError(t, err)
	assert.Equal(t, want[0].Tokens, got[0].Tokens)
	require.GreaterOrEqual(t, len(spec.fed), 3)
	assert.Equal(t, pos[:11], spec.fed[0], "the prompt but its last token")
	assert.Equal(t, []backend.Pos{pos[11], backend.TextPos(10), backend.TextPos(11)}, spec.fed[1], "the last prompt token and the candidates 10, 11 after it")
	for i, p := range spec.fed[2:] {
		assert.Nil(t, p, "feed %d", i+2)
	}

	g, err := New(newMem(), nil, Options{Draft: backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0))})
	require.NoError(t, err)
	textPos := make([]backend.Pos, len(prompt))
	for i := range textPos {
		textPos[i] = backend.TextPos(int32(i))
	}
	_, err = g.Generate(context.Background(), []Request{{Prompt: prompt, PromptPositions: textPos, Config: greedyConfig(2)}})
	assert.ErrorContains(t, err, "a draft model and PromptPositions (M-RoPE)")
}

// A resumed request feeds its generated tokens with its prompt: they get
// the text positions after the prompt's largest.
func TestPromptPosResumed(t *testing.T) {
	r := newSeq()
	r.prompt = []int32{6, 3, 3, 7, 10, 11} // prompt, then two generated tokens
	r.pos = []backend.Pos{at(0, 0, 0), at(1, 1, 1), at(1, 1, 2), at(3, 3, 3)}
	assert.Equal(t, r.pos[:2], r.promptPos(r.prompt[:2]))
	r.nfed = 2
	assert.Equal(t, []backend.Pos{at(1, 1, 2), at(3, 3, 3), at(4, 4, 4), at(5, 5, 5)}, r.promptPos(r.prompt[2:]))
	r.nfed = 4
	assert.Nil(t, r.promptPos(r.prompt[4:]), "after the prompt the backend continues")
}

// at is the position {t, h, w}.
func at(t, h, w int32) backend.Pos { return backend.Pos{T: t, H: h, W: w} }
