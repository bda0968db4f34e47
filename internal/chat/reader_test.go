package chat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// callText writes calls as "name args" (and " partial").
func callText(calls []Call) []string {
	var out []string
	for _, c := range calls {
		s := c.Name + " " + string(c.Arguments)
		if c.Partial {
			s += " partial"
		}
		out = append(out, s)
	}
	return out
}

type readCase struct {
	name   string
	family Family
	text   string
	// want
	content, reasoning string
	calls              []string
}

func checkCases(t *testing.T, opt Options, cases []readCase) {
	t.Helper()
	for _, tc := range cases {
		o := opt
		o.Format.Family = tc.family
		whole := read(t, o, true, tc.text)
		assert.Equal(t, tc.content, whole.Content, "%s: content of %q", tc.name, tc.text)
		assert.Equal(t, tc.reasoning, whole.Reasoning, "%s: reasoning of %q", tc.name, tc.text)
		assert.Equal(t, tc.calls, callText(whole.Calls), "%s: calls of %q", tc.name, tc.text)
		streamed := read(t, o, true, bytewise(tc.text)...)
		assert.Equal(t, whole, streamed, "%s: streamed byte by byte", tc.name)
	}
}

// The families' formats are read as calls; text that is not a call, or
// calls a function that is not among the tools, stays content.
func TestReadCalls(t *testing.T) {
	checkCases(t, Options{Tools: weatherTools}, []readCase{
		// Hermes, Qwen 2.5 and 3.
		{"hermes", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", "", []string{`get_weather {"city": "Paris"}`}},
		{"hermes two", Hermes, "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
			"Let me look.", "", []string{`get_weather {"city": "Paris"}`, `get_time {}`}},
		{"hermes string args", Hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}", "", "", []string{`get_weather {"city": "Rome"}`}},
		{"hermes args first", Hermes, "<tool_call>{\"arguments\": {\"city\": \"Rome\"}, \"name\": \"get_weather\"}</tool_call>", "", "", []string{`get_weather {"city": "Rome"}`}},
		{"hermes no args", Hermes, "Checking. <tool_call>{\"name\": \"get_time\"}</tool_call>", "Checking.", "", []string{`get_time {}`}},
		{"hermes then text", Hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>\n\nDone.", "Done.", "", []string{`get_time {}`}},
		// Qwen 3 Coder, 3.5 and 3.6: XML inside <tool_call>.
		{"xml", Hermes, "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
			"", "", []string{`get_weather {"city":"New York","unit":"c"}`}},
		{"xml typed", Hermes, "<tool_call>\n<function=get_time>\n<parameter=zone>\n-3\n</parameter>\n</function>\n</tool_call>", "", "", []string{`get_time {"zone":-3}`}},
		{"xml none", Hermes, "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", "", "", []string{`get_time {}`}},
		// GLM 4.5 and later.
		{"glm", Hermes, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>New York</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>c</arg_value>\n</tool_call>",
			"", "", []string{`get_weather {"city":"New York","unit":"c"}`}},
		{"glm typed", Hermes, "Checking.<tool_call>get_time<arg_key>zone</arg_key><arg_value>-3</arg_value></tool_call>", "Checking.", "", []string{`get_time {"zone":-3}`}},
		{"glm none", Hermes, "<tool_call>get_time</tool_call>", "", "", []string{`get_time {}`}},
		{"glm unknown", Hermes, "<tool_call>rm_rf<arg_key>a</arg_key><arg_value>b</arg_value></tool_call>", "<tool_call>rm_rf<arg_key>a</arg_key><arg_value>b</arg_value></tool_call>", "", nil},
		{"glm broken", Hermes, "<tool_call>get_time<arg_key>zone</arg_key>2</tool_call>", "2</tool_call>", "", []string{`get_time  partial`}},
		{"xml unknown", Hermes, "<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>", "<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>", "", nil},
		// Llama 3.x.
		{"python tag", Llama3, `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}`, "", "", []string{`get_weather {"city": "Oslo"}`}},
		{"llama two", Llama3, `{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "parameters": {}}`, "", "", []string{`get_weather {"city": "Oslo"}`, `get_time {}`}},
		// Mistral, both forms.
		{"mistral array", Mistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima"}}]`, "", "", []string{`get_weather {"city": "Lima"}`}},
		{"mistral args", Mistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Lima"}[TOOL_CALLS]get_time[ARGS]{}`, "", "", []string{`get_weather {"city": "Lima"}`, `get_time {}`}},
		{"mistral unknown", Mistral, `[TOOL_CALLS]rm[ARGS]{}`, `[TOOL_CALLS]rm[ARGS]{}`, "", nil},
		// Generic JSON, fenced or in OpenAI's shape.
		{"fence", JSON, "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Kyiv\"}}\n```", "", "", []string{`get_weather {"city": "Kyiv"}`}},
		{"openai shape", JSON, `{"tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}`, "", "", []string{`get_time {}`}},
		{"array", JSON, `[{"name": "get_time"}]`, "", "", []string{`get_time {}`}},
		{"json hermes marker", JSON, "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>", "", "", []string{`get_time {}`}},
		// Not calls.
		{"text", Hermes, "It is sunny.", "It is sunny.", "", nil},
		{"spaces kept", JSON, "  It is sunny.\n", "  It is sunny.\n", "", nil},
		{"unknown function", JSON, `{"name": "delete_all", "arguments": {}}`, `{"name": "delete_all", "arguments": {}}`, "", nil},
		{"not a call", JSON, `{"city": "Paris"}`, `{"city": "Paris"}`, "", nil},
		{"array args", Hermes, `<tool_call>{"name": "get_weather", "arguments": [1]}</tool_call>`, `<tool_call>{"name": "get_weather", "arguments": [1]}</tool_call>`, "", nil},
		{"other family", Llama3, `<tool_call>{"name": "get_time"}</tool_call>`, `<tool_call>{"name": "get_time"}</tool_call>`, "", nil},
		{"empty block", Hermes, `<tool_call></tool_call> x`, `<tool_call></tool_call> x`, "", nil},
		// Cut in a call: the call is partial.
		{"cut", Hermes, `<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"`, "", "", []string{`get_weather {"city": "Paris" partial`}},
		{"cut before args", Hermes, `<tool_call>{"name": "get_weather", "argu`, `<tool_call>{"name": "get_weather", "argu`, "", nil},
		// Go's fuzzer found it: the call to f breaks where <tool_call> opens.
		{"fuzz 1", Hermes, `{"name": "f", "arguments": {<tool_call>{"name":"get_weather"}`, `{"name": "f", "arguments": {`, "", []string{`get_weather {}`}},
	})
}

// parallel_tool_calls false keeps one call.
func TestOneCall(t *testing.T) {
	got := read(t, Options{Tools: weatherTools, OneCall: true, Format: Format{Family: Llama3}}, true,
		`{"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "x"}}`)
	assert.Equal(t, []string{`get_time {}`}, callText(got.Calls))
	assert.Empty(t, got.Content)
}

// Read is the reader run over the whole answer.
func TestRead(t *testing.T) {
	opt := Options{Tools: weatherTools, Format: Format{Family: Hermes, Reasoning: Think}, NewID: counter()}
	content, reasoning, calls := Read(opt, "<think>Weather.</think>\nChecking.\n<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": 2}}</tool_call>", true)
	assert.Equal(t, "Checking.", content)
	assert.Equal(t, "Weather.", reasoning)
	assert.Equal(t, []Call{{ID: "call_1", Name: "get_time", Arguments: []byte(`{"zone": 2}`)}}, calls)
}

// Answers as the models write them (their formats as their templates
// render past calls, and as llama.cpp's and vLLM's parsers read them).
func TestReadModelAnswers(t *testing.T) {
	checkCases(t, Options{Tools: weatherTools, Format: Format{Reasoning: Think}}, []readCase{
		{"Qwen 3", Hermes, "<think>\nOkay, the user wants the weather in Paris. I should call get_weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
			"", "Okay, the user wants the weather in Paris. I should call get_weather.", []string{`get_weather {"city": "Paris", "unit": "c"}`}},
		{"Qwen 3 parallel", Hermes, "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
			"", "", []string{`get_weather {"city": "Paris"}`, `get_weather {"city": "Rome"}`}},
		{"Qwen 3.5", Hermes, "I'll check the time.\n\n<tool_call>\n<function=get_time>\n<parameter=zone>\n2\n</parameter>\n</function>\n</tool_call>",
			"I'll check the time.", "", []string{`get_time {"zone":2}`}},
		{"Hermes 2 Pro (arguments first)", Hermes, "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}, \"name\": \"get_weather\"}\n</tool_call>",
			"", "", []string{`get_weather {"city": "Paris"}`}},
		{"Llama 3.1", Llama3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", "", []string{`get_weather {"city": "Paris"}`}},
		{"Llama 3.2", Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}", "", "", []string{`get_weather {"city": "Paris", "unit": "c"}`}},
		{"Llama 3.1 code", Llama3, "<|python_tag|>import math\nprint(math.pi)", "<|python_tag|>import math\nprint(math.pi)", "", nil},
		{"Mistral Nemo", Mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]", "", "", []string{`get_weather {"city": "Paris"}`}},
		{"Ministral 3", Mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"unit\": \"c\"}", "", "", []string{`get_weather {"city": "Paris", "unit": "c"}`}},
		{"polyfilled", JSON, "{\"name\": \"get_time\", \"arguments\": {\"zone\": 9}}", "", "", []string{`get_time {"zone": 9}`}},
		{"a JSON answer", JSON, "{\"answer\": 42, \"name\": \"get_time\"}", "{\"answer\": 42, \"name\": \"get_time\"}", "", nil},
	})
	checkCases(t, Options{Tools: weatherTools, Format: Format{Reasoning: Think}, InReasoning: true}, []readCase{
		{"DeepSeek R1", JSON, "Okay, so the user said hello. I should greet back.\n</think>\n\nHello! How can I help you today?",
			"Hello! How can I help you today?", "Okay, so the user said hello. I should greet back.", nil},
		{"QwQ call", Hermes, "The weather: a tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
			"", "The weather: a tool.", []string{`get_weather {"city": "Oslo"}`}},
	})
}

// An answer in JSON that is no call goes out from its first key, not at
// its end; one that may be a call waits.
func TestJSONAnswerNotHeld(t *testing.T) {
	r := NewReader(Options{Tools: weatherTools, Format: Format{Family: JSON}})
	assert.Equal(t, []Delta{{Content: `{"answer"`}}, r.Add(`{"answer"`), "known at its first key")
	assert.Equal(t, []Delta{{Content: `: 4`}}, r.Add(`: 4`))
	r = NewReader(Options{Tools: weatherTools, Format: Format{Family: JSON}})
	assert.Empty(t, r.Add(`{"name": "get_time", "x": "`+strings.Repeat("y", 1000)))
}

// Calls do not nest: a call's "function" is an argument of no call, and
// a wrapper's "name" names nothing.
func TestCallsDoNotNest(t *testing.T) {
	checkCases(t, Options{Tools: weatherTools}, []readCase{
		{"call in call", JSON, `{"name": "get_time", "arguments": {}, "function": {"name": "get_weather", "arguments": {"city": "x"}}}`, "", "", []string{`get_time {}`}},
		{"named wrapper", JSON, `{"function": {"name": "get_time", "arguments": {"zone": 1}}, "name": "get_weather", "arguments": {}}`, "", "", []string{`get_time {"zone": 1}`}},
		{"two wrapped", JSON, `{"tool_calls": [{"function": {"name": "get_time", "arguments": "{\"zone\": 1}"}}, {"function": {"name": "get_weather", "arguments": {"city": "x"}}}]}`, "", "", []string{`get_time {"zone": 1}`, `get_weather {"city": "x"}`}},
	})
}
