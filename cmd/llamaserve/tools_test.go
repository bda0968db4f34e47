package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tools of the tests: the city's length is bounded, so that the demo
// model (a Markov chain of English, which rarely writes a quote) ends
// the string within max_tokens.
var (
	weatherParams = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "maxLength": 12},
			"unit": map[string]any{"type": "string", "enum": []string{"c", "f"}},
		},
		"required":             []string{"city"},
		"additionalProperties": false,
	}
	timeParams = map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"zone": map[string]any{"type": "integer", "minimum": -12, "maximum": 14}},
		"required":             []string{"zone"},
		"additionalProperties": false,
	}
	testTools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Description: openai.String("The weather of a city"), Parameters: weatherParams}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time",
			Description: openai.String("The time in a zone"), Parameters: timeParams}),
	}
)

// validArgs checks that arguments is a JSON document valid under schema.
func validArgs(t *testing.T, schema map[string]any, arguments string) {
	t.Helper()
	data, err := json.Marshal(schema)
	require.NoError(t, err)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(arguments))
	require.NoError(t, err, "arguments are not JSON: %s", arguments)
	assert.NoError(t, sch.Validate(inst), arguments)
}

func named(name string) openai.ChatCompletionToolChoiceOptionUnionParam {
	return openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: name})
}

func weatherQuestion() []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
}

// A named function is called every time, with arguments valid under its
// parameters; "required" calls one of the tools; the prompt is the model's
// Jinja template's.
func TestServeToolChoiceForced(t *testing.T) {
	s := startServer(t, "--ctx", "2048") // the tools' description takes 700 of the demo's tokens
	client := s.client()
	ctx := context.Background()
	assert.Contains(t, s.log(), "chat template: the model's, rendered as Jinja")
	for seed := range int64(6) {
		var httpResp *http.Response
		res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "demo", Messages: weatherQuestion(), Tools: testTools, ToolChoice: named("get_weather"),
			MaxTokens: openai.Int(200), Seed: openai.Int(seed),
		}, option.WithResponseInto(&httpResp))
		require.NoError(t, err)
		assert.Equal(t, "jinja", httpResp.Header.Get("X-Chat-Template"))
		require.Len(t, res.Choices, 1)
		c := res.Choices[0]
		require.Equal(t, "tool_calls", string(c.FinishReason), "seed %d: %+v", seed, c.Message)
		require.Len(t, c.Message.ToolCalls, 1)
		call := c.Message.ToolCalls[0]
		assert.Equal(t, "function", call.Type)
		assert.Regexp(t, `^call_`, call.ID)
		assert.Equal(t, "get_weather", call.Function.Name)
		validArgs(t, weatherParams, call.Function.Arguments)
		assert.Empty(t, c.Message.Content)
	}

	res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: weatherQuestion(), Tools: testTools,
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		MaxTokens:  openai.Int(200), Seed: openai.Int(11), N: openai.Int(4),
	})
	require.NoError(t, err)
	require.Len(t, res.Choices, 4)
	for _, c := range res.Choices {
		require.Equal(t, "tool_calls", string(c.FinishReason), "%+v", c.Message)
		require.Len(t, c.Message.ToolCalls, 1)
		call := c.Message.ToolCalls[0]
		switch call.Function.Name {
		case "get_weather":
			validArgs(t, weatherParams, call.Function.Arguments)
		case "get_time":
			validArgs(t, timeParams, call.Function.Arguments)
		default:
			t.Errorf("call of %q", call.Function.Name)
		}
	}
}

// auto lets the model answer in text (the demo model writes English, not
// calls); none is the request without tools.
func TestServeToolChoiceAutoAndNone(t *testing.T) {
	s := startServer(t, "--ctx", "2048") // the tools' description takes 700 of the demo's tokens
	client := s.client()
	ctx := context.Background()
	base := openai.ChatCompletionNewParams{Model: "demo", Messages: weatherQuestion(), MaxTokens: openai.Int(20), Temperature: openai.Float(0)}
	plain, err := client.Chat.Completions.New(ctx, base)
	require.NoError(t, err)

	none := base
	none.Tools = testTools
	none.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	res, err := client.Chat.Completions.New(ctx, none)
	require.NoError(t, err)
	assert.Equal(t, plain.Choices[0].Message.Content, res.Choices[0].Message.Content)
	assert.Empty(t, res.Choices[0].Message.ToolCalls)

	auto := base
	auto.Tools = testTools
	res, err = client.Chat.Completions.New(ctx, auto)
	require.NoError(t, err)
	c := res.Choices[0]
	assert.Empty(t, c.Message.ToolCalls)
	assert.NotEmpty(t, c.Message.Content)
	assert.Equal(t, "length", string(c.FinishReason))
	assert.Greater(t, res.Usage.PromptTokens, plain.Usage.PromptTokens, "the tools are in the prompt")

	// Streamed, auto's text is the same.
	stream := client.Chat.Completions.NewStreaming(ctx, auto)
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
			assert.Empty(t, ch.Delta.ToolCalls)
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, c.Message.Content, text.String())
}

