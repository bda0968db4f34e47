package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --prompt-lookup and --assistant-model print the demo model's exact greedy
// continuation, and the summary says how many candidates were accepted.
func TestSpeculativeIsGreedy(t *testing.T) {
	draft, err := demo.Noisy("demo-draft", 0.3, 1)
	require.NoError(t, err)
	draftPath := filepath.Join(t.TempDir(), "draft.gguf")
	require.NoError(t, draft.Write(draftPath))
	_, want := greedy(t, "The model", 30)
	for _, args := range [][]string{
		{"--prompt-lookup", "5"},
		{"--prompt-lookup", "3", "--max-matching-ngram-size", "1"},
		{"--assistant-model", draftPath},
		{"--assistant-model", draftPath, "--num-assistant-tokens", "3", "--num-assistant-tokens-schedule", "heuristic", "--assistant-confidence-threshold", "0"},
	} {
		res := run(t, "", append([]string{"-m", demoModel, "-p", "The model", "--max-new-tokens", "30"}, args...)...)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Equal(t, want+"\n", res.Stdout, "%v", args)
		assert.Contains(t, res.Stderr, "speculative: ", "%v", args)
		assert.Contains(t, res.Stderr, "candidates accepted", "%v", args)
	}
}

func TestSpeculativeBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt-lookup", "0"}, "--prompt-lookup 0"},
		{[]string{"--prompt-lookup", "3", "--num-beams", "2"}, "num_beams is 2"},
		{[]string{"--assistant-model", "/nonexistent.gguf"}, "--assistant-model"},
		{[]string{"--assistant-model", tinyModel, "--num-assistant-tokens-schedule", "fast"}, "num_assistant_tokens_schedule"},
		{[]string{"--prompt-lookup", "3", "--logprobs", "2"}, "--logprobs"},
	} {
		res := run(t, "", append([]string{"-m", demoModel, "-p", "The model"}, tc.args...)...)
		assert.NotEqual(t, 0, res.Code, "%v", tc.args)
		assert.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
}
