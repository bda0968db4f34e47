package cli

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLlamaFlagsAreLlamaCpps: every spelling of the table is one of
// llama.cpp's (arg.cpp at the pin), and the names are sorted as the
// generator wrote them.
func TestLlamaFlagsAreLlamaCpps(t *testing.T) {
	for _, lf := range llamaFlags {
		for _, n := range lf.spellings() {
			assert.Contains(t, llamaCppNames, n, "llama.cpp has no option %s", n)
		}
	}
	assert.True(t, slices.IsSorted(llamaCppNames))
	for cmd, notes := range aliasNotes {
		for names := range notes {
			assert.True(t, slices.ContainsFunc(llamaFlags, func(lf llamaFlag) bool { return lf.names == names }), "%s: %s", cmd, names)
		}
	}
}
