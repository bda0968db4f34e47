package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// doMessages sends body to path with the headers (name, value, ...) and
// returns the status and the body.
func doMessages(t *testing.T, method, url, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// anthropicErrorOf decodes an error in Anthropic's shape (and nothing
// else: no OpenAI fields).
func anthropicErrorOf(t *testing.T, data []byte) anthropicErrorBody {
	t.Helper()
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &keys), string(data))
	assert.ElementsMatch(t, []string{"type", "error", "request_id"}, mapKeys(keys), string(data))
	var e anthropicErrorBody
	require.NoError(t, json.Unmarshal(data, &e))
	assert.Equal(t, "error", e.Type)
	assert.Regexp(t, `^req_[0-9a-f]{32}$`, e.RequestID)
	return e
}

func mapKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sseEvents reads a stream of named server-sent events: each event's name
// must be its data's type.
func sseEvents(t *testing.T, data []byte) (names []string, events []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			raw := strings.TrimPrefix(line, "data: ")
			require.True(t, strings.HasPrefix(raw, `{"type":"`+name+`"`), "the type comes first: %s", raw)
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(raw), &ev))
			require.Equal(t, name, ev["type"])
			names, events = append(names, name), append(events, ev)
		case line == "":
		default:
			t.Fatalf("not an event line: %q", line)
		}
	}
	return names, events
}

// gather builds the message that the events of a stream describe, as
// Anthropic's SDKs do.
func gather(t *testing.T, events []map[string]any) map[string]any {
	t.Helper()
	var msg map[string]any
	var blocks []map[string]any
	partial := map[int]string{}
	for _, ev := range events {
		switch ev["type"] {
		case "message_start":
			msg = ev["message"].(map[string]any)
		case "content_block_start":
			require.Equal(t, float64(len(blocks)), ev["index"], "blocks start in order")
			blocks = append(blocks, ev["content_block"].(map[string]any))
		case "content_block_delta":
			i := int(ev["index"].(float64))
			require.Less(t, i, len(blocks))
			d := ev["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d["text"].(string)
			case "thinking_delta":
				blocks[i]["thinking"] = blocks[i]["thinking"].(string) + d["thinking"].(string)
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			default:
				t.Fatalf("delta %v", d)
			}
		case "content_block_stop":
			i := int(ev["index"].(float64))
			if s, ok := partial[i]; ok {
				var input any
				require.NoError(t, json.Unmarshal([]byte(s), &input), s)
				blocks[i]["input"] = input
			}
		case "message_delta":
			d := ev["delta"].(map[string]any)
			msg["stop_reason"], msg["stop_sequence"] = d["stop_reason"], d["stop_sequence"]
			msg["usage"].(map[string]any)["output_tokens"] = ev["usage"].(map[string]any)["output_tokens"]
		}
	}
	require.NotNil(t, msg)
	content := []any{}
	for _, b := range blocks {
		content = append(content, b)
	}
	msg["content"] = content
	return msg
}

// messageBoth runs body whole and streamed on h: both must describe the same
// message, which it returns (with the stream's event names).
func messageBoth(t *testing.T, h *harness, body string) (map[string]any, []string) {
	t.Helper()
	status, data := doMessages(t, "POST", h.ts.URL+"/v1/messages", body)
	require.Equal(t, http.StatusOK, status, string(data))
	var whole map[string]any
	require.NoError(t, json.Unmarshal(data, &whole))
	status, data = doMessages(t, "POST", h.ts.URL+"/v1/messages", strings.Replace(body, "{", `{"stream":true,`, 1))
	require.Equal(t, http.StatusOK, status, string(data))
	names, events := sseEvents(t, data)
	streamed := gather(t, events)
	// The ids are new in each.
	assert.Regexp(t, `^msg_[0-9a-f]{32}$`, whole["id"])
	delete(whole, "id")
	delete(streamed, "id")
	for _, m := range []map[string]any{whole, streamed} {
		for _, b := range m["content"].([]any) {
			if b := b.(map[string]any); b["type"] == "tool_use" {
				assert.Regexp(t, `^toolu_[A-Za-z0-9]+$`, b["id"])
				delete(b, "id")
			}
		}
	}
	assert.Equal(t, whole, streamed, "the stream gathers into the whole reply")
	return whole, names
}