// A streamed call comes as OpenAI streams it: the SDK's accumulator puts
// together the call the same request gets whole.
func TestServeToolCallStreamed(t *testing.T) {
	s := startServer(t, "--ctx", "2048") // the tools' description takes 700 of the demo's tokens
	client := s.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "demo", Messages: weatherQuestion(), Tools: testTools, ToolChoice: named("get_time"),
		MaxTokens: openai.Int(200), Seed: openai.Int(3),
	}
	whole, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, whole.Choices[0].Message.ToolCalls, 1)

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var finished []openai.FinishedChatCompletionToolCall
	deltas := 0
	for stream.Next() {
		chunk := stream.Current()
		require.True(t, acc.AddChunk(chunk))
		for _, c := range chunk.Choices {
			if len(c.Delta.ToolCalls) > 0 {
				deltas++
			}
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices, 1)
	got := acc.Choices[0]
	assert.Equal(t, "tool_calls", string(got.FinishReason))
	require.Len(t, got.Message.ToolCalls, 1)
	want := whole.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, want.Function.Name, got.Message.ToolCalls[0].Function.Name)
	assert.Equal(t, want.Function.Arguments, got.Message.ToolCalls[0].Function.Arguments)
	validArgs(t, timeParams, got.Message.ToolCalls[0].Function.Arguments)
	assert.Greater(t, deltas, 1, "the arguments come in deltas after the name")
	require.Len(t, finished, 1)
	assert.Equal(t, want.Function.Arguments, finished[0].Arguments)
}

// A second turn carries the assistant's call and the tool's result: the
// template renders them and the model answers.
func TestServeToolResultTurn(t *testing.T) {
	s := startServer(t, "--ctx", "2048") // the tools' description takes 700 of the demo's tokens
	client := s.client()
	ctx := context.Background()
	msgs := weatherQuestion()
	first, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: msgs, Tools: testTools, ToolChoice: named("get_weather"), MaxTokens: openai.Int(200), Seed: openai.Int(1),
	})
	require.NoError(t, err)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1)
	call := first.Choices[0].Message.ToolCalls[0]
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.ToolMessage("18 C and sunny", call.ID))
	var httpResp *http.Response
	second, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "demo", Messages: msgs, Tools: testTools, MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	}, option.WithResponseInto(&httpResp))
	require.NoError(t, err)
	assert.Equal(t, "jinja", httpResp.Header.Get("X-Chat-Template"))
	assert.NotEmpty(t, second.Choices[0].Message.Content)
	assert.Greater(t, second.Usage.PromptTokens, first.Usage.PromptTokens+5, "the call and its result are in the prompt")
}

// familyModel writes the demo model with another chat template ("" for
// none).
func familyModel(t *testing.T, name, template string) string {
	t.Helper()
	d, err := testmodel.NewDemo()
	require.NoError(t, err)
	d.Spec.Vocab.ChatTemplate = template
	path := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, d.Write(path))
	return path
}

// jinjaTemplate reads a model's own chat template from the real templates
// vendored with their provenance for internal/jinja's tests.
func jinjaTemplate(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "jinja", "testdata", "templates", name))
	require.NoError(t, err)
	return string(data)
}

