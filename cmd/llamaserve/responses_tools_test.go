package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tool calls on the Responses API through the SDK: a forced call comes back
// as a function_call item with valid arguments, whole and streamed (its
// arguments' deltas add up to them), and a turn with the call and its
// output in the input gives the chat endpoint's reply to the same history.
func TestServeResponsesTools(t *testing.T) {
	s := startServer(t, "--ctx", "2048")
	client := s.client()
	ctx := context.Background()
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherParams, true),
		responses.ToolParamOfFunction("get_time", timeParams, true)}
	tools[0].OfFunction.Description = openai.String("The weather of a city") // as testTools
	tools[1].OfFunction.Description = openai.String("The time in a zone")
	params := responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Paris?")},
		Tools: tools, ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
		MaxOutputTokens: openai.Int(80), Temperature: openai.Float(0.7),
	}
	for seed := range 3 {
		res, err := client.Responses.New(ctx, params, option.WithJSONSet("seed", seed))
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			t.Fatalf("%s", apiErr.RawJSON())
		}
		require.NoError(t, err)
		assert.Equal(t, responses.ResponseStatusCompleted, res.Status)
		var calls []responses.ResponseFunctionToolCall
		for _, item := range res.Output {
			if item.Type == "function_call" {
				calls = append(calls, item.AsFunctionCall())
			}
		}
		require.Len(t, calls, 1, "%+v", res.Output)
		assert.Equal(t, "get_weather", calls[0].Name)
		assert.True(t, strings.HasPrefix(calls[0].CallID, "call_"), calls[0].CallID)
		validArgs(t, weatherParams, calls[0].Arguments)
		assert.Empty(t, res.OutputText())
	}

	stream := client.Responses.NewStreaming(ctx, params, option.WithJSONSet("seed", 1))
	var types []string
	var args strings.Builder
	var done, final string
	for stream.Next() {
		ev := stream.Current()
		assert.Equal(t, int64(len(types)), ev.SequenceNumber)
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(ev.AsResponseFunctionCallArgumentsDelta().Delta)
		case "response.function_call_arguments.done":
			done = ev.AsResponseFunctionCallArgumentsDone().Arguments
		case "response.completed":
			out := ev.AsResponseCompleted().Response.Output
			require.NotEmpty(t, out)
			final = out[len(out)-1].AsFunctionCall().Arguments
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "response.created", types[0])
	assert.Contains(t, types, "response.output_item.added")
	assert.Contains(t, types, "response.function_call_arguments.delta")
	assert.Equal(t, []string{"response.function_call_arguments.done", "response.output_item.done", "response.completed"}, types[len(types)-3:])
	validArgs(t, weatherParams, done)
	assert.Equal(t, done, args.String())
	assert.Equal(t, done, final)
	whole, err := client.Responses.New(ctx, params, option.WithJSONSet("seed", 1))
	require.NoError(t, err)
	assert.Equal(t, done, whole.Output[len(whole.Output)-1].AsFunctionCall().Arguments, "streamed as whole")

	// The next turn: the call and its output in the input, as the chat's
	// assistant tool_calls and tool message.
	args1 := `{"city":"Paris"}`
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", Tools: tools,
		MaxOutputTokens: openai.Int(10), Temperature: openai.Float(0)},
		option.WithJSONSet("input", []any{
			map[string]any{"role": "user", "content": "What is the weather in Paris?"},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": args1},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
		}))
	require.NoError(t, err)
	strictTools := []openai.ChatCompletionToolUnionParam{ // the same tools in the chat's shape
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Description: openai.String("The weather of a city"), Parameters: weatherParams, Strict: openai.Bool(true)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time",
			Description: openai.String("The time in a zone"), Parameters: timeParams, Strict: openai.Bool(true)}),
	}
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "demo", Tools: strictTools,
		MaxTokens: openai.Int(10), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("What is the weather in Paris?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
				{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: args1}}}}}},
			openai.ToolMessage("sunny, 21 C", "call_1"),
		}})
	require.NoError(t, err)
	assert.Equal(t, chat.Choices[0].Message.Content, res.OutputText())
	assert.Equal(t, chat.Usage.PromptTokens, res.Usage.InputTokens)
}