// The Messages API's replies: text, a stop sequence, max_tokens, a tool
// call (after text), each whole and streamed alike, with their usage.
func TestMessagesReplies(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	say := func(text string) { h.model.SetScript(h.tok.Says(text)) }

	say("Hello there.")
	msg, names := messageBoth(t, h, `{"model":"demo","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`)
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "Hello there."}}, msg["content"])
	assert.Equal(t, "end_turn", msg["stop_reason"])
	assert.Nil(t, msg["stop_sequence"])
	assert.Equal(t, "message", msg["type"])
	assert.Equal(t, "assistant", msg["role"])
	assert.Equal(t, "demo", msg["model"])
	usage := msg["usage"].(map[string]any)
	assert.Equal(t, float64(len(h.tok.Spell("Hello there."))+1), usage["output_tokens"], "the text's tokens and </s>")
	prompt, err := h.tok.ApplyChatTemplate([]backend.Message{{Role: "user", Content: "Hi"}}, true)
	require.NoError(t, err)
	promptTokens, err := h.tok.Tokenize(prompt, false, true)
	require.NoError(t, err)
	assert.Equal(t, float64(len(promptTokens)), usage["input_tokens"])
	assert.Equal(t, []string{"message_start", "ping", "content_block_start"}, names[:3])
	assert.Equal(t, []string{"content_block_stop", "message_delta", "message_stop"}, names[len(names)-3:])

	// count_tokens counts the same prompt.
	status, data := doMessages(t, "POST", h.ts.URL+"/v1/messages/count_tokens", `{"model":"demo","messages":[{"role":"user","content":"Hi"}]}`)
	require.Equal(t, http.StatusOK, status, string(data))
	assert.JSONEq(t, `{"input_tokens":`+string(mustJSON(t, len(promptTokens)))+`}`, string(data))

	say("One two STOP three")
	msg, _ = messageBoth(t, h, `{"model":"demo","max_tokens":50,"stop_sequences":["STOP"],"messages":[{"role":"user","content":"Hi"}]}`)
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "One two "}}, msg["content"])
	assert.Equal(t, "stop_sequence", msg["stop_reason"])
	assert.Equal(t, "STOP", msg["stop_sequence"])

	say("One two three four five")
	msg, _ = messageBoth(t, h, `{"model":"demo","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`)
	assert.Equal(t, "max_tokens", msg["stop_reason"])
	assert.Equal(t, float64(2), msg["usage"].(map[string]any)["output_tokens"])

	// (A short tool: its description joins the prompt, of 256 tokens.)
	tools := `"tools":[{"name":"w","input_schema":{"type":"object"}}]`
	// (The demo spells most of it a character a token: the call is short.)
	say(`{"name": "w", "arguments": {"c": 1}}`)
	msg, names = messageBoth(t, h, `{"model":"demo","max_tokens":100,`+tools+`,"messages":[{"role":"user","content":"Weather?"}]}`)
	content := msg["content"].([]any)
	require.Len(t, content, 1, "%v", content)
	use := content[0].(map[string]any)
	assert.Equal(t, "tool_use", use["type"])
	assert.Equal(t, "w", use["name"])
	assert.Equal(t, map[string]any{"c": float64(1)}, use["input"])
	assert.Equal(t, "tool_use", msg["stop_reason"])
	assert.Contains(t, names, "content_block_delta")
}