// Models whose templates are those of the tool-calling families: the
// server renders each with the tools, forces the call in the family's
// format, reads it back, and renders the call and its result in the next
// turn; a model without a template (or whose template fails) gets
// llama.cpp's built-in one, and says so.
func TestServeToolFamilies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, template, family, header string
	}{
		{"qwen3", jinjaTemplate(t, "Qwen3-8B-Q8_0.jinja"), "hermes", "jinja"},
		{"llama3.2", jinjaTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja"), "llama3", "jinja"},
		{"ministral3", jinjaTemplate(t, "Ministral-3-14B-Instruct-2512-Q4_0.jinja"), "mistral", "jinja"},
		{"none", "", "", "builtin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, "-m", familyModel(t, tc.name, tc.template), "--ctx", "4096", "--parallel", "1")
			if tc.family != "" {
				assert.Contains(t, s.log(), "tool calls read as "+tc.family)
			} else {
				assert.Contains(t, s.log(), `chat template: llama.cpp's built-in "chatml" (the model has no tokenizer.chat_template)`)
			}
			client := s.client()
			msgs := weatherQuestion()
			var httpResp *http.Response
			res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "demo", Messages: msgs, Tools: testTools, ToolChoice: named("get_weather"),
				MaxTokens: openai.Int(200), Seed: openai.Int(4),
			}, option.WithResponseInto(&httpResp))
			require.NoError(t, err, "%v", err)
			assert.Equal(t, tc.header, httpResp.Header.Get("X-Chat-Template"))
			c := res.Choices[0]
			require.Equal(t, "tool_calls", string(c.FinishReason), "%+v", c.Message)
			require.Len(t, c.Message.ToolCalls, 1)
			validArgs(t, weatherParams, c.Message.ToolCalls[0].Function.Arguments)

			// Streamed, in the family's format, the call comes in deltas
			// that make the same arguments.
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "demo", Messages: msgs, Tools: testTools, ToolChoice: named("get_weather"),
				MaxTokens: openai.Int(200), Seed: openai.Int(4),
			})
			var acc openai.ChatCompletionAccumulator
			deltas := 0
			for stream.Next() {
				acc.AddChunk(stream.Current())
				for _, ch := range stream.Current().Choices {
					if len(ch.Delta.ToolCalls) > 0 {
						deltas++
					}
				}
			}
			require.NoError(t, stream.Err())
			require.Len(t, acc.Choices, 1)
			require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
			assert.Equal(t, c.Message.ToolCalls[0].Function.Arguments, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
			assert.Greater(t, deltas, 3)

			msgs = append(msgs, c.Message.ToParam(), openai.ToolMessage("18 C", c.Message.ToolCalls[0].ID))
			res2, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "demo", Messages: msgs, Tools: testTools, MaxTokens: openai.Int(8), Temperature: openai.Float(0),
			}, option.WithResponseInto(&httpResp))
			require.NoError(t, err)
			assert.Equal(t, tc.header, httpResp.Header.Get("X-Chat-Template"))
			assert.Greater(t, res2.Usage.PromptTokens, res.Usage.PromptTokens)
		})
	}

	// Llama 3.2's template refuses two calls in one message
	// (raise_exception): that request falls back to llama.cpp's built-in
	// template and says so.
	s := startServer(t, "-m", familyModel(t, "llama-two", jinjaTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja")), "--ctx", "4096", "--parallel", "1")
	client := s.client()
	body := `{"model":"demo","max_tokens":4,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"},
		{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"}]}`
	var httpResp *http.Response
	var out map[string]any
	err := client.Post(ctx, "chat/completions", json.RawMessage(body), &out, option.WithResponseInto(&httpResp))
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		t.Log(apiErr.RawJSON())
	}
	require.NoError(t, err)
	assert.Equal(t, "builtin", httpResp.Header.Get("X-Chat-Template"))
	assert.Contains(t, s.log(), "only supports single tool-calls")
}

// With tool_choice auto, a reply that is a call is read as one: here
// response_format makes the demo model write a call in the plain JSON form
// (which it would not write by itself), streamed and not.
func TestServeToolChoiceAutoReadsCalls(t *testing.T) {
	s := startServer(t, "--ctx", "2048")
	client := s.client()
	ctx := context.Background()
	callSchema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":      map[string]any{"const": "get_time"},
			"arguments": timeParams,
		},
		"required":             []string{"name", "arguments"},
		"additionalProperties": false,
	}
	params := openai.ChatCompletionNewParams{
		Model: "demo", Messages: weatherQuestion(), Tools: testTools, MaxTokens: openai.Int(200), Seed: openai.Int(7),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "call", Schema: callSchema},
		}},
	}
	res, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	c := res.Choices[0]
	require.Equal(t, "tool_calls", string(c.FinishReason), "%+v", c.Message)
	require.Len(t, c.Message.ToolCalls, 1)
	assert.Equal(t, "get_time", c.Message.ToolCalls[0].Function.Name)
	validArgs(t, timeParams, c.Message.ToolCalls[0].Function.Arguments)

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices, 1)
	assert.Equal(t, "tool_calls", string(acc.Choices[0].FinishReason))
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, c.Message.ToolCalls[0].Function.Arguments, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
	assert.Empty(t, acc.Choices[0].Message.Content)
}
