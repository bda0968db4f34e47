package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A sampled chat of two turns in one run, and the same chat as two runs
// that keep it in a --session file, give the same second answer: the second
// run resumes the conversation, its seeds and its evaluated state.
func TestChatSessionResumes(t *testing.T) {
	args := []string{"-m", demoModel, "--chat", "--max-new-tokens", "16", "--json", "--do-sample", "--temperature", "0.9", "--seed", "11"}
	whole := run(t, "hello\nwhat is a token\n", args...)
	require.Equal(t, 0, whole.Code, whole.Stderr)
	want := ofType(jsonLines(t, whole.Stdout), "result")
	require.Len(t, want, 2)

	file := filepath.Join(t.TempDir(), "chat.state")
	first := run(t, "hello\n", append(args, "--session", file)...)
	require.Equal(t, 0, first.Code, first.Stderr)
	got1 := ofType(jsonLines(t, first.Stdout), "result")
	require.Len(t, got1, 1)
	assert.Equal(t, want[0]["tokens"], got1[0]["tokens"])

	// No --seed: the session's seed is used.
	second := run(t, "what is a token\n", "-m", demoModel, "--chat", "--max-new-tokens", "16", "--json", "--do-sample",
		"--temperature", "0.9", "--session", file)
	require.Equal(t, 0, second.Code, second.Stderr)
	got2 := ofType(jsonLines(t, second.Stdout), "result")
	require.Len(t, got2, 1)
	assert.Equal(t, want[1]["tokens"], got2[0]["tokens"])
	assert.Equal(t, want[1]["prompt_tokens"], got2[0]["prompt_tokens"])
	assert.Contains(t, second.Stderr, "resuming after turn 1")
}

// A damaged session file, or one of another model, ends llamagen with an
// error that says so, before any turn.
func TestChatSessionRefusesBadFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "chat.state")
	res := run(t, "hello\n", "-m", demoModel, "--chat", "--max-new-tokens", "4", "--session", file)
	require.Equal(t, 0, res.Code, res.Stderr)
	data, err := os.ReadFile(file)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(file, data[:len(data)/2], 0o600))
	res = run(t, "hello\n", "-m", demoModel, "--chat", "--session", file)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "state file truncated or corrupted")

	require.NoError(t, os.WriteFile(file, data, 0o600))
	res = run(t, "hello\n", "-m", tinyModel, "--chat", "--session", file)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "state file of another model")

	res = run(t, "", "-m", demoModel, "-p", "hi", "--session", file)
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--session needs --chat without a prompt")
}
