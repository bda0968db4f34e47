package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/generation"
)

// llamaserve speculates with --prompt-lookup (over a prefix cache) and with
// --assistant-model, and with a request's prompt_lookup_num_tokens: greedy
// replies, with a stop string, are those of plain decoding, and sampled
// replies with logprobs are those of plain decoding for the same seed
// (prompt lookup verifies by the request's own draws).
func TestServeSpeculative(t *testing.T) {
	draft, err := demo.Noisy("demo-draft", 0.3, 1)
	require.NoError(t, err)
	draftPath := filepath.Join(t.TempDir(), "draft.gguf")
	require.NoError(t, draft.Write(draftPath))
	for name, args := range map[string][]string{
		"prompt lookup":   {"--prompt-lookup", "4", "--parallel", "2", "--cache-slots", "2"},
		"assistant model": {"--assistant-model", draftPath},
		"request field":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, args...)
			client := s.client()
			ctx := context.Background()
			var opts []option.RequestOption
			if args == nil {
				opts = append(opts, option.WithJSONSet("prompt_lookup_num_tokens", 3))
			}
			full, _ := greedy("The model", 30)
			stop := " every"
			cut := strings.Index(full, stop)
			require.Positive(t, cut, full)
			res, err := client.Completions.New(ctx, openai.CompletionNewParams{
				Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
				MaxTokens: openai.Int(30), Temperature: openai.Float(0),
				Stop: openai.CompletionNewParamsStopUnion{OfStringArray: []string{"zzz", stop}},
			}, opts...)
			require.NoError(t, err)
			assert.Equal(t, full[:cut], res.Choices[0].Text)
			assert.Equal(t, openai.CompletionChoiceFinishReasonStop, res.Choices[0].FinishReason)
			if name == "assistant model" {
				return // sampling with a draft model draws otherwise
			}
			chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What does the model read?")},
				MaxTokens: openai.Int(20), Seed: openai.Int(7), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
			}, opts...)
			require.NoError(t, err)
			want := reference(t, generation.Request{Messages: chatMessages("", "What does the model read?"),
				Config: sampling(20), Seed: 7, Logprobs: true, TopLogprobs: 2})
			assert.Equal(t, want.Text, chat.Choices[0].Message.Content)
		})
	}
}
