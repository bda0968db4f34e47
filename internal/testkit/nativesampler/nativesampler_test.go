package nativesampler_test

import (
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/nativesampler"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNativeSamplers(t *testing.T) {
	row := []float32{0.5, 3, -1, 2.5, 0}
	g, err := nativesampler.NewGreedy(len(row))
	require.NoError(t, err)
	defer g.Close()
	tok, err := g.Sample(row)
	require.NoError(t, err)
	assert.Equal(t, int32(1), tok)
	_, err = g.Sample(row[:3])
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)

	// top_k 1 makes the chain deterministic.
	c, err := nativesampler.NewChain(len(row), nativesampler.ChainParams{PenaltyLastN: 8, RepeatPenalty: 1.1, TopK: 1, TopP: 0.9, Temperature: 0.7, Seed: 1})
	require.NoError(t, err)
	defer c.Close()
	tok, err = c.Sample(row)
	require.NoError(t, err)
	assert.Equal(t, int32(1), tok)
	for _, v := range []int{1, 2} {
		m, err := nativesampler.NewMirostat(len(row), v, 5, 0.1, 3, 1)
		require.NoError(t, err)
		tok, err = m.Sample(row)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, tok, int32(0))
		require.NoError(t, m.Close())
		require.NoError(t, m.Close())
		_, err = m.Sample(row)
		assert.ErrorIs(t, err, llamacpp.ErrClosed)
	}
	_, err = nativesampler.NewMirostat(len(row), 3, 5, 0.1, 3, 1)
	assert.ErrorIs(t, err, llamacpp.ErrInvalidArgument)
}
