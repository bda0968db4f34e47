package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/jinja"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realTemplates is the folder of the real chat templates vendored with
// their provenance for internal/jinja's tests.
const realTemplates = "../jinja/testdata/templates"

// realTemplate reads a model's own chat template from realTemplates.
func realTemplate(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(realTemplates, name))
	require.NoError(t, err)
	return string(data)
}

// hermesTemplate is a template in the Hermes 2 Pro / Hermes 3 tool-use
// style (written here after its format): tools in <tools>, calls in
// <tool_call>, results in <tool_response> under the tool role.
const hermesTemplate = `{{- bos_token }}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content + '\n' }}{% endif %}{% if tools %}You are a function calling AI model. Functions: <tools> {% for tool in tools %}{{ tool | tojson }}{% endfor %} </tools>
For each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags.{% endif %}<|im_end|>
{% for message in messages %}{% if message.role == 'system' %}{% elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant
{% for tc in message.tool_calls %}<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>tool
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// The conversation every template renders: a question, a call, its
// result.
var toolChat = []chatMessage{
	{Role: "system", Content: "You answer with the weather."},
	{Role: "user", Content: "Weather in Paris?"},
	{Role: "assistant", ToolCalls: []chat.ToolCall{call("call_1", "get_weather", `{"city": "Paris", "unit": "c"}`)}},
	{Role: "tool", ToolCallID: "call_1", Content: "18 C"},
}

func call(id, name, args string) chat.ToolCall {
	return chat.ToolCall{ID: id, Name: name, Arguments: args}
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"The weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}}]`

func renderChat(t *testing.T, src, bos, eos string, msgs []chatMessage, tools string) (string, *ChatTemplate) {
	t.Helper()
	tmpl, err := NewChatTemplate(src, bos, eos)
	require.NoError(t, err)
	var tb []byte
	if tools != "" {
		tb = []byte(tools)
	}
	out, err := tmpl.render(context.Background(), templateMessages(msgs), tb, true)
	require.NoError(t, err)
	return out, tmpl
}

// The models' own templates render a tool conversation as transformers
// does: the tools (keys in their order, as json.dumps writes them), the
// assistant's call in the model's format and the tool's result.
func TestChatTemplatesRenderTools(t *testing.T) {
	for _, tc := range []struct {
		name, src, bos, eos string
		family              chat.Family
		want                []string
	}{
		{"Llama 3.2", realTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja"), "<|begin_of_text|>", "<|eot_id|>", chat.Llama3, []string{
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n",
			`Given the following functions, please respond with a JSON for a function call`,
			`"name": "get_weather"`,
			"Weather in Paris?<|eot_id|>",
			`<|start_header_id|>assistant<|end_header_id|>` + "\n\n" + `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}<|eot_id|>`,
			// A string is iterable in Jinja: the template writes the result
			// with tojson, as transformers renders it.
			"<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C\"<|eot_id|>",
		}},
		{"Qwen 3", realTemplate(t, "Qwen3-8B-Q8_0.jinja"), "", "<|im_end|>", chat.Hermes, []string{
			"<|im_start|>system\nYou answer with the weather.\n\n# Tools\n",
			`<tools>` + "\n" + `{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}` + "\n</tools>",
			"<|im_start|>assistant\n<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}` + "\n</tool_call><|im_end|>\n",
			"<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
		}},
		{"Qwen 3.5", realTemplate(t, "Qwen3.5-35B-A3B-Q8_0.jinja"), "", "<|im_end|>", chat.Hermes, []string{
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
			"<tool_response>\n18 C\n</tool_response>",
		}},
		{"Ministral 3", realTemplate(t, "Ministral-3-14B-Instruct-2512-Q4_0.jinja"), "<s>", "</s>", chat.Mistral, []string{
			"<s>[SYSTEM_PROMPT]You answer with the weather.[/SYSTEM_PROMPT]",
			`[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather"`,
			`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "c"}</s>`,
			"[TOOL_RESULTS]18 C[/TOOL_RESULTS]",
		}},
		{"Hermes", hermesTemplate, "<|begin_of_text|>", "<|im_end|>", chat.Hermes, []string{
			"<|begin_of_text|><|im_start|>system\nYou answer with the weather.\nYou are a function calling AI model. Functions: <tools> {\"type\": \"function\"",
			"<|im_start|>assistant\n<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}` + "\n</tool_call><|im_end|>\n",
			"<|im_start|>tool\n<tool_response>\n18 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, tmpl := renderChat(t, tc.src, tc.bos, tc.eos, toolChat, weatherTools)
			assert.Equal(t, tc.family, tmpl.format().Family)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			// Without tools the same templates render a plain chat.
			plain, _ := renderChat(t, tc.src, tc.bos, tc.eos, toolChat[:2], "")
			assert.NotContains(t, plain, "get_weather")
			assert.Contains(t, plain, "Weather in Paris?")
		})
	}
}

