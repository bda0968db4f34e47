package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func weatherPlan(t *testing.T, extra string) *toolPlan {
	t.Helper()
	body := `{"messages":[{"role":"user","content":"x"}],"tools":` + weatherTools[:len(weatherTools)-1] +
		`,{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}]` + extra + `}`
	req, err := decodeRequest([]byte(body), true)
	require.NoError(t, err)
	tp, err := parseTools(req, Limits{}.withDefaults())
	require.NoError(t, err)
	require.NotNil(t, tp)
	return tp
}

// readWhole reads text, a whole reply of a model that stopped by itself,
// with the reader of a plan with tp's tools.
func readWhole(tp *toolPlan, text string) (string, []toolCall) {
	rd := (&plan{tools: tp}).newReader()
	var content strings.Builder
	deltas := rd.Add(text)
	last, calls := rd.End(true)
	for _, d := range append(deltas, last...) {
		content.WriteString(d.Content)
	}
	return content.String(), calls
}

// The families' formats are read as calls through a plan's reader (the
// request's tools, parallel_tool_calls); text that is not a call, or
// calls a function that is not among the tools, stays content.
func TestParseToolCalls(t *testing.T) {
	tp := weatherPlan(t, "")
	type want struct {
		content string
		calls   []string // name + " " + arguments
	}
	for _, tc := range []struct {
		text string
		want want
	}{
		// Hermes, Qwen 2.5 and 3.
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", want{"", []string{`get_weather {"city": "Paris"}`}}},
		{"Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
			want{"Let me look.", []string{`get_weather {"city": "Paris"}`, `get_time {}`}}},
		{"<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}", want{"", []string{`get_weather {"city": "Rome"}`}}},
		// Qwen 3 Coder, 3.5 and 3.6: XML inside <tool_call>.
		{"<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>",
			want{"", []string{`get_weather {"city":"New York","unit":"c"}`}}},
		{"<tool_call>\n<function=get_time>\n<parameter=zone>\n-3\n</parameter>\n</function>\n</tool_call>", want{"", []string{`get_time {"zone":-3}`}}},
		// Llama 3.x.
		{`<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}`, want{"", []string{`get_weather {"city": "Oslo"}`}}},
		{`{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "parameters": {}}`, want{"", []string{`get_weather {"city": "Oslo"}`, `get_time {}`}}},
		// Mistral, both forms.
		{`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima"}}]`, want{"", []string{`get_weather {"city": "Lima"}`}}},
		{`[TOOL_CALLS]get_weather[ARGS]{"city": "Lima"}[TOOL_CALLS]get_time[ARGS]{}`, want{"", []string{`get_weather {"city": "Lima"}`, `get_time {}`}}},
		// Generic JSON, fenced or in OpenAI's shape.
		{"```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Kyiv\"}}\n```", want{"", []string{`get_weather {"city": "Kyiv"}`}}},
		{`{"tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}`, want{"", []string{`get_time {}`}}},
		{`[{"name": "get_time"}]`, want{"", []string{`get_time {}`}}},
		// Not calls.
		{"It is sunny.", want{"It is sunny.", nil}},
		{`{"name": "delete_all", "arguments": {}}`, want{`{"name": "delete_all", "arguments": {}}`, nil}},
		{`{"city": "Paris"}`, want{`{"city": "Paris"}`, nil}},
		{`<tool_call>{"name": "get_weather", "arguments": [1]}</tool_call>`, want{`<tool_call>{"name": "get_weather", "arguments": [1]}</tool_call>`, nil}},
		// An unclosed call is a call, partial (its finish is not
		// tool_calls): a stream sent it as it came.
		{`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"`, want{"", []string{`get_weather {"city": "Paris"`}}},
	} {
		content, calls := readWhole(tp, tc.text)
		assert.Equal(t, tc.want.content, content, tc.text)
		var got []string
		for _, c := range calls {
			got = append(got, c.Name+" "+c.Arguments)
			assert.Regexp(t, `^call_[a-zA-Z0-9]{24}$`, c.ID)
		}
		assert.Equal(t, tc.want.calls, got, tc.text)
	}

	// parallel_tool_calls false keeps one call.
	one := weatherPlan(t, `,"parallel_tool_calls":false`)
	_, calls := readWhole(one, `{"name": "get_time", "parameters": {}}; {"name": "get_time", "parameters": {}}`)
	assert.Len(t, calls, 1)
}

// tool_choice none (or no tools) calls nothing; required and a named
// function are kept.
func TestParseToolChoice(t *testing.T) {
	req, err := decodeRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":`+weatherTools+`,"tool_choice":"none"}`), true)
	require.NoError(t, err)
	tp, err := parseTools(req, Limits{}.withDefaults())
	require.NoError(t, err)
	assert.Nil(t, tp)
	assert.Equal(t, "auto", weatherPlan(t, "").mode)
	assert.Equal(t, "required", weatherPlan(t, `,"tool_choice":"required"`).mode)
	named := weatherPlan(t, `,"tool_choice":{"type":"function","function":{"name":"get_time"}}`)
	assert.Equal(t, "function", named.mode)
	assert.Equal(t, "get_time", named.name)
}

// byteVocab is a vocabulary of the 256 bytes and an end token (256).
func byteVocab(t *testing.T) *grammar.Vocabulary {
	toks := make([][]byte, 257)
	for i := range 256 {
		toks[i] = []byte{byte(i)}
	}
	toks[256] = nil
	v, err := grammar.NewVocabulary(toks, []int32{256})
	require.NoError(t, err)
	return v
}

