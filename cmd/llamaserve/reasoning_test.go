package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vendoredTemplate reads a model's own chat template, vendored with its
// provenance for internal/jinja's tests.
func vendoredTemplate(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "jinja", "testdata", "templates", name))
	require.NoError(t, err)
	return string(data)
}

// gbnfLiteral is the GBNF grammar of exactly text.
func gbnfLiteral(text string) string {
	q, _ := json.Marshal(text) // GBNF strings escape as JSON's do for these texts
	return "root ::= " + string(q)
}

// extra reads a field the client does not know, a string ("" when absent).
func extra(fields map[string]respjson.Field, name string) string {
	f, ok := fields[name]
	if !ok {
		return ""
	}
	var s string
	json.Unmarshal([]byte(f.Raw()), &s)
	return s
}

// reasoningCase is a model template and the text a grammar makes the demo
// model write after its generation prompt.
type reasoningCase struct {
	name, template string
	written        string // what the model writes
	inline         string // the content with reasoning_format none
}

// The demo model, with the Qwen 3 and DeepSeek R1 templates, thinks as a
// grammar makes it: Qwen 3 opens <think> itself, R1's generation prompt
// opens it. The thinking comes back as reasoning_content (chat, whole and
// streamed) and as a reasoning item (Responses, whole and streamed), the
// answer as the content; reasoning_format none keeps it all inline.
func TestServeReasoning(t *testing.T) {
	const thought, answer = "The user asks about the weather.", "It is sunny."
	cases := []reasoningCase{
		{name: "qwen3", template: "Qwen-Qwen3-0.6B.jinja",
			written: "<think>\n" + thought + "\n</think>\n\n" + answer, inline: "<think>\n" + thought + "\n</think>\n\n" + answer},
		{name: "deepseek-r1", template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
			written: thought + "\n</think>\n\n" + answer, inline: thought + "\n</think>\n\n" + answer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, "--ctx", "2048", "--chat-template", vendoredTemplate(t, tc.template)) // the tools take 700 tokens
			client := s.client()
			ctx := context.Background()
			params := openai.ChatCompletionNewParams{Model: "demo", MaxTokens: openai.Int(100),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")}}
			grammar := option.WithJSONSet("grammar", gbnfLiteral(tc.written))

			res, err := client.Chat.Completions.New(ctx, params, grammar)
			require.NoError(t, err)
			m := res.Choices[0].Message
			assert.Equal(t, "stop", string(res.Choices[0].FinishReason))
			assert.Equal(t, thought, strings.TrimSpace(extra(m.JSON.ExtraFields, "reasoning_content")), m.RawJSON())
			assert.Equal(t, answer, strings.TrimSpace(m.Content), m.RawJSON())

			// Streamed: the deltas join into the same reasoning and content.
			stream := client.Chat.Completions.NewStreaming(ctx, params, grammar)
			var reasoning, content strings.Builder
			for stream.Next() {
				for _, c := range stream.Current().Choices {
					reasoning.WriteString(extra(c.Delta.JSON.ExtraFields, "reasoning_content"))
					content.WriteString(c.Delta.Content)
				}
			}
			require.NoError(t, stream.Err())
			assert.Equal(t, extra(m.JSON.ExtraFields, "reasoning_content"), reasoning.String())
			assert.Equal(t, m.Content, content.String())

			// reasoning_format none: all inline.
			res, err = client.Chat.Completions.New(ctx, params, grammar, option.WithJSONSet("reasoning_format", "none"))
			require.NoError(t, err)
			m = res.Choices[0].Message
			assert.Equal(t, tc.inline, m.Content)
			assert.NotContains(t, m.JSON.ExtraFields, "reasoning_content")

			// Thinking, then a call: the call after the reasoning is read.
			call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
			withTools := params
			withTools.Tools = testTools
			withTools.MaxTokens = openai.Int(300) // the demo spells the markup a character a token
			res, err = client.Chat.Completions.New(ctx, withTools, option.WithJSONSet("grammar",
				gbnfLiteral(strings.TrimSuffix(tc.written, answer)+call)))
			require.NoError(t, err)
			m = res.Choices[0].Message
			assert.Equal(t, "tool_calls", string(res.Choices[0].FinishReason), m.RawJSON())
			assert.Equal(t, thought, strings.TrimSpace(extra(m.JSON.ExtraFields, "reasoning_content")))
			require.Len(t, m.ToolCalls, 1, m.RawJSON())
			assert.Equal(t, "get_weather", m.ToolCalls[0].Function.Name)
			assert.JSONEq(t, `{"city": "Paris"}`, m.ToolCalls[0].Function.Arguments)
			assert.Empty(t, m.Content)

			// Cut by max_tokens while thinking: the reasoning so far, no
			// content.
			short := params
			short.MaxTokens = openai.Int(12)
			res, err = client.Chat.Completions.New(ctx, short, grammar)
			require.NoError(t, err)
			m = res.Choices[0].Message
			assert.Equal(t, "length", string(res.Choices[0].FinishReason))
			cut := extra(m.JSON.ExtraFields, "reasoning_content")
			assert.NotEmpty(t, cut, m.RawJSON())
			assert.True(t, strings.HasPrefix(thought, strings.TrimSpace(cut)), "%q", cut)
			assert.Empty(t, m.Content)

			if tc.name == "qwen3" {
				// enable_thinking false: the template closes the thinking
				// in the prompt, and the model answers.
				res, err = client.Chat.Completions.New(ctx, params, option.WithJSONSet("grammar", gbnfLiteral(answer)),
					option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
				require.NoError(t, err)
				m = res.Choices[0].Message
				assert.Equal(t, answer, m.Content)
				assert.NotContains(t, m.JSON.ExtraFields, "reasoning_content")
				_, err = client.Chat.Completions.New(ctx, params, option.WithJSONSet("chat_template_kwargs", map[string]any{"date": "today"}))
				var apiErr *openai.Error
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, "chat_template_kwargs", apiErr.Param)
			}

			// Responses: a reasoning item, then the message.
			rparams := responses.ResponseNewParams{Model: "demo", MaxOutputTokens: openai.Int(100),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather?")}}
			resp, err := client.Responses.New(ctx, rparams, grammar)
			require.NoError(t, err)
			require.Len(t, resp.Output, 2, resp.RawJSON())
			require.Equal(t, "reasoning", resp.Output[0].Type)
			r := resp.Output[0].AsReasoning()
			require.Len(t, r.Content, 1)
			assert.Equal(t, thought, strings.TrimSpace(r.Content[0].Text))
			assert.Equal(t, "message", resp.Output[1].Type)
			assert.Equal(t, answer, strings.TrimSpace(resp.OutputText()))

			// The output goes back as input: the reasoning item is taken
			// (and left out of the prompt).
			var output []any
			require.NoError(t, json.Unmarshal([]byte(resp.JSON.Output.Raw()), &output))
			next, err := client.Responses.New(ctx, rparams, grammar, option.WithJSONSet("input",
				append(append([]any{map[string]any{"role": "user", "content": "Weather?"}}, output...),
					map[string]any{"role": "user", "content": "And tomorrow?"})))
			require.NoError(t, err)
			assert.Equal(t, answer, strings.TrimSpace(next.OutputText()))

			rs := client.Responses.NewStreaming(ctx, rparams, grammar)
			var thinking, text strings.Builder
			var done responses.Response
			for rs.Next() {
				ev := rs.Current()
				switch ev.Type {
				case "response.reasoning_text.delta":
					thinking.WriteString(ev.Delta)
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				case "response.completed":
					done = ev.Response
				}
			}
			require.NoError(t, rs.Err())
			assert.Equal(t, r.Content[0].Text, thinking.String())
			assert.Equal(t, resp.OutputText(), text.String())
			require.Len(t, done.Output, 2)
			assert.Equal(t, r.Content[0].Text, done.Output[0].AsReasoning().Content[0].Text)
		})
	}
}