func mustJSON(t *testing.T, v any) []byte {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// A Messages request becomes the chat request of its content: the system
// prompt (blocks joined), tool_use blocks as an assistant's calls,
// tool_result blocks as tool messages before the user's text, thinking
// blocks left out; the tools and each tool_choice in the chat's shapes.
func TestMessagesChatRequest(t *testing.T) {
	body := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"Be"},{"type":"text","text":"brief."}],
		"messages":[
			{"role":"user","content":"Weather in Paris?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Looking."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18 C"}]},{"type":"text","text":"And?"}]}],
		"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
		"tool_choice":{"type":"any","disable_parallel_tool_use":true},
		"stop_sequences":["END"],"temperature":0.5,"top_p":0.9,"top_k":5,"metadata":{"user_id":"u"}}`
	req, err := decodeMessagesRequest([]byte(body), false)
	require.NoError(t, err)
	mc, err := req.chatRequest()
	require.NoError(t, err)
	chat := mc.chat
	msgs, err := parseMessages(chat.Messages, nil)
	require.NoError(t, err)
	require.Len(t, msgs, 5)
	assert.Equal(t, chatMessage{Role: "system", Content: "Be\nbrief."}, msgs[0])
	assert.Equal(t, chatMessage{Role: "user", Content: "Weather in Paris?"}, msgs[1])
	assert.Equal(t, "assistant", msgs[2].Role)
	assert.Equal(t, "Looking.", msgs[2].Content)
	assert.Equal(t, "hmm", msgs[2].Reasoning, "a thinking block is the reasoning_content the template reads")
	require.Len(t, msgs[2].ToolCalls, 1)
	assert.Equal(t, "toolu_1", msgs[2].ToolCalls[0].ID)
	assert.Equal(t, "get_weather", msgs[2].ToolCalls[0].Name)
	assert.JSONEq(t, `{"city":"Paris"}`, msgs[2].ToolCalls[0].Arguments)
	assert.Equal(t, chatMessage{Role: "tool", Content: "18 C", ToolCallID: "toolu_1"}, msgs[3])
	assert.Equal(t, chatMessage{Role: "user", Content: "And?"}, msgs[4])
	assert.Equal(t, []int{-1, 0, 1, 2, 2}, mc.origin)

	require.Len(t, chat.Tools, 1)
	assert.JSONEq(t, `{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}`, string(chat.Tools[0]))
	assert.JSONEq(t, `"required"`, string(chat.ToolChoice))
	require.NotNil(t, chat.ParallelToolCalls)
	assert.False(t, *chat.ParallelToolCalls)
	assert.JSONEq(t, `["END"]`, string(chat.Stop))
	assert.Equal(t, 0.5, *chat.Temperature)
	assert.Equal(t, 0.9, *chat.TopP)
	assert.Equal(t, 10, *chat.MaxTokens)
	assert.JSONEq(t, `5`, string(chat.config["top_k"]))

	for choice, want := range map[string]string{
		`{"type":"auto"}`:                      `"auto"`,
		`{"type":"none"}`:                      `"none"`,
		`{"type":"tool","name":"get_weather"}`: `{"type":"function","function":{"name":"get_weather"}}`,
	} {
		req, err := decodeMessagesRequest([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":`+choice+`}`), false)
		require.NoError(t, err)
		mc, err := req.chatRequest()
		require.NoError(t, err)
		assert.JSONEq(t, want, string(mc.chat.ToolChoice), choice)
		assert.Nil(t, mc.chat.ParallelToolCalls)
	}
}

// An error of the chat request names the Messages request's field: the
// message a chat message came from, tools.N, stop_sequences.
func TestMessagesParam(t *testing.T) {
	mc := &messagesChat{origin: []int{-1, 0, 1, 1, 2}}
	var re *requestError
	err := mc.messagesParam(badRequest("messages[3].content", "messages[3]: bad, as messages[0] is"))
	require.True(t, errors.As(err, &re))
	assert.Equal(t, "messages.1.content", re.param)
	assert.Equal(t, "messages.1: bad, as system is", re.msg)
	err = mc.messagesParam(badRequest("tools[2].function.parameters", "tools[2]: parameters must be a JSON Schema object"))
	require.True(t, errors.As(err, &re))
	assert.Equal(t, "tools.2.input_schema", re.param)
	assert.Equal(t, "tools.2: parameters must be a JSON Schema object", re.msg)
	err = mc.messagesParam(badRequest("stop", "stop: 5 strings, at most 4"))
	require.True(t, errors.As(err, &re))
	assert.Equal(t, "stop_sequences", re.param)
	assert.Equal(t, "stop_sequences: 5 strings, at most 4", re.msg)
}

