package chat

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/jinja"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realTemplate reads a model's own chat template, vendored with its
// provenance for internal/jinja's tests.
func realTemplate(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "jinja", "testdata", "templates", name))
	require.NoError(t, err)
	return string(data)
}

// toolChat is a question, a call (with the reasoning before it), its
// result.
var toolChat = []Message{
	{Role: "system", Content: "You answer with the weather."},
	{Role: "user", Content: "Weather in Paris?"},
	{Role: "assistant", Reasoning: "A tool tells the weather.", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "c"}`}}},
	{Role: "tool", ToolCallID: "call_1", Content: "18 C"},
}

const weatherToolsJSON = `[{"type":"function","function":{"name":"get_weather","description":"The weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}}]`

func render(t *testing.T, tmpl *Template, msgs []Message, tools string, opt RenderOptions) string {
	t.Helper()
	var tb []byte
	if tools != "" {
		tb = []byte(tools)
	}
	out, err := tmpl.Render(context.Background(), TemplateMessages(msgs), tb, opt)
	require.NoError(t, err)
	return out
}

// The messages as templates read them: OpenAI's objects, keys in order,
// arguments as objects when they are JSON objects, a tool result named
// after its call.
func TestTemplateMessages(t *testing.T) {
	got := TemplateMessages(append(toolChat, Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c2", Name: "f", Arguments: "not json"}}}))
	assert.Equal(t, `[{"role":"system","content":"You answer with the weather."},`+
		`{"role":"user","content":"Weather in Paris?"},`+
		`{"role":"assistant","content":"","reasoning_content":"A tool tells the weather.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}}}]},`+
		`{"role":"tool","content":"18 C","tool_call_id":"call_1","name":"get_weather"},`+
		`{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"not json"}}]}]`, string(got))
}

// Polyfill describes the tools in the system message and writes calls
// and results as text, for templates that know neither.
func TestPolyfill(t *testing.T) {
	var tools []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(weatherToolsJSON), &tools))
	got := Polyfill(toolChat, tools, true, true)
	require.Len(t, got, 4)
	assert.Equal(t, "system", got[0].Role)
	assert.True(t, strings.HasPrefix(got[0].Content, "You answer with the weather.\n\nYou can call these functions:\n{\"type\":\"function\""), got[0].Content)
	assert.Contains(t, got[0].Content, `reply with only a JSON object {"name": <function name>, "arguments": <arguments object>}`)
	assert.Equal(t, Message{Role: "assistant", Reasoning: "A tool tells the weather.", Content: `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}`}, got[2])
	assert.Equal(t, Message{Role: "user", Content: "The result of call call_1:\n18 C"}, got[3])
	// Described only: the messages stay as they are.
	assert.Equal(t, toolChat[1:], Polyfill(toolChat, tools, true, false)[1:])
	assert.Equal(t, toolChat, Polyfill(toolChat, nil, true, false))
}

// The models' own templates render a tool conversation as transformers
// does, and tell their format.
func TestTemplatesRenderTools(t *testing.T) {
	for _, tc := range []struct {
		file, bos, eos string
		format         Format
		want           []string
	}{
		{"Llama-3.2-1B-Instruct-GGUF.jinja", "<|begin_of_text|>", "<|eot_id|>", Format{Family: Llama3}, []string{
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n",
			`<|start_header_id|>assistant<|end_header_id|>` + "\n\n" + `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}<|eot_id|>`,
			"<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C\"<|eot_id|>",
		}},
		{"Qwen3-8B-Q8_0.jinja", "", "<|im_end|>", Format{Family: Hermes, Reasoning: Think}, []string{
			`<tools>` + "\n" + `{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}` + "\n</tools>",
			// The reasoning of the turn in progress (after the last
			// question) is rendered.
			"<|im_start|>assistant\n<think>\nA tool tells the weather.\n</think>\n\n<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}` + "\n</tool_call><|im_end|>\n",
			"<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
		}},
		{"Qwen3.5-35B-A3B-Q8_0.jinja", "", "<|im_end|>", Format{Family: Hermes, Reasoning: Think}, []string{
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
		}},
		{"Ministral-3-14B-Instruct-2512-Q4_0.jinja", "<s>", "</s>", Format{Family: Mistral}, []string{
			`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "c"}</s>`,
			"[TOOL_RESULTS]18 C[/TOOL_RESULTS]",
		}},
	} {
		tmpl, err := NewTemplate(realTemplate(t, tc.file), tc.bos, tc.eos)
		require.NoError(t, err)
		assert.Equal(t, tc.format, tmpl.Format(), tc.file)
		assert.True(t, tmpl.TakesTools() && tmpl.TakesCalls(), tc.file)
		require.NoError(t, tmpl.Check(), tc.file)
		out := render(t, tmpl, toolChat, weatherToolsJSON, RenderOptions{AddGenerationPrompt: true})
		for _, w := range tc.want {
			assert.Contains(t, out, w, tc.file)
		}
		plain := render(t, tmpl, toolChat[:2], "", RenderOptions{AddGenerationPrompt: true})
		assert.NotContains(t, plain, "get_weather", tc.file)
	}
}

// RenderOptions.Thinking reaches the templates that think: Qwen 3's
// prompt closes an empty reasoning, and the reader then starts outside
// it; Qwen 3.5's opens it, and the reader starts inside.
func TestRenderThinking(t *testing.T) {
	no, yes := false, true
	q3, err := NewTemplate(realTemplate(t, "Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>")
	require.NoError(t, err)
	q35, err := NewTemplate(realTemplate(t, "Qwen3.5-35B-A3B-Q8_0.jinja"), "", "<|im_end|>")
	require.NoError(t, err)
	gemma, err := NewTemplate(realTemplate(t, "gemma-4-26B-A4B-it-UD-Q8_K_XL.jinja"), "<bos>", "<eos>")
	require.NoError(t, err)
	chat := toolChat[:2]
	for _, tc := range []struct {
		tmpl     *Template
		thinking *bool
		suffix   string
		opens    bool
	}{
		{q3, nil, "<|im_start|>assistant\n", false},
		{q3, &no, "<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
		{q35, nil, "<|im_start|>assistant\n<think>\n", true},
		{q35, &yes, "<|im_start|>assistant\n<think>\n", true},
		{q35, &no, "<|im_start|>assistant\n<think>\n\n</think>\n\n", false},
		{gemma, nil, "<|turn>model\n<|channel>thought\n<channel|>", false},
		{gemma, &yes, "<|turn>model\n", false},
	} {
		out := render(t, tc.tmpl, chat, "", RenderOptions{AddGenerationPrompt: true, Thinking: tc.thinking})
		assert.True(t, strings.HasSuffix(out, tc.suffix), "%q", out)
		assert.Equal(t, tc.opens, tc.tmpl.Format().OpensReasoning(out), "%q", out)
	}
}

// The demo model's ChatML template renders as llama.cpp's built-in chatml
// does; a template that renders no tools is of the JSON family (the
// polyfill's); a template's errors are the render's.
func TestTemplateChatMLAndErrors(t *testing.T) {
	tmpl, err := NewTemplate(testmodel.ChatMLTemplate, "<s>", "</s>")
	require.NoError(t, err)
	out := render(t, tmpl, []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}}, "", RenderOptions{AddGenerationPrompt: true})
	assert.Equal(t, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
	assert.Equal(t, Format{Family: JSON}, tmpl.Format())
	assert.False(t, tmpl.TakesTools())

	llama, err := NewTemplate(realTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja"), "<|begin_of_text|>", "<|eot_id|>")
	require.NoError(t, err)
	two := []Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []ToolCall{
		{ID: "a", Name: "get_weather", Arguments: `{"city":"A"}`}, {ID: "b", Name: "get_weather", Arguments: `{"city":"B"}`}}}}
	_, err = llama.Render(context.Background(), TemplateMessages(two), []byte(weatherToolsJSON), RenderOptions{AddGenerationPrompt: true})
	assert.ErrorContains(t, err, "only supports single tool-calls")

	_, err = NewTemplate("{% if %}", "", "")
	assert.Error(t, err)
	assert.True(t, IsJinja(testmodel.ChatMLTemplate))
	assert.False(t, IsJinja("chatml"))
}

// Values nested too deep for a template to recurse over are an error of
// the render.
func TestTemplateDepth(t *testing.T) {
	tmpl, err := NewTemplate(testmodel.ChatMLTemplate, "", "")
	require.NoError(t, err)
	deep := strings.Repeat(`{"type":"array","items":`, 100) + `{}` + strings.Repeat(`}`, 100)
	_, err = tmpl.Render(context.Background(), TemplateMessages([]Message{{Role: "user", Content: "x"}}),
		[]byte(`[{"type":"function","function":{"name":"f","parameters":`+deep+`}}]`), RenderOptions{})
	assert.ErrorContains(t, err, "nested deeper than 64 levels")
}

// Check runs under a checkShare of the step budget: a template that
// spends more than a tenth of a request's steps on one message is
// refused, naming the limit; globals reach the render.
func TestTemplateCheckShare(t *testing.T) {
	src := `{{ hello }}{% for m in messages %}{% for i in range(200) %}{{ m.content }}{% endfor %}{% endfor %}`
	tmpl, err := NewTemplateLimits(src, "", "", jinja.Limits{MaxSteps: 2000})
	require.NoError(t, err)
	tmpl.SetGlobals(map[string]jinja.Value{"hello": jinja.NewString(">")})
	out := render(t, tmpl, []Message{{Role: "user", Content: "a"}}, "", RenderOptions{})
	assert.Equal(t, ">"+strings.Repeat("a", 200), out, "a request's render has the whole budget")
	var le *jinja.LimitError
	require.ErrorAs(t, tmpl.Check(), &le)
	assert.Equal(t, "MaxSteps", le.Limit)
}
