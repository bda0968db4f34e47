package main

import (
	"os"
	"path/filepath"
	"strings"
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
		{[]string{"--assistant-model", tinyModel, "--num-beams", "2"}, "does not speculate"},
	} {
		res := run(t, "", append([]string{"-m", demoModel, "-p", "The model"}, tc.args...)...)
		assert.NotEqual(t, 0, res.Code, "%v", tc.args)
		assert.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
}

// Speculation combines with every flag of the plain loop: --logprobs,
// --json, --stop-strings, --grammar, --mirostat and sampling give with
// --prompt-lookup exactly the output of the same run without it (prompt
// lookup verifies by the run's own choices and draws).
func TestSpeculativeCombines(t *testing.T) {
	gbnf := filepath.Join(t.TempDir(), "words.gbnf")
	require.NoError(t, os.WriteFile(gbnf, []byte(`root ::= [a-z ]+`), 0o644))
	for _, args := range [][]string{
		{"--logprobs", "2", "--json"},
		{"--stop-strings", "every"},
		{"--grammar", gbnf},
		{"--mirostat", "2", "--seed", "3"},
		{"--do-sample", "--temperature", "0.8", "--seed", "5", "--json"},
	} {
		base := append([]string{"-m", demoModel, "-p", "The model", "--max-new-tokens", "24"}, args...)
		plain := run(t, "", base...)
		require.Equal(t, 0, plain.Code, plain.Stderr)
		spec := run(t, "", append(base, "--prompt-lookup", "3")...)
		require.Equal(t, 0, spec.Code, spec.Stderr)
		assert.Equal(t, plain.Stdout, spec.Stdout, "%v", args)
		assert.Contains(t, spec.Stderr, "candidates accepted", "%v", args)
	}
}

// Interactive --chat speculates with --prompt-lookup and --assistant-model
// (it used to ignore both): each turn's reply is the plain chat's, and
// each turn's summary reports the speculation.
func TestChatSpeculates(t *testing.T) {
	draft, err := demo.Noisy("demo-draft", 0.3, 1)
	require.NoError(t, err)
	draftPath := filepath.Join(t.TempDir(), "draft.gguf")
	require.NoError(t, draft.Write(draftPath))
	args := []string{"-m", demoModel, "--chat", "--max-new-tokens", "16", "--json"}
	input := "hello\nwhat is a token\n"
	plain := run(t, input, args...)
	require.Equal(t, 0, plain.Code, plain.Stderr)
	want := ofType(jsonLines(t, plain.Stdout), "result")
	require.Len(t, want, 2)
	for _, extra := range [][]string{{"--prompt-lookup", "4"}, {"--assistant-model", draftPath}} {
		res := run(t, input, append(args, extra...)...)
		require.Equal(t, 0, res.Code, res.Stderr)
		got := ofType(jsonLines(t, res.Stdout), "result")
		require.Len(t, got, 2)
		for i := range want {
			assert.Equal(t, want[i]["tokens"], got[i]["tokens"], "%v turn %d", extra, i)
		}
		assert.Equal(t, 2, strings.Count(res.Stderr, "candidates accepted"), "%v: %s", extra, res.Stderr)
	}
}
