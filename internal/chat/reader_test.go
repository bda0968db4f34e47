package chat

import (
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
