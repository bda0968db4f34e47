package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/refbackend"
	ref64 "github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An encoder-decoder model serves completions, the prompt its encoder
// input: through the OpenAI SDK, greedy text is the float64 reference's
// and the usage counts the encoder input; a chat request to a model
// without a chat template and an empty prompt get a 400.
func TestServeEncoderDecoder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t5.gguf")
	t5 := testmodel.TinyT5()
	require.NoError(t, t5.Write(path))
	ref, err := ref64.LoadT5(path)
	require.NoError(t, err)
	const text = "The cat sat on the mat"
	in := t5.Vocab.Tokenize(text, true)
	cfg := genconfig.Default()
	n := 10
	cfg.MaxNewTokens = &n
	cfg.EOSTokenID = []int32{testmodel.EOS}
	want, err := generation.NewGenerator(refbackend.NewT5(ref, 1), nil).Generate(context.Background(),
		[]generation.Request{{Prompt: in, Config: cfg}})
	require.NoError(t, err)
	wantText := ""
	for _, tok := range want[0].Tokens {
		if tok != testmodel.EOS {
			wantText += t5.Vocab.Piece(tok)
		}
	}

	// startServer's --batch-invariant needs a KV stream per sequence,
	// which the t5 decoder does not have: refused, as a usage error.
	refused := clitest.Run(t, bin, "", "-m", path, "--parallel", "2", "--batch-invariant")
	assert.Equal(t, 2, refused.Code)
	assert.Contains(t, refused.Stderr, "--batch-invariant does not combine with an encoder-decoder model of several sequences")
	s := startServer(t, "-m", path, "--parallel", "2", "--batch-invariant=false")
	assert.Contains(t, s.log(), "chat template: none (an encoder-decoder model")
	client := s.client()
	ctx := context.Background()
	res, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "t5", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(text)},
		MaxTokens: openai.Int(10), Temperature: openai.Float(0),
	})
	require.NoError(t, err)
	require.Len(t, res.Choices, 1)
	// JSON carries each byte of invalid UTF-8 (a byte token alone) as U+FFFD.
	valid := ""
	for _, r := range wantText {
		valid += string(r)
	}
	assert.Equal(t, valid, res.Choices[0].Text)
	assert.Equal(t, int64(len(in)), res.Usage.PromptTokens)
	assert.Equal(t, int64(len(want[0].Tokens)), res.Usage.CompletionTokens)

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "t5",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "no chat template")

	_, err = client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "t5", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("")}, MaxTokens: openai.Int(4),
	})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "no encoder input")
}
