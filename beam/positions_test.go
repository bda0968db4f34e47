package beam_test

import (
	"context"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// positionMemory is a MemoryBackend that takes positions, as an M-RoPE
// model's backend does when mrope, and records every feed's positions.
type positionMemory struct {
	*backend.MemoryBackend
	mrope bool
	fed   [][]backend.Pos
}

func (b *positionMemory) MRoPE() bool { return b.mrope }

func (b *positionMemory) Eval(ctx context.Context, feeds []backend.Feed) error {
	stripped := slices.Clone(feeds)
	for i := range stripped {
		b.fed = append(b.fed, slices.Clone(feeds[i].Pos))
		stripped[i].Pos = nil
	}
	return b.MemoryBackend.Eval(ctx, stripped)
}

// A prompt's positions go with its feed alone: the beams' tokens come
// without, for the backend to continue each slot's (which Copy copies);
// a prompt without positions beside it has none (as every prompt on a
// backend without positions may have). Positions are refused on
// a backend without them, for a model without M-RoPE, and where they do
// not fit the prompts.
func TestPromptPositions(t *testing.T) {
	const vocab = 8
	pos := []backend.Pos{{T: 0, H: 0, W: 0}, {T: 1, H: 1, W: 1}, {T: 3, H: 3, W: 3}}
	b := &positionMemory{MemoryBackend: backend.NewMemoryBackend(vocab, 4, hashModel(vocab, 1)), mrope: true}
	cfg := cfgOf(func(c *genconfig.Config) { c.NumBeams, c.NumReturnSequences, c.MaxNewTokens = 2, 2, intp(3) })
	_, err := beam.Search(context.Background(), b, [][]int32{{1, 2, 3}, {4, 5}}, beam.Options{Config: cfg, PromptPositions: [][]backend.Pos{pos, nil}})
	require.NoError(t, err)
	prompts := 0
	for _, p := range b.fed {
		if p != nil {
			assert.Equal(t, pos, p)
			prompts++
		}
	}
	assert.Equal(t, 1, prompts, "the first prompt's feed alone has positions")
	_, err = beam.Search(context.Background(), backend.NewMemoryBackend(vocab, 4, hashModel(vocab, 1)), [][]int32{{1, 2, 3}}, beam.Options{Config: cfg, PromptPositions: [][]backend.Pos{nil}})
	require.NoError(t, err, "no prompt with positions, on a backend without them")

	for name, tc := range map[string]struct {
		b    backend.Backend
		pos  [][]backend.Pos
		want string
	}{
		"memory":   {backend.NewMemoryBackend(vocab, 4, hashModel(vocab, 1)), [][]backend.Pos{pos}, "backend without input positions"},
		"no mrope": {&positionMemory{MemoryBackend: backend.NewMemoryBackend(vocab, 4, hashModel(vocab, 1))}, [][]backend.Pos{pos}, "no M-RoPE"},
		"prompts":  {b, [][]backend.Pos{pos, pos}, "PromptPositions for 1 prompts, 2 given"},
		"count":    {b, [][]backend.Pos{pos[:2]}, "2 PromptPositions entries for 3 tokens"},
		"order":    {b, [][]backend.Pos{{pos[1], pos[0], pos[2]}}, "before the history's next position"},
	} {
		_, err := beam.Search(context.Background(), tc.b, [][]int32{{1, 2, 3}}, beam.Options{Config: cfg, PromptPositions: tc.pos})
		assert.ErrorIs(t, err, beam.ErrInvalid, name)
		assert.ErrorIs(t, err, backend.ErrBadPosition, name)
		assert.ErrorContains(t, err, tc.want, name)
	}
}
