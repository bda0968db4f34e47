package llamaloop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openDemo(t *testing.T, p llamacpp.ContextParams) *llamaloop.Model {
	t.Helper()
	p.Threads = 1
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{Context: p})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// Stream yields exactly the text Generate returns, and the lower
// generator's for the same request.
func TestStreamMatchesGenerate(t *testing.T) {
	m := openDemo(t, llamacpp.ContextParams{})
	ctx := context.Background()
	opts := llamaloop.GenerateOptions{MaxNewTokens: 12}
	var streamed strings.Builder
	for text, err := range m.Stream(ctx, "The model", opts) {
		require.NoError(t, err)
		streamed.WriteString(text)
	}
	res, err := m.Generate(ctx, "The model", opts)
	require.NoError(t, err)
	assert.Equal(t, res.Text, streamed.String())
	assert.Len(t, res.Tokens, 12)
	assert.Equal(t, generation.FinishLength, res.Finish)

	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(12)
	low, err := m.Generator().Generate(ctx, []generation.Request{{Text: "The model", Config: cfg}})
	require.NoError(t, err)
	assert.Equal(t, low[0].Tokens, res.Tokens)
}

// Beam's best hypothesis is beam.Search's on the model's backend, with
// the model's end-of-generation tokens: the hypotheses finish.
func TestBeamHypotheses(t *testing.T) {
	m := openDemo(t, llamacpp.ContextParams{})
	hyps, err := m.Beam(context.Background(), "The model", 3, llamaloop.GenerateOptions{MaxNewTokens: 24})
	require.NoError(t, err)
	require.Len(t, hyps, 3)
	assert.True(t, hyps[0].Finished, "the best hypothesis ends with eos")
	for i, h := range hyps {
		assert.NotEmpty(t, h.Text)
		if i > 0 {
			assert.LessOrEqual(t, h.Score, hyps[i-1].Score)
		}
		// length_penalty 1: the score is the log-probability per token.
		assert.InDelta(t, h.LogProb/float64(len(h.Tokens)), h.Score, 1e-5)
	}
}

// Misused options and calls give errors that name the option to change.
func TestErrorsSayWhatToDo(t *testing.T) {
	m := openDemo(t, llamacpp.ContextParams{ContextSize: 256})
	ctx := context.Background()
	_, err := m.Generate(ctx, "The model", llamaloop.GenerateOptions{Config: genconfig.Default(), ConfigFile: "generation_config.json"})
	assert.ErrorContains(t, err, "both Config and ConfigFile")
	_, err = m.Generate(ctx, "The model", llamaloop.GenerateOptions{Grammar: `root ::= "a"`, JSONSchema: `{}`})
	assert.ErrorContains(t, err, "both JSONSchema and Grammar")
	_, err = m.Generate(ctx, "The model", llamaloop.GenerateOptions{Grammar: `root ::= (`})
	assert.ErrorContains(t, err, "GenerateOptions.Grammar")
	_, err = m.Generate(ctx, "The model", llamaloop.GenerateOptions{ConfigFile: "missing.json"})
	assert.ErrorContains(t, err, "GenerateOptions.ConfigFile")
	_, err = m.Embed(ctx, "text")
	assert.ErrorContains(t, err, "Embeddings: true")

	res, err := m.Generate(ctx, "The model", llamaloop.GenerateOptions{MaxNewTokens: 400})
	require.ErrorContains(t, err, "larger Options.Context.ContextSize")
	assert.Equal(t, generation.FinishContextFull, res.Finish)
	assert.NotEmpty(t, res.Text)

	var last error
	for _, err := range m.Stream(ctx, "The model", llamaloop.GenerateOptions{MaxNewTokens: 400}) {
		last = err
	}
	assert.ErrorContains(t, last, "larger Options.Context.ContextSize")

	// A call inside a Stream's loop is refused, not a deadlock.
	for _, err := range m.Stream(ctx, "The model", llamaloop.GenerateOptions{MaxNewTokens: 2}) {
		require.NoError(t, err)
		_, err = m.Generate(ctx, "The model", llamaloop.GenerateOptions{})
		require.ErrorIs(t, err, llamaloop.ErrBusy)
		require.ErrorIs(t, m.Close(), llamaloop.ErrBusy)
		break
	}

	require.NoError(t, m.Close())
	_, err = m.Generate(ctx, "The model", llamaloop.GenerateOptions{})
	assert.ErrorContains(t, err, "closed")
	require.NoError(t, m.Close())
}

func TestChatTemplateErrors(t *testing.T) {
	m, err := llamaloop.Open("model.gguf", llamaloop.Options{ChatTemplate: "{{ not a known template }}", Context: llamacpp.ContextParams{Threads: 1}})
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Chat(context.Background(), []llamaloop.Message{{Role: "user", Content: "Hi"}}, llamaloop.GenerateOptions{})
	assert.ErrorContains(t, err, "Options.ChatTemplate")

	e := openDemo(t, llamacpp.ContextParams{Embeddings: true})
	_, err = e.Generate(context.Background(), "The model", llamaloop.GenerateOptions{})
	assert.ErrorContains(t, err, "without them to generate")
	_, err = e.Embed(context.Background(), "The model")
	assert.ErrorContains(t, err, "Options.Context.Pooling")
}

func TestOpenMissingFile(t *testing.T) {
	_, err := llamaloop.Open("no-such-model.gguf", llamaloop.Options{})
	assert.ErrorContains(t, err, "no-such-model.gguf")
}
