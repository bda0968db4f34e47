package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The replies of scripted model outputs, read as a client reads them: the
// wire types here are OpenAI's, written anew, not the server's.

type wireCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []byte  `json:"-"`
	Ints    []int   `json:"bytes"`
}

type wireChoice struct {
	Index   int `json:"index"`
	Message struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		ToolCalls []wireCall `json:"tool_calls"`
	} `json:"message"`
	Delta struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		ToolCalls []wireCall `json:"tool_calls"`
	} `json:"delta"`
	Logprobs *struct {
		Content []wireLogprob `json:"content"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type wireChat struct {
	Choices []wireChoice `json:"choices"`
	Usage   *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// chatReply is one choice of a chat reply, whole or gathered from a stream
// as OpenAI's clients gather it.
type chatReply struct {
	content  string
	calls    []wireCall // arguments joined from the deltas
	logprobs []wireLogprob
	finish   string
	deltas   int // chunks with tool-call deltas
}

// chatBoth posts body to /v1/chat/completions, whole and then streamed, and
// returns both replies of its one choice.
func chatBoth(t *testing.T, url, body string) (whole, streamed chatReply) {
	t.Helper()
	resp := post(t, url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var w wireChat
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&w))
	resp.Body.Close()
	require.Len(t, w.Choices, 1)
	c := w.Choices[0]
	if c.Message.Content != nil {
		whole.content = *c.Message.Content
	}
	whole.calls = c.Message.ToolCalls
	if c.Logprobs != nil {
		whole.logprobs = c.Logprobs.Content
	}
	require.NotNil(t, c.FinishReason)
	whole.finish = *c.FinishReason

	resp = post(t, url+"/v1/chat/completions", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	defer resp.Body.Close()
	evs := events(t, resp.Body)
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	for i, ev := range evs[:len(evs)-1] {
		var chunk wireChat
		require.NoError(t, json.Unmarshal([]byte(ev), &chunk), ev)
		require.Len(t, chunk.Choices, 1, ev)
		d := chunk.Choices[0]
		if i == 0 {
			assert.Equal(t, "assistant", d.Delta.Role, "the first chunk opens the message")
		}
		require.Empty(t, streamed.finish, "a chunk after the finish: %s", ev)
		if d.Delta.Content != nil {
			streamed.content += *d.Delta.Content
		}
		if d.Logprobs != nil {
			streamed.logprobs = append(streamed.logprobs, d.Logprobs.Content...)
		}
		if len(d.Delta.ToolCalls) > 0 {
			streamed.deltas++
		}
		for _, dc := range d.Delta.ToolCalls {
			require.NotNil(t, dc.Index, ev)
			if *dc.Index == len(streamed.calls) {
				require.NotEmpty(t, dc.ID, "a call's first delta has its id: %s", ev)
				require.NotEmpty(t, dc.Function.Name, "and its name: %s", ev)
				assert.Equal(t, "function", dc.Type, ev)
				streamed.calls = append(streamed.calls, dc)
				continue
			}
			require.Less(t, *dc.Index, len(streamed.calls), ev)
			sc := &streamed.calls[*dc.Index]
			assert.Empty(t, dc.ID+dc.Function.Name, "a call's later deltas carry its arguments only: %s", ev)
			sc.Function.Arguments += dc.Function.Arguments
		}
		if d.FinishReason != nil {
			streamed.finish = *d.FinishReason
		}
	}
	return whole, streamed
}

// callsOf spells calls as name and arguments, decoded (the ids are
// random).
func callsOf(t *testing.T, calls []wireCall) []string {
	t.Helper()
	var out []string
	for _, c := range calls {
		var args any
		require.NoError(t, json.Unmarshal([]byte(c.Function.Arguments), &args), "arguments are JSON: %s", c.Function.Arguments)
		a, _ := json.Marshal(args)
		assert.Regexp(t, `^call_[a-zA-Z0-9]+$`, c.ID)
		out = append(out, c.Function.Name+" "+string(a))
	}
	return out
}

const weatherRequest = `{"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":` + weatherTools + `,"max_tokens":200}`

// Each family's tool calls, as the model writes them token by token (its
// markers in many tokens), are streamed as deltas that make the calls of
// the whole reply: a call's id and name first, its arguments in pieces,
// finish_reason tool_calls; the text around them is the same content.
func TestToolCallsStreamedAsWhole(t *testing.T) {
	qwen3 := realTemplate(t, "Qwen3-8B-Q8_0.jinja")
	llama32 := realTemplate(t, "Llama-3.2-1B-Instruct-GGUF.jinja")
	ministral := realTemplate(t, "Ministral-3-14B-Instruct-2512-Q4_0.jinja")
	paris := `get_weather {"city":"Paris"}`
	for _, tc := range []struct {
		name, template, output, content string
		calls                           []string
	}{
		{"hermes", qwen3, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []string{paris}},
		{"hermes two calls", qwen3, "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\", \"unit\": \"c\"}}\n</tool_call>",
			"I will look.", []string{paris, `get_weather {"city":"Lima","unit":"c"}`}},
		{"llama3", llama32, `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []string{paris}},
		{"mistral", ministral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, "", []string{paris}},
		{"json", "", `{"name": "get_weather", "arguments": {"city": "Paris"}}`, "", []string{paris}},
		{"no call", qwen3, "It is sunny in Paris.", "It is sunny in Paris.", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{SequenceSize: 4096}
			if tc.template != "" {
				tmpl, err := NewChatTemplate(tc.template, "<s>", "</s>")
				require.NoError(t, err)
				cfg.ChatTemplate = tmpl
			}
			h := newHarness(t, 1, cfg, nil)
			h.model.SetScript(h.tok.Says(tc.output))
			whole, streamed := chatBoth(t, h.ts.URL, weatherRequest)
			assert.Equal(t, tc.content, whole.content)
			assert.Equal(t, tc.content, streamed.content)
			assert.Equal(t, tc.calls, callsOf(t, whole.calls))
			assert.Equal(t, tc.calls, callsOf(t, streamed.calls))
			want := "stop"
			if tc.calls != nil {
				want = "tool_calls"
				assert.Greater(t, streamed.deltas, len(tc.calls), "the arguments come in pieces")
			}
			assert.Equal(t, want, whole.finish)
			assert.Equal(t, want, streamed.finish)
		})
	}
}

