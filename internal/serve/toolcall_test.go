package serve

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/grammar"
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

// The families' formats are read as calls; text that is not a call, or
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
		{`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"`, want{`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"`, nil}},
	} {
		content, calls := tp.parse(tc.text)
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
	_, calls := one.parse(`{"name": "get_time", "parameters": {}}; {"name": "get_time", "parameters": {}}`)
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
		family    toolFamily
		choice    string
		good, bad []string
	}{
		{familyHermes, `"required"`, []string{
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
		{familyLlama3, `{"type":"function","function":{"name":"get_weather"}}`, []string{
			`{"name":"get_weather","parameters":{"city":"Paris"}}`,
		}, []string{
			`{"name":"get_weather","arguments":{"city":"Paris"}}`,
			"<tool_call>\n" + "{\n  \"name\": \"get_time\",\n  \"arguments\": {}\n}" + "\n</tool_call>", // single spaces only
			`{"name":"get_time","parameters":{}}`,
		}},
		{familyMistral, `"required"`, []string{`[{"name":"get_time","arguments":{}}]`}, []string{`{"name":"get_time","arguments":{}}`}},
		{familyJSON, `"required"`, []string{`{"name":"get_time","arguments":{}}`}, []string{`[{"name":"get_time","arguments":{}}]`}},
	} {
		tp := weatherPlan(t, `,"tool_choice":`+tc.choice)
		tp.family = tc.family
		src, err := tp.callGBNF(grammar.SchemaToGBNF)
		require.NoError(t, err)
		for _, g := range tc.good {
			assert.True(t, accepts(src, g), "%s: %s", tc.family, g)
			_, calls := tp.parse(g)
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

// A stream sends text that cannot open a call at once, holds back what may
// be one, streams a call's name and arguments as they are written, and
// reads the rest at the end.
func TestToolStream(t *testing.T) {
	tp := weatherPlan(t, "")
	type streamed struct {
		content string
		rest    string
		calls   []toolCall
		// per call: id, name, arguments joined from the deltas
		ids, names, args []string
		deltas           int // deltas before the end
	}
	feed := func(pieces ...string) streamed {
		var out streamed
		ts := &toolStream{tp: tp}
		add := func(ds []*delta) {
			for _, d := range ds {
				tc := d.ToolCalls[0]
				i := *tc.Index
				for len(out.ids) <= i {
					out.ids, out.names, out.args = append(out.ids, ""), append(out.names, ""), append(out.args, "")
				}
				out.ids[i] += tc.ID
				out.names[i] += tc.Function.Name
				out.args[i] += tc.Function.Arguments
			}
		}
		for _, p := range pieces {
			c, ds := ts.feed(p)
			out.content += c
			out.deltas += len(ds)
			add(ds)
		}
		rest, calls, ds := ts.end(true)
		add(ds)
		out.rest, out.calls = rest, calls
		for i, c := range calls {
			assert.Equal(t, c.ID, out.ids[i])
			assert.Equal(t, c.Name, out.names[i])
			assert.Equal(t, c.Arguments, out.args[i], "the deltas make the arguments")
		}
		return out
	}
	got := feed("It", " is", " sunny", ".")
	assert.Equal(t, "It is sunny.", got.content)
	assert.Empty(t, got.rest)
	assert.Empty(t, got.calls)

	got = feed(" <tool", "_call>\n{\"name\": \"get_weather\",", " \"arguments\": {\"ci", "ty\": \"Pa", "ris\"}}\n</tool_call>")
	assert.Equal(t, "", got.content)
	assert.Empty(t, got.rest)
	require.Len(t, got.calls, 1)
	assert.Equal(t, `{"city": "Paris"}`, got.calls[0].Arguments)
	assert.GreaterOrEqual(t, got.deltas, 4, "the name, then the arguments as they come")

	got = feed("Checking. <", "tool_call>{\"name\": \"get_time\"}</tool_call>")
	assert.Equal(t, "Checking. ", got.content)
	assert.Empty(t, got.rest)
	require.Len(t, got.calls, 1)
	assert.Equal(t, 0, got.deltas, "no arguments key: sent at the end")

	// Two calls, Llama 3 style with parameters; then Mistral's array.
	got = feed(`{"name": "get_time", "parameters": {}}`)
	require.Len(t, got.calls, 1)
	assert.Equal(t, "{}", got.args[0])
	got = feed(`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_time", "arguments": {}}]`)
	require.Len(t, got.calls, 2)
	assert.Equal(t, []string{`{"city": "A"}`, "{}"}, got.args)

	// JSON that is not a call is sent at the end.
	got = feed(`{"a":`, ` 1}`)
	assert.Equal(t, "", got.content)
	assert.Equal(t, `{"a": 1}`, got.rest)
	assert.Empty(t, got.calls)

	// A call cut by the length sends no text at the end.
	ts := &toolStream{tp: tp}
	_, ds := ts.feed(`<tool_call>{"name": "get_weather", "arguments": {"city": "Par`)
	assert.Len(t, ds, 2)
	rest, calls, _ := ts.end(false)
	assert.Empty(t, rest)
	assert.Empty(t, calls)
}

// A call's arguments stream in deltas of whole characters that join into
// them.
func TestCallDeltas(t *testing.T) {
	c := toolCall{ID: "call_1", Name: "f", Arguments: `{"city":"Zürich – 東京 ☃☃☃☃☃☃","n":1}`}
	ds := callDeltas(2, c)
	require.Greater(t, len(ds), 2)
	first := ds[0].ToolCalls[0]
	assert.Equal(t, 2, *first.Index)
	assert.Equal(t, "call_1", first.ID)
	assert.Equal(t, "function", first.Type)
	assert.Equal(t, "f", first.Function.Name)
	assert.Equal(t, "", first.Function.Arguments)
	var args strings.Builder
	for _, d := range ds[1:] {
		tc := d.ToolCalls[0]
		assert.Equal(t, 2, *tc.Index)
		assert.Empty(t, tc.ID)
		assert.True(t, utf8.ValidString(tc.Function.Arguments))
		args.WriteString(tc.Function.Arguments)
	}
	assert.Equal(t, c.Arguments, args.String())
}