// Bad requests get Anthropic's error shape with the status Anthropic
// gives them, the message naming the field; so do the answers that come
// before the endpoint (405, 415, 413, 401, 404).
func TestMessagesErrors(t *testing.T) {
	h := newHarness(t, 1, Config{MaxBodyBytes: 4096, APIKey: "k", Limits: Limits{MaxTools: 2, MaxSchemaBytes: 64}}, nil)
	url := h.ts.URL + "/v1/messages"
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	key := []string{"x-api-key", "k"}
	for _, tc := range []struct {
		method, path, body string
		headers            []string
		status             int
		typ, msg           string
	}{
		{"POST", "", `{"model":"demo",` + msgs + `}`, key, 400, "invalid_request_error", "max_tokens: Field required"},
		{"POST", "", `{"model":"demo","max_tokens":5,"frobnicate":1,` + msgs + `}`, key, 400, "invalid_request_error", `unknown field "frobnicate"`},
		{"POST", "", `{"model":"demo","max_tokens":0,` + msgs + `}`, key, 400, "invalid_request_error", "max_tokens: 0: must be at least 1"},
		{"POST", "", `{"model":"demo","max_tokens":5,"temperature":1.5,` + msgs + `}`, key, 400, "invalid_request_error", "temperature: 1.5: must be in [0, 1]"},
		{"POST", "", `{"model":"demo","max_tokens":5,"messages":[]}`, key, 400, "invalid_request_error", "messages: at least one message"},
		{"POST", "", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]}`, key,
			400, "invalid_request_error", "messages.1.content.0: a tool_use block belongs to an assistant message"},
		{"POST", "", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, key,
			400, "invalid_request_error", `messages.0.content.0.source.type: "": only base64 images are read`},
		{"POST", "", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`, key,
			400, "invalid_request_error", `an image part: this model reads text only (llamaserve serves images and audio with a projector, --mmproj)`},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tools":[{"type":"bash_20250124","name":"bash"}]}`, key,
			400, "invalid_request_error", `tools.0.type: "bash_20250124": only custom tools`},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tools":[{"name":"f"}]}`, key, 400, "invalid_request_error", "tools.0.input_schema: Field required"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tools":[{"name":"f","input_schema":[1]}]}`, key, 400, "invalid_request_error", "tools.0: parameters must be a JSON Schema object"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tool_choice":{"type":"tool","name":"g"},"tools":[{"name":"f","input_schema":{}}]}`, key,
			400, "invalid_request_error", `tool_choice names function "g", which is not among the tools`},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tool_choice":{"type":"sometimes"}}`, key, 400, "invalid_request_error", `tool_choice.type: "sometimes"`},
		// The bounds of chat's tools (Limits).
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{}},{"name":"c","input_schema":{}}]}`, key,
			400, "invalid_request_error", "3 tools: a request takes at most 2 (llamaserve --max-tools)"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"tools":[{"name":"a","input_schema":{"type":"object","properties":{"x":{"type":"string","description":"` + strings.Repeat("y", 64) + `"}}}}]}`, key,
			400, "invalid_request_error", "tools.0.input_schema: the tools' parameters: 135 bytes of JSON Schema, more than the 64"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"stop_sequences":["a","b","c","d","e"]}`, key, 400, "invalid_request_error", "stop_sequences: 5 strings, at most 4"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"thinking":{"type":"enabled"}}`, key, 400, "invalid_request_error", "thinking.budget_tokens: Field required"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `,"container":"c"}`, key, 400, "invalid_request_error", "container: this server runs no code"},
		{"POST", "/count_tokens", `{"model":"demo","max_tokens":5,` + msgs + `}`, key, 400, "invalid_request_error", `field "max_tokens" belongs to the other endpoint`},
		{"POST", "", `{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, key,
			413, "request_too_large", "larger than 4096 bytes"},
		{"POST", "", `{}`, []string{"x-api-key", "k", "Content-Type", "text/plain"}, 415, "invalid_request_error", "the body must be JSON"},
		{"GET", "", ``, key, 405, "invalid_request_error", "needs POST"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `}`, nil, 401, "authentication_error", "You didn't provide an API key"},
		{"POST", "", `{"model":"demo","max_tokens":5,` + msgs + `}`, []string{"x-api-key", "wrong"}, 401, "authentication_error", "Incorrect API key"},
		{"POST", "/batches", `{}`, key, 404, "not_found_error", "no endpoint /v1/messages/batches"},
	} {
		status, data := doMessages(t, tc.method, url+tc.path, tc.body, tc.headers...)
		assert.Equal(t, tc.status, status, "%s: %s", tc.body, data)
		e := anthropicErrorOf(t, data)
		assert.Equal(t, tc.typ, e.Error.Type, tc.body)
		assert.Contains(t, e.Error.Message, tc.msg, tc.body)
	}

	// The key works as x-api-key or Bearer, on every endpoint; a 401
	// elsewhere keeps OpenAI's shape.
	status, data := doMessages(t, "POST", url, `{"model":"demo","max_tokens":1,`+msgs+`}`, "Authorization", "Bearer k")
	assert.Equal(t, http.StatusOK, status, string(data))
	status, data = doMessages(t, "POST", h.ts.URL+"/v1/chat/completions", `{"max_tokens":1,`+msgs+`}`, "x-api-key", "k")
	assert.Equal(t, http.StatusOK, status, string(data))
	status, data = doMessages(t, "POST", h.ts.URL+"/v1/chat/completions", `{"max_tokens":1,`+msgs+`}`, "x-api-key", "wrong")
	assert.Equal(t, http.StatusUnauthorized, status)
	var oe apiError
	require.NoError(t, json.Unmarshal(data, &oe))
	assert.Equal(t, "invalid_request_error", oe.Error.Type)
}

// The formatter writes the reader's pieces as blocks in the order the
// model wrote them: thinking, text, then each call; the events gather into
// the whole message; thinking disabled leaves the reasoning out.
func TestMessageReplyBlocks(t *testing.T) {
	for _, show := range []bool{true, false} {
		msg := &messageObject{ID: "msg_1", Type: "message", Role: "assistant", Model: "m", Content: []any{}}
		var names []string
		var events []map[string]any
		mr := newMessageReply(msg, show, func(event string, data any) {
			var ev map[string]any
			require.NoError(t, json.Unmarshal(sseEvent(event, data)[len("event: "+event+"\ndata: "):], &ev))
			names, events = append(names, event), append(events, ev)
		})
		mr.start()
		mr.text("thinking", "Let me")
		mr.text("thinking", " think.")
		mr.text("text", "Calling.")
		mr.call(0, "call_abc", "f", `{"a":`)
		mr.call(0, "", "", `1}`)
		// The last call's fragments fall short of its arguments: the
		// rest goes out before it closes.
		mr.call(1, "call_def", "g", `{"b"`)
		mr.finish("tool_calls", "", map[int]string{0: `{"a":1}`, 1: `{"b":2}`}, 9)
		want := []any{textBlock{Type: "text", Text: "Calling."},
			toolUseBlock{Type: "tool_use", ID: "toolu_abc", Name: "f", Input: json.RawMessage(`{"a":1}`)},
			toolUseBlock{Type: "tool_use", ID: "toolu_def", Name: "g", Input: json.RawMessage(`{"b":2}`)}}
		if show {
			want = append([]any{thinkingBlock{Type: "thinking", Thinking: "Let me think."}}, want...)
		}
		assert.Equal(t, want, msg.Content)
		assert.Equal(t, "tool_use", *msg.StopReason)
		assert.Equal(t, 9, msg.Usage.OutputTokens)
		gathered := gather(t, events)
		data, err := json.Marshal(msg)
		require.NoError(t, err)
		var whole map[string]any
		require.NoError(t, json.Unmarshal(data, &whole))
		assert.Equal(t, whole, gathered)
		blocks := 3
		if show {
			blocks = 4
		}
		assert.Equal(t, blocks, count(names, "content_block_start"))
		assert.Equal(t, blocks, count(names, "content_block_stop"))
	}
}

func count(names []string, name string) int {
	n := 0
	for _, x := range names {
		if x == name {
			n++
		}
	}
	return n
}

// A stream that Abort cuts ends with Anthropic's error event; a stream
// is not answered with OpenAI's [DONE].
func TestMessagesStreamAbort(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	// The engine stops at its second step until the test ends: the
	// stream is in progress when Abort comes.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	steps := 0
	h.model.SetBeforeEval(func() {
		if steps++; steps == 2 {
			<-release
		}
	})
	resp, err := http.Post(h.ts.URL+"/v1/messages", "application/json", strings.NewReader(
		`{"model":"demo","max_tokens":200,"min_new_tokens":200,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r := bufio.NewReader(resp.Body)
	var head strings.Builder
	for !strings.Contains(head.String(), "event: content_block_delta\ndata:") {
		line, err := r.ReadString('\n')
		require.NoError(t, err, head.String())
		head.WriteString(line)
	}
	h.srv.Abort()
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	names, events := sseEvents(t, []byte(head.String()+string(rest)))
	assert.Equal(t, []string{"message_start", "ping", "content_block_start", "content_block_delta", "error"}, names)
	assert.Equal(t, map[string]any{"type": "error", "error": map[string]any{"type": "api_error",
		"message": "the server is shutting down: the request was cut"}}, events[len(events)-1])
}

// With a template whose model thinks (Qwen 3's), the reasoning comes as a
// thinking block before the text, whole and streamed alike (thinking_delta
// events); thinking disabled is the template's enable_thinking false,
// whose prompt closes the thinking, and leaves reasoning out of the reply;
// reasoning_format none keeps it inline.
func TestMessagesThinking(t *testing.T) {
	tmpl, err := NewChatTemplate(realTemplate(t, "Qwen-Qwen3-0.6B.jinja"), "", "")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: tmpl}, nil)
	var mu sync.Mutex
	var prompts []string
	h.model.SetScript(h.tok.Replies(func(prompt string) string {
		mu.Lock()
		defer mu.Unlock()
		prompts = append(prompts, prompt)
		return "<think>\nThe user greets.\n</think>\n\nHello."
	}))
	const body = `{"model":"demo","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]`
	msg, names := messageBoth(t, h, body+`}`)
	assert.Equal(t, []any{
		map[string]any{"type": "thinking", "thinking": "The user greets.", "signature": ""},
		map[string]any{"type": "text", "text": "Hello."},
	}, trimTexts(msg["content"].([]any)))
	assert.Equal(t, "end_turn", msg["stop_reason"])
	assert.Contains(t, names, "content_block_delta")

	msg, _ = messageBoth(t, h, body+`,"thinking":{"type":"enabled","budget_tokens":1024}}`)
	assert.Len(t, msg["content"], 2)

	mu.Lock()
	prompts = nil
	mu.Unlock()
	msg, _ = messageBoth(t, h, body+`,"thinking":{"type":"disabled"}}`)
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "Hello."}}, trimTexts(msg["content"].([]any)))
	mu.Lock()
	require.NotEmpty(t, prompts)
	assert.True(t, strings.HasSuffix(prompts[0], "<think>\n\n</think>\n\n"), "enable_thinking false: %q", prompts[0])
	mu.Unlock()

	msg, _ = messageBoth(t, h, body+`,"reasoning_format":"none"}`)
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "<think>\nThe user greets.\n</think>\n\nHello."}}, msg["content"])
}

