package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every field of the SDK's ChatCompletionNewParams that has no effect here
// is accepted and changes nothing: the greedy reply equals the same
// request's reply alone in this process.
func TestServeOpenAIFieldsIgnored(t *testing.T) {
	s := startServer(t)
	client := s.client()
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a model."), openai.UserMessage("What does the model read?")}
	res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: msgs, MaxCompletionTokens: openai.Int(14), Temperature: openai.Float(0),
		Metadata:             shared.Metadata{"app": "test"},
		Store:                openai.Bool(true),
		ServiceTier:          openai.ChatCompletionNewParamsServiceTierFlex,
		User:                 openai.String("user-1"),
		SafetyIdentifier:     openai.String("safety-1"),
		PromptCacheKey:       openai.String("cache-1"),
		PromptCacheRetention: openai.ChatCompletionNewParamsPromptCacheRetention24h,
		PromptCacheOptions:   openai.ChatCompletionNewParamsPromptCacheOptions{Mode: "explicit", Ttl: "30m"},
		ReasoningEffort:      shared.ReasoningEffortHigh,
		Verbosity:            openai.ChatCompletionNewParamsVerbosityLow,
		ParallelToolCalls:    openai.Bool(false),
		Modalities:           []string{"text"},
		Prediction: openai.ChatCompletionPredictionContentParam{
			Content: openai.ChatCompletionPredictionContentContentUnionParam{OfString: openai.String("The model reads")},
		},
		WebSearchOptions: openai.ChatCompletionNewParamsWebSearchOptions{SearchContextSize: "low"},
		ToolChoice:       openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")},
		PresencePenalty:  openai.Float(0), FrequencyPenalty: openai.Float(0),
	}, option.WithJSONSet("tools", nil), option.WithJSONSet("audio", nil), option.WithJSONSet("moderation", nil),
		option.WithJSONSet("stream_options", nil))
	require.NoError(t, err)
	cfg := genconfig.Default()
	n := 14
	cfg.TopK, cfg.MaxNewTokens = 0, &n
	want := reference(t, generation.Request{Messages: chatMessages("You are a model.", "What does the model read?"), Config: cfg})
	require.Len(t, res.Choices, 1)
	assert.Equal(t, want.Text, res.Choices[0].Message.Content)

	res2, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(0), User: openai.String("user-1"),
		BestOf: openai.Int(1), Echo: openai.Bool(false), Suffix: openai.String(""),
	})
	require.NoError(t, err)
	text, _ := greedy("The model", 10)
	assert.Equal(t, text, res2.Choices[0].Text)

	// What asks for something the server lacks is refused by name.
	for _, tc := range []struct {
		param string
		opt   option.RequestOption
		msg   string
	}{
		{"modalities", option.WithJSONSet("modalities", []string{"text", "audio"}), "text only"},
		{"audio", option.WithJSONSet("audio", map[string]string{"voice": "alloy", "format": "wav"}), "audio output is not supported"},
		{"tools[0].type", option.WithJSONSet("tools", []any{map[string]any{"type": "custom", "custom": map[string]any{"name": "f"}}}), "only function tools are supported"},
		{"tool_choice", option.WithJSONSet("tool_choice", "required"), `tool_choice "required" needs tools`},
	} {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Messages: msgs, MaxTokens: openai.Int(2)}, tc.opt)
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, tc.param)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, tc.param)
		assert.Equal(t, tc.param, apiErr.Param)
		assert.Contains(t, apiErr.Message, tc.msg)
	}
}

// greedyPenalized is greedy with OpenAI's presence and frequency penalties
// over the generated tokens, in the server's float32 arithmetic.
func greedyPenalized(text string, n int, presence, frequency float32) string {
	prompt := demo.Spec.Vocab.Tokenize(text, true)
	prev := prompt[len(prompt)-1]
	counts := map[int32]int{}
	out := ""
	for range n {
		row := demo.Logits(prev)
		best, bestV := 0, float32(0)
		for j, v := range row {
			s := float32(v)
			if c := counts[int32(j)]; c > 0 {
				s -= float32(float32(c)*frequency) + presence
			}
			if j == 0 || s > bestV {
				best, bestV = j, s
			}
		}
		prev = int32(best)
		if prev == testmodel.EOS {
			return out
		}
		counts[prev]++
		out += demo.Spec.Vocab.Piece(prev)
	}
	return out
}

// presence_penalty and frequency_penalty change the greedy reply as
// OpenAI's rule does; without them the demo model repeats itself.
func TestServePenalties(t *testing.T) {
	s := startServer(t)
	client := s.client()
	plain, _ := greedy("The model", 40)
	for _, p := range []struct{ presence, frequency float64 }{{0.6, 0}, {0, 0.5}, {0.3, 0.4}, {-0.5, 0}} {
		res, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The model")},
			MaxTokens: openai.Int(40), Temperature: openai.Float(0),
			PresencePenalty: openai.Float(p.presence), FrequencyPenalty: openai.Float(p.frequency),
		})
		require.NoError(t, err)
		want := greedyPenalized("The model", 40, float32(p.presence), float32(p.frequency))
		assert.Equal(t, want, res.Choices[0].Text, "%+v", p)
		if p.presence > 0 || p.frequency > 0 {
			assert.NotEqual(t, plain, res.Choices[0].Text, "%+v", p)
		}
	}
	_, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "demo", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
		PresencePenalty: openai.Float(2.5),
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, "presence_penalty", apiErr.Param)
	assert.True(t, strings.Contains(apiErr.Message, "[-2, 2]"), apiErr.Message)
}
