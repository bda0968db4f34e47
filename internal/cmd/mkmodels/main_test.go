package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunIsIdempotent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "models")
	require.NoError(t, run(out, true, noBench, false))
	names := []string{"demo.gguf", "tiny-f32.gguf", "tiny-f16.gguf", "markov.gguf", "prefix.gguf", "tiny-t5.gguf",
		"tiny-qwen2vl.gguf", "tiny-gemma3.mmproj.gguf", "tiny-qwen2vl.mmproj.gguf",
		"tiny-qwen2a.mmproj.gguf"}
	mtimes := map[string]int64{}
	for _, n := range names {
		st, err := os.Stat(filepath.Join(out, n))
		require.NoError(t, err, n)
		mtimes[n] = st.ModTime().UnixNano()
	}
	demo, err := testmodel.NewDemo()
	require.NoError(t, err)
	assert.True(t, testmodel.UpToDate(filepath.Join(out, "demo.gguf"), demo))

	// A damaged file is rewritten, the others are kept.
	require.NoError(t, os.WriteFile(filepath.Join(out, "markov.gguf"), []byte("GGUF"), 0o644))
	require.NoError(t, run(out, true, noBench, false))
	for _, n := range names {
		st, err := os.Stat(filepath.Join(out, n))
		require.NoError(t, err)
		if n == "markov.gguf" {
			assert.Greater(t, st.Size(), int64(1000))
		} else {
			assert.Equal(t, mtimes[n], st.ModTime().UnixNano(), n)
		}
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, len(names))
}

func TestBenchEntries(t *testing.T) {
	names := func(set benchSet) []string {
		var out []string
		for _, e := range benchEntries(set) {
			out = append(out, e.file)
		}
		return out
	}
	assert.Empty(t, names(noBench))
	assert.Equal(t, []string{"bench-small-f16.gguf"}, names(benchSmall))
	assert.Equal(t, []string{"bench-small-f16.gguf", "bench-1b-f16.gguf"}, names(benchAll))
}