// A token's logprob lists its bytes, a byte token's one byte of a UTF-8
// character too; the bytes of the entries make the text, streamed or not;
// a forced token has logprob 0 and its alternatives about -ForcedGap.
func TestLogprobBytes(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	text := "é ok😀"
	toks := h.tok.Spell(text)
	require.Equal(t, []int32{testmodel.FirstByte + 0xC3, testmodel.FirstByte + 0xA9}, toks[:2], "é is two byte tokens")
	h.model.SetScript(h.tok.Says(text))
	whole, streamed := chatBoth(t, h.ts.URL, `{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2}`)
	for _, r := range []chatReply{whole, streamed} {
		assert.Equal(t, text, r.content)
		require.Len(t, r.logprobs, len(toks))
		var b []byte
		for i, lp := range r.logprobs {
			piece, err := h.tok.AppendPiece(nil, toks[i], true)
			require.NoError(t, err)
			for _, x := range lp.Ints {
				b = append(b, byte(x))
			}
			assert.Equal(t, piece, []byte(string(bytesOf(lp.Ints))), "token %d", i)
			assert.Zero(t, lp.Logprob, "token %d", i)
		}
		assert.Equal(t, text, string(b))
	}
	// The alternatives of a forced token: the two most probable others.
	resp := post(t, h.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2,"max_tokens":1}`)
	defer resp.Body.Close()
	var w struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Top []struct {
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&w))
	top := w.Choices[0].Logprobs.Content[0].Top
	require.Len(t, top, 2)
	assert.Zero(t, top[0].Logprob)
	assert.InDelta(t, -1e4, top[1].Logprob, 1)
}

func bytesOf(ints []int) []byte {
	b := make([]byte, len(ints))
	for i, x := range ints {
		b[i] = byte(x)
	}
	return b
}

// A stop string is left out of the text, streamed or not, wherever the
// tokens split it, and ends the choice with finish_reason stop; the
// logprobs list the tokens of the text shown only.
func TestStopStringsScripted(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	h.model.SetScript(h.tok.Says("Hello world. Bye"))
	for stop, want := range map[string]string{`"world"`: "Hello ", `["o w", "Bye"]`: "Hell", `"ld. B"`: "Hello wor", `"nothing"`: "Hello world. Bye"} {
		whole, streamed := chatBoth(t, h.ts.URL, fmt.Sprintf(`{"messages":[{"role":"user","content":"Hi"}],"stop":%s,"logprobs":true}`, stop))
		for _, r := range []chatReply{whole, streamed} {
			assert.Equal(t, want, r.content, stop)
			assert.Equal(t, "stop", r.finish, stop)
			var b []byte
			for _, lp := range r.logprobs {
				b = append(b, bytesOf(lp.Ints)...)
			}
			assert.True(t, strings.HasPrefix(string(b), want) && len(b) < len(want)+6, "%s: the logprobs spell %q", stop, b)
		}
	}
}

// The Responses API streams a call as OpenAI's events, in their order, and
// its completed response holds the output of the whole reply.
func TestResponsesEventsOfACall(t *testing.T) {
	tmpl, err := NewChatTemplate(realTemplate(t, "Qwen3-8B-Q8_0.jinja"), "<s>", "</s>")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{SequenceSize: 4096, ChatTemplate: tmpl}, nil)
	h.model.SetScript(h.tok.Says("Let me see.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"))
	body := `{"input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}`

	resp := post(t, h.ts.URL+"/v1/responses", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var whole struct {
		Status string           `json:"status"`
		Output []map[string]any `json:"output"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&whole))
	resp.Body.Close()
	assert.Equal(t, "completed", whole.Status)
	require.Len(t, whole.Output, 2)
	assert.Equal(t, "message", whole.Output[0]["type"])
	assert.Equal(t, "function_call", whole.Output[1]["type"])
	assert.Equal(t, "get_weather", whole.Output[1]["name"])
	assert.JSONEq(t, `{"city": "Paris"}`, whole.Output[1]["arguments"].(string))

	resp = post(t, h.ts.URL+"/v1/responses", strings.TrimSuffix(body, "}")+`,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	defer resp.Body.Close()
	var types []string
	var text, args string
	var completed struct {
		Response struct {
			Status string           `json:"status"`
			Output []map[string]any `json:"output"`
		} `json:"response"`
	}
	for _, ev := range events(t, resp.Body) {
		var e struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev), &e), ev)
		if n := len(types); n == 0 || types[n-1] != e.Type { // runs of deltas as one
			types = append(types, e.Type)
		}
		switch e.Type {
		case "response.output_text.delta":
			text += e.Delta
		case "response.function_call_arguments.delta":
			args += e.Delta
		case "response.completed":
			require.NoError(t, json.Unmarshal([]byte(ev), &completed))
		}
	}
	assert.Equal(t, []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.completed"}, types)
	assert.Equal(t, "Let me see.", text)
	assert.JSONEq(t, `{"city": "Paris"}`, args)
	assert.Equal(t, "completed", completed.Response.Status)
	require.Len(t, completed.Response.Output, 2)
	for i, item := range completed.Response.Output {
		for k, v := range whole.Output[i] {
			if k != "id" && k != "call_id" {
				assert.Equal(t, v, item[k], "output[%d].%s", i, k)
			}
		}
	}
}

// The framing of the streams: chat and completions send "data: JSON"
// events, each on one line and ended by a blank line, then
// "data: [DONE]"; the Responses API sends "event: TYPE" before each data
// line, its type the JSON's, numbered from 0, and no [DONE]. The usage
// chunk counts what the whole reply counts.
func TestStreamFraming(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	h.model.SetScript(h.tok.Says("Hello there, line one.\nLine two."))
	read := func(path, body string) (http.Header, []string) {
		resp := post(t, h.ts.URL+path, body)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var b strings.Builder
		_, err := io.Copy(&b, resp.Body)
		require.NoError(t, err)
		text := b.String()
		require.True(t, strings.HasSuffix(text, "\n\n"), "%q", text)
		return resp.Header, strings.Split(strings.TrimSuffix(text, "\n\n"), "\n\n")
	}
	const streamed = `,"stream":true,"stream_options":{"include_usage":true}}`
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"x","max_tokens":50}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`},
	} {
		header, blocks := read(tc.path, strings.TrimSuffix(tc.body, "}")+streamed)
		assert.Equal(t, "text/event-stream", header.Get("Content-Type"))
		assert.Equal(t, "no-cache", header.Get("Cache-Control"))
		assert.Equal(t, "data: [DONE]", blocks[len(blocks)-1])
		var usage struct {
			Choices []any `json:"choices"`
			Usage   struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		for _, b := range blocks[:len(blocks)-1] {
			data, ok := strings.CutPrefix(b, "data: ")
			require.True(t, ok, "%q", b)
			require.NotContains(t, data, "\n")
			require.NoError(t, json.Unmarshal([]byte(data), &usage), data)
		}
		assert.Empty(t, usage.Choices, "the last chunk is the usage")
		resp := post(t, h.ts.URL+tc.path, tc.body)
		var whole struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&whole))
		resp.Body.Close()
		assert.Equal(t, len(h.tok.Spell("Hello there, line one.\nLine two."))+1, whole.Usage.CompletionTokens, "the text's tokens and </s>")
		assert.Equal(t, whole.Usage.CompletionTokens, usage.Usage.CompletionTokens, tc.path)
	}

	header, blocks := read("/v1/responses", `{"input":"x","stream":true}`)
	assert.Equal(t, "text/event-stream", header.Get("Content-Type"))
	for i, b := range blocks {
		typ, data, ok := strings.Cut(b, "\n")
		require.True(t, ok, "%q", b)
		typ, ok = strings.CutPrefix(typ, "event: ")
		require.True(t, ok, "%q", b)
		data, ok = strings.CutPrefix(data, "data: ")
		require.True(t, ok, "%q", b)
		var ev struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
		assert.Equal(t, typ, ev.Type)
		require.NotNil(t, ev.Seq, data)
		assert.Equal(t, i, *ev.Seq)
	}
	assert.Contains(t, blocks[len(blocks)-1], "event: response.completed\n")
}
