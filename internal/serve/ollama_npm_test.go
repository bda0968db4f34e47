package serve

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ollamaJSDir holds the ollama npm package's test script.
const ollamaJSDir = "testdata/clients/ollama"

// Ollama's JavaScript client (the ollama npm package, the version in
// testdata/clients/ollama/package-lock.json) against the demo model: its
// replies say what the same requests say through the OpenAI endpoints.
// Needs node and `npm ci --prefix internal/serve/testdata/clients/ollama`.
func TestOllamaJSClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the test needs node and `npm ci --prefix internal/serve/testdata/clients/ollama`")
	}
	if _, err := os.Stat(ollamaJSDir + "/node_modules/ollama/package.json"); err != nil {
		t.Skip("the ollama npm package is not installed: run `npm ci --prefix internal/serve/testdata/clients/ollama`")
	}
	_, base, srv := ollamaClient(t, "sesame")
	thinker := thinkingHarness(t)
	cmd := exec.CommandContext(t.Context(), "node", "client.mjs", base, "sesame", thinker.ts.URL)
	cmd.Dir = ollamaJSDir
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &got))
	as := func(name string, v any) {
		t.Helper()
		require.Contains(t, got, name)
		require.NoError(t, json.Unmarshal(got[name], v), "%s: %s", name, got[name])
	}

	var version api.ListResponse
	var v struct{ Version string }
	as("version", &v)
	assert.Equal(t, ollamaAPIVersion, v.Version)
	as("list", &version)
	require.Len(t, version.Models, 1)
	assert.Equal(t, "demo:latest", version.Models[0].Name)
	var ps api.ProcessResponse
	as("ps", &ps)
	require.Len(t, ps.Models, 1)
	assert.Equal(t, 256, ps.Models[0].ContextLength)
	var show api.ShowResponse
	as("show", &show)
	assert.Equal(t, []model.Capability{"completion", "tools", "embedding"}, show.Capabilities)

	var want openAIChat
	openAI(t, base+"/v1/chat/completions", "sesame", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"temperature":0,"max_tokens":6}`, &want)
	var chat api.ChatResponse
	as("chat", &chat)
	assert.True(t, chat.Done)
	assert.Equal(t, "length", chat.DoneReason)
	assert.Equal(t, want.Choices[0].Message.Content, chat.Message.Content)
	assert.Equal(t, want.Usage.PromptTokens, chat.PromptEvalCount)
	assert.Equal(t, 6, chat.EvalCount)
	var parts []api.ChatResponse
	as("chat_stream", &parts)
	require.Greater(t, len(parts), 2)
	var text strings.Builder
	for _, p := range parts {
		text.WriteString(p.Message.Content)
	}
	assert.Equal(t, want.Choices[0].Message.Content, text.String())
	assert.True(t, parts[len(parts)-1].Done)

	var gen openAIChat
	openAI(t, base+"/v1/chat/completions", "sesame", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Once upon"}],"temperature":0,"max_tokens":5}`, &gen)
	var genParts []api.GenerateResponse
	as("generate_stream", &genParts)
	text.Reset()
	for _, p := range genParts {
		text.WriteString(p.Response)
	}
	assert.Equal(t, gen.Choices[0].Message.Content, text.String())
	var raw openAIChat
	openAI(t, base+"/v1/completions", "sesame", `{"prompt":"Once upon","temperature":0,"max_tokens":5}`, &raw)
	var genRaw api.GenerateResponse
	as("generate_raw", &genRaw)
	assert.Equal(t, raw.Choices[0].Text, genRaw.Response)

	var emb api.EmbedResponse
	as("embed", &emb)
	checkEmbeddings(t, srv, []string{"Hello world", "a"}, &emb)

	var format api.ChatResponse
	as("format_schema", &format)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(format.Message.Content), &obj), format.Message.Content)
	assert.IsType(t, "", obj["city"])
	assert.IsType(t, float64(0), obj["n"])

	var call api.ChatResponse
	as("tool_call", &call)
	var streamed []api.ChatResponse
	as("tool_call_stream", &streamed)
	var streamedCalls []api.ToolCall
	for _, p := range streamed {
		streamedCalls = append(streamedCalls, p.Message.ToolCalls...)
	}
	for _, calls := range [][]api.ToolCall{call.Message.ToolCalls, streamedCalls} {
		require.Len(t, calls, 1)
		assert.Equal(t, "w", calls[0].Function.Name)
		assert.Equal(t, `{"c":"P"}`, calls[0].Function.Arguments.String())
	}
	var result api.ChatResponse
	as("tool_result", &result)
	var round openAIChat
	openAI(t, base+"/v1/chat/completions", "sesame", `{"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":"","tool_calls":[{"id":"x","type":"function","function":{"name":"w","arguments":"{\"c\":\"P\"}"}}]},
		{"role":"tool","tool_call_id":"x","content":"{\"t\": 21}"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"c":{"type":"string"}}}}}],"temperature":0,"max_tokens":3}`, &round)
	assert.Equal(t, round.Usage.PromptTokens, result.PromptEvalCount)

	var think api.ChatResponse
	as("think", &think)
	assert.Equal(t, thinkingText, think.Message.Thinking)
	assert.Equal(t, thinkingAnswer, think.Message.Content)
	var thinkParts []api.ChatResponse
	as("think_stream", &thinkParts)
	var thoughts strings.Builder
	text.Reset()
	for _, p := range thinkParts {
		thoughts.WriteString(p.Message.Thinking)
		text.WriteString(p.Message.Content)
	}
	assert.Equal(t, thinkingText, thoughts.String())
	assert.Equal(t, thinkingAnswer, text.String())

	type failure struct {
		Error      string `json:"error"`
		StatusCode int    `json:"status_code"`
	}
	for name, want := range map[string]failure{
		"error_model":  {"model 'other' not found", 404},
		"error_think":  {`"demo" does not support thinking`, 400},
		"error_images": {"messages[0].images[0]: an image part: this model reads text only (llamaserve serves images and audio with a projector, --mmproj)", 400},
		"error_stream": {"top_k (=-3) has to be a non-negative integer", 400},
		"no_key":       {"You didn't provide an API key", 401},
	} {
		var f failure
		as(name, &f)
		assert.Equal(t, want.StatusCode, f.StatusCode, name)
		assert.Contains(t, f.Error, want.Error, name)
	}
}