// The grammar of a forced call accepts the calls of the family's format
// whose arguments validate, and nothing else.
func TestToolCallGrammar(t *testing.T) {
	v := byteVocab(t)
	accepts := func(src, text string) bool {
		g, err := grammar.Parse(src)
		require.NoError(t, err, src)
		m := grammar.NewMatcher(g, v)
		s := m.AcceptBytes(m.Start(), []byte(text))
		return !m.Dead(s) && m.Complete(s)
	}
	for _, tc := range []struct {
		family    chat.Family
		choice    string
		good, bad []string
	}{
		{chat.Hermes, `"required"`, []string{
			"<tool_call>\n" + `{"name":"get_weather","arguments":{"city":"Paris"}}` + "\n</tool_call>",
			"<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "unit": "f"}}` + "\n</tool_call>",
			"<tool_call>\n" + `{"name":"get_time","arguments":{}}` + "\n</tool_call>",
		}, []string{
			`{"name":"get_weather","arguments":{"city":"Paris"}}`,
			"<tool_call>\n" + "{\n  \"name\": \"get_time\",\n  \"arguments\": {}\n}" + "\n</tool_call>", // single spaces only
			"<tool_call>\n" + `{"name":"get_weather","arguments":{}}` + "\n</tool_call>",
			"<tool_call>\n" + `{"name":"get_weather","arguments":{"city":"Paris","unit":"k"}}` + "\n</tool_call>",
			"<tool_call>\n" + `{"name":"other","arguments":{}}` + "\n</tool_call>",
		}},
		{chat.Llama3, `{"type":"function","function":{"name":"get_weather"}}`, []string{
			`{"name":"get_weather","parameters":{"city":"Paris"}}`,
		}, []string{
			`{"name":"get_weather","arguments":{"city":"Paris"}}`,
			"<tool_call>\n" + "{\n  \"name\": \"get_time\",\n  \"arguments\": {}\n}" + "\n</tool_call>", // single spaces only
			`{"name":"get_time","parameters":{}}`,
		}},
		{chat.Mistral, `"required"`, []string{`[{"name":"get_time","arguments":{}}]`}, []string{`{"name":"get_time","arguments":{}}`}},
		{chat.JSON, `"required"`, []string{`{"name":"get_time","arguments":{}}`}, []string{`[{"name":"get_time","arguments":{}}]`}},
	} {
		tp := weatherPlan(t, `,"tool_choice":`+tc.choice)
		tp.family = tc.family
		src, err := tp.callGBNF(grammar.SchemaToGBNF)
		require.NoError(t, err)
		for _, g := range tc.good {
			assert.True(t, accepts(src, g), "%s: %s", tc.family, g)
			_, calls := readWhole(tp, g)
			require.Len(t, calls, 1, g)
			var args map[string]any
			assert.NoError(t, json.Unmarshal([]byte(calls[0].Arguments), &args))
		}
		for _, b := range tc.bad {
			assert.False(t, accepts(src, b), "%s: %s", tc.family, b)
		}
	}
	// The space rule replaced is the grammar package's.
	src0, err := grammar.SchemaToGBNF([]byte(`{"type":"object"}`))
	require.NoError(t, err)
	assert.Contains(t, src0, jsonSpace)
	// auto constrains nothing.
	src, err := weatherPlan(t, "").callGBNF(grammar.SchemaToGBNF)
	require.NoError(t, err)
	assert.Empty(t, src)
}

// A plan's reader streams a call's name, then its arguments as they are
// written, each byte once; they join into the call End returns, whose id
// its first delta has.
func TestReplyReaderStreamsCalls(t *testing.T) {
	rd := (&plan{tools: weatherPlan(t, "")}).newReader()
	var deltas []replyDelta
	for _, piece := range []string{"Checking. <tool", "_call>\n{\"name\": \"get_weather\",", " \"arguments\": {\"ci", "ty\": \"Pa", "ris\"}}\n</tool_call>"} {
		got := rd.Add(piece)
		deltas = append(deltas, got...)
	}
	before := len(deltas)
	last, calls := rd.End(true)
	deltas = append(deltas, last...)
	require.Len(t, calls, 1)
	var content, args strings.Builder
	var id, name string
	for _, d := range deltas {
		content.WriteString(d.Content)
		if d.Call != nil {
			assert.Equal(t, 0, d.Call.Index)
			id += d.Call.ID
			name += d.Call.Name
			args.WriteString(d.Call.Arguments)
		}
	}
	assert.Equal(t, "Checking.", strings.TrimSpace(content.String()))
	assert.Equal(t, calls[0].ID, id)
	assert.Regexp(t, `^call_[a-zA-Z0-9]{24}$`, id)
	assert.Equal(t, "get_weather", name)
	assert.Equal(t, `{"city": "Paris"}`, args.String())
	assert.Equal(t, args.String(), calls[0].Arguments)
	assert.False(t, calls[0].Partial)
	assert.Greater(t, before, 2, "the name and arguments stream before the end")

	// A call cut by the length is partial.
	rd = (&plan{tools: weatherPlan(t, "")}).newReader()
	rd.Add(`<tool_call>{"name": "get_weather", "arguments": {"city": "Par`)
	_, calls = rd.End(false)
	require.Len(t, calls, 1)
	assert.True(t, calls[0].Partial)
}

// genPrompt renders a chat with its generation prompt.
var genPrompt = chat.RenderOptions{AddGenerationPrompt: true}