// The demo model's ChatML template renders as llama.cpp's built-in chatml
// does; raise_exception in a template is an error of the render.
func TestChatTemplateChatMLAndErrors(t *testing.T) {
	out, tmpl := renderChat(t, testmodel.ChatMLTemplate, "<s>", "</s>",
		[]chatMessage{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}}, "")
	assert.Equal(t, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
	assert.Equal(t, chat.JSON, tmpl.format().Family)

	llama, err := NewChatTemplate(realTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja"), "<|begin_of_text|>", "<|eot_id|>")
	require.NoError(t, err)
	two := []chatMessage{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []chat.ToolCall{
		call("a", "get_weather", `{"city":"A"}`), call("b", "get_weather", `{"city":"B"}`)}}}
	_, err = llama.render(context.Background(), templateMessages(two), []byte(weatherTools), true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only supports single tool-calls")

	_, err = NewChatTemplate("{% if %}", "", "")
	assert.Error(t, err)
	assert.True(t, IsJinja(testmodel.ChatMLTemplate))
	assert.False(t, IsJinja("chatml"))
}

// The constructs of Hermes 3's tool-use template render as in Jinja2: a
// recursive macro over a JSON Schema, |items, loop.previtem and
// loop.nextitem, "is iterable" on a list of types.
func TestChatTemplateHermesConstructs(t *testing.T) {
	const src = `{%- macro py(s) %}{%- set m = {"string": "str", "integer": "int"} %}` +
		`{%- if m[s.type] is defined %}{{- m[s.type] }}{%- elif s.type == "array" %}{{- "list[" + py(s.items) + "]" }}` +
		`{%- elif s.type == "object" %}dict{%- elif s.type is iterable %}{{- "Union[" }}{%- for t in s.type %}{{- py({"type": t}) }}{%- if not loop.last %},{% endif %}{%- endfor %}]` +
		`{%- else %}Any{%- endif %}{%- endmacro %}` +
		`{%- for tool in tools %}{%- set tool = tool.function %}{{ tool.name }}(` +
		`{%- for k, v in tool.parameters.properties|items %}{{ k + ": " + py(v) }}{% if not loop.last %}{{ ", " }}{% endif %}{%- endfor %}){{ "\n" }}{% endfor %}` +
		`{%- for m in messages %}{%- if m.role == "tool" %}{%- if loop.previtem and loop.previtem.role != "tool" %}<tool>{% endif %}` +
		`[{{ m.content }}]{%- if loop.nextitem is not defined or loop.nextitem.role != "tool" %}</tool>{% endif %}{%- endif %}{%- endfor %}`
	tools := `[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},"b":{"type":["string","integer"]},"c":{"type":"object"}}}}}]`
	msgs := []chatMessage{{Role: "user", Content: "x"}, {Role: "tool", ToolCallID: "1", Content: "r1"}, {Role: "tool", ToolCallID: "2", Content: "r2"}, {Role: "user", Content: "y"}}
	out, _ := renderChat(t, src, "", "", msgs, tools)
	assert.Equal(t, "f(a: list[int], b: Union[str,int], c: dict)\n<tool>[r1][r2]</tool>", out)
}

// Values nested too deep for a template to recurse over are an error of
// the render (the request falls back to the built-in template).
func TestChatTemplateDepth(t *testing.T) {
	tmpl, err := NewChatTemplate(testmodel.ChatMLTemplate, "", "")
	require.NoError(t, err)
	deep := strings.Repeat(`{"type":"array","items":`, 100) + `{}` + strings.Repeat(`}`, 100)
	_, err = tmpl.render(context.Background(), templateMessages([]chatMessage{{Role: "user", Content: "x"}}), []byte(`[{"type":"function","function":{"name":"f","parameters":`+deep+`}}]`), true)
	assert.ErrorContains(t, err, "nested deeper than 64 levels")
}

// Whitespace control and trim_blocks act on the text next to their tag
// only, as in Jinja2 (and @huggingface/jinja): the ", " between two
// expressions keeps its space (the engine replaced here lost it).
func TestChatTemplateWhitespaceControl(t *testing.T) {
	tmpl, err := NewChatTemplate(`{%- for x in messages %}{{ x.content }}{% if not loop.last %}, {% endif %}{%- endfor %}
{% if true %}{{ "X" }}
{% endif %}`, "", "")
	require.NoError(t, err)
	out, err := tmpl.render(context.Background(), templateMessages([]chatMessage{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}, {Role: "user", Content: "c"}}), nil, false)
	require.NoError(t, err)
	assert.Equal(t, "a, b, cX\n", out)
}

// Check runs under a checkShare of the step budget: a template that a
// request may render within its steps, but that spends more than a tenth
// of them on one message, is refused at start-up, naming the limit.
func TestChatTemplateCheckShare(t *testing.T) {
	src := `{% for m in messages %}{% for i in range(200) %}{{ m.content }}{% endfor %}{% endfor %}`
	ct, err := NewChatTemplateLimits(src, "", "", jinja.Limits{MaxSteps: 2000})
	require.NoError(t, err)
	out, err := ct.render(context.Background(), []byte(`[{"role":"user","content":"a"}]`), nil, true)
	require.NoError(t, err, "a request's render has the whole budget")
	assert.Equal(t, strings.Repeat("a", 200), out)
	var le *jinja.LimitError
	require.ErrorAs(t, ct.Check(), &le)
	assert.Equal(t, "MaxSteps", le.Limit)
	assert.Equal(t, int64(200), le.Value)
}