// trimTexts trims the space around the texts of blocks (the model's
// newlines around its thinking).
func trimTexts(blocks []any) []any {
	for _, b := range blocks {
		m := b.(map[string]any)
		for _, k := range []string{"text", "thinking"} {
			if s, ok := m[k].(string); ok {
				m[k] = strings.TrimSpace(s)
			}
		}
	}
	return blocks
}

// A tool round trip reaches the template as the chat's would: the
// assistant's tool_use as its call, the user's tool_result as the tool's
// message (Qwen 3's template writes them as <tool_call> and
// <tool_response>), the system prompt first. (The prompt, over the
// harness's 256 tokens, is read from the plan.)
func TestMessagesToolRoundTripPrompt(t *testing.T) {
	tmpl, err := NewChatTemplate(realTemplate(t, "Qwen-Qwen3-0.6B.jinja"), "", "")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: tmpl}, nil)
	req, err := decodeMessagesRequest([]byte(`{"model":"demo","max_tokens":10,"system":"Be brief.",
		"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"w","input":{"c":"P"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18 C"}]}],
		"tools":[{"name":"w","input_schema":{"type":"object"}}]}`), false)
	require.NoError(t, err)
	mc, err := req.chatRequest()
	require.NoError(t, err)
	p, err := h.srv.params.plan(context.Background(), mc.chat, true)
	require.NoError(t, err)
	require.Equal(t, "jinja", p.template)
	// (The tokens' text has the demo's space after a control token.)
	prompt := h.tok.Text(p.reqs[0].Prompt)
	last := -1
	for _, part := range []string{"system\nBe brief.", "<tools>\n" + `{"type": "function", "function": {"name": "w"`,
		"user\nWeather?<|im_end|>", "assistant\n<tool_call>\n" + `{"name": "w", "arguments": {"c": "P"}}` + "\n</tool_call><|im_end|>",
		"user\n<tool_response>\n18 C\n</tool_response><|im_end|>", "assistant\n"} {
		i := strings.Index(prompt[last+1:], part)
		require.GreaterOrEqual(t, i, 0, "%q after byte %d of %s", part, last, prompt)
		last += 1 + i
	}
}
