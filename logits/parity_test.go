package logits_test

import (
	"testing"

	"github.com/llamaloop/llamaloop/internal/parity"
	"github.com/stretchr/testify/require"
)

// TestParity runs the 287 cases of transformers' processor vectors (see
// internal/parity/testdata/README.md): same processor names, same -inf positions, values bit-exact except
// after LogitNormalization.
func TestParity(t *testing.T) {
	f, err := parity.ReadFile("../internal/parity/testdata/processors.json")
	require.NoError(t, err)
	require.Equal(t, "processors", f.Kind)
	require.Len(t, f.Cases, 287)
	for _, raw := range f.Cases {
		c, err := parity.DecodeCase[parity.ProcessorsCase](raw)
		require.NoError(t, err)
		t.Run(c.ID, func(t *testing.T) {
			require.NoError(t, parity.CheckProcessors(c), c.Scenario)
		})
	}
}
