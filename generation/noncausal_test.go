package generation

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/backend"
)

// runsMemory is a MemoryBackend taking input embeddings of width 4 and
// non-causal runs of at most max positions; it records each feed's length
// and runs.
type runsMemory struct {
	*backend.MemoryBackend
	max   int
	feeds []recordedFeed
}

type recordedFeed struct {
	n    int
	runs []backend.Span
}

func (*runsMemory) InputEmbeddingSize() int { return 4 }
func (b *runsMemory) MaxNonCausal() int     { return b.max }

func (b *runsMemory) Eval(ctx context.Context, feeds []backend.Feed) error {
	for i, f := range feeds {
		if err := backend.CheckNonCausal(f.NonCausal, f.Embd, b.max); err != nil {
			return err
		}
		if f.Slot == 0 && i == 0 {
			b.feeds = append(b.feeds, recordedFeed{len(f.Tokens), append([]backend.Span(nil), f.NonCausal...)})
		}
	}
	return b.MemoryBackend.Eval(ctx, feeds)
}

// A request's non-causal runs reach the backend whole, relative to their
// feed: the engine's prompt chunks end before a run or after it (a chunk
// of 3 at the start of a run of 7 takes the whole run), and generated
// tokens carry none. Runs that do not fit are refused with the reason.
func TestNonCausalRunsStayWhole(t *testing.T) {
	b := &runsMemory{MemoryBackend: backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0)), max: 8}
	e, err := NewEngine(b, nil, EngineOptions{PromptChunk: 3})
	require.NoError(t, err)
	defer e.Close()
	prompt := []int32{6, 7, 3, 3, 3, 3, 3, 3, 3, 8, 9, 6}
	embd := make([][]float32, len(prompt))
	for i := 2; i < 9; i++ {
		embd[i] = []float32{1, 2, 3, float32(i)}
	}
	req := Request{Prompt: prompt, PromptEmbeddings: embd, PromptNonCausal: []backend.Span{{Start: 2, End: 9}}, Config: greedyConfig(2)}
	_, err = e.Generate(context.Background(), []Request{req})
	require.NoError(t, err)
	assert.Equal(t, []recordedFeed{{2, nil}, {7, []backend.Span{{Start: 0, End: 7}}}, {3, nil}, {1, nil}}, b.feeds)

	for _, c := range []struct {
		runs []backend.Span
		embd [][]float32
		msg  string
	}{
		{[]backend.Span{{Start: 1, End: 9}}, embd, "holds a token at 1"},
		{[]backend.Span{{Start: 2, End: 9}}, nil, "PromptNonCausal without PromptEmbeddings"},
		{[]backend.Span{{Start: 2, End: 6}, {Start: 5, End: 9}}, embd, "overlaps the run before"},
		{[]backend.Span{{Start: 9, End: 13}}, embd, "leaves the 12 positions"},
	} {
		bad := req
		bad.PromptNonCausal, bad.PromptEmbeddings = c.runs, c.embd
		_, err := e.Generate(context.Background(), []Request{bad})
		assert.ErrorIs(t, err, backend.ErrBadEmbedding, c.msg)
		assert.ErrorContains(t, err, c.msg)
	}
	b.max = 6
	_, err = e.Generate(context.Background(), []Request{req})
	assert.ErrorContains(t, err, "of 7 positions is over the backend's bound of 6")
	assert.ErrorContains(t, err, "n_ubatch")
	_, err = NewGenerator(embeddingMemory{backend.NewMemoryBackend(len(testPieces), 1, loopyModel(0))}, nil).
		Generate(context.Background(), []Request{req})
	assert.ErrorContains(t, err, "PromptNonCausal on a backend without non-causal input")
}
