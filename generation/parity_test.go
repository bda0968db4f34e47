package generation_test

import (
	"testing"

	"github.com/llamaloop/llamaloop/internal/parity"
	"github.com/llamaloop/llamaloop/internal/parity/greedycheck"
	"github.com/stretchr/testify/require"
)

// Every greedy_logprobs case of transformers replays through the loop with
// the same tokens, scores and transition scores.
func TestGreedyLogprobsParity(t *testing.T) {
	file, err := parity.ReadFile("../internal/parity/testdata/greedy_logprobs.json")
	require.NoError(t, err)
	require.Equal(t, "greedy_logprobs", file.Kind)
	require.Len(t, file.Cases, 20)
	for _, raw := range file.Cases {
		c, err := parity.DecodeCase[parity.GreedyCase](raw)
		require.NoError(t, err)
		t.Run(c.ID, func(t *testing.T) {
			require.NoError(t, greedycheck.ReplayGreedy(c))
		})
	}
}
