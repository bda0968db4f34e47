package serve

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/types/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ollama's API, driven by Ollama's own Go client (github.com/ollama/ollama/api,
// the version pinned in go.mod) against the demo model; the replies are
// checked against the same requests through the OpenAI endpoints.

// ollamaClient serves the demo model (with the fake embedder of
// limits_test.go) and returns Ollama's client of it; key, when set, is the
// server's API key, and the client sends it as a Bearer token (Ollama's
// client sends none of its own: it signs requests with an ssh key only
// when OLLAMA_AUTH is set).
func ollamaClient(t *testing.T, key string) (*api.Client, string, *Server) {
	t.Helper()
	tmpl, err := NewChatTemplate(toolsTemplate, "<s>", "</s>")
	require.NoError(t, err)
	ts, srv, _ := newServerOf(t, 2, Config{Embedder: &fakeEmbedder{}, APIKey: key, ChatTemplate: tmpl,
		Details: ModelDetails{Template: toolsTemplate}})
	u, err := url.Parse(ts.URL)
	require.NoError(t, err)
	hc := &http.Client{}
	if key != "" {
		hc.Transport = bearerTransport{key}
	}
	return api.NewClient(u, hc), ts.URL, srv
}

// toolsTemplate is a short ChatML template that renders tools, calls and
// their results (the built-in one describes tools at more length than a
// test sequence holds).
const toolsTemplate = `{% if tools %}<|im_start|>system
Tools: {% for t in tools %}{{ t.function | tojson }}{% endfor %}<|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// openAI posts body to path with key and decodes the reply into v.
func openAI(t *testing.T, endpoint, key, body string, v any) {
	t.Helper()
	req, err := http.NewRequest("POST", endpoint, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	require.NoError(t, json.Unmarshal(data, v))
}

type openAIChat struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		Logprobs     struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// The endpoints that generate nothing: version (the pinned module's),
// tags, show and ps name the one model.
func TestOllamaClientModels(t *testing.T) {
	c, _, _ := ollamaClient(t, "")
	ctx := context.Background()

	v, err := c.Version(ctx)
	require.NoError(t, err)
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "\tgithub.com/ollama/ollama v"+v+"\n", "/api/version is the version of the Ollama API the server follows")

	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list.Models, 1)
	assert.Equal(t, "demo:latest", list.Models[0].Name)
	assert.Equal(t, "gguf", list.Models[0].Details.Format)

	ps, err := c.ListRunning(ctx)
	require.NoError(t, err)
	require.Len(t, ps.Models, 1)
	assert.Equal(t, "demo:latest", ps.Models[0].Model)
	assert.Equal(t, 256, ps.Models[0].ContextLength)

	for _, name := range []string{"demo", "demo:latest"} {
		show, err := c.Show(ctx, &api.ShowRequest{Model: name})
		require.NoError(t, err)
		assert.Equal(t, []model.Capability{"completion", "tools", "embedding"}, show.Capabilities)
		assert.Contains(t, show.Template, "<|im_start|>")
	}
	_, err = c.Show(ctx, &api.ShowRequest{Model: "llama3.2"})
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.Equal(t, "model 'llama3.2' not found", se.ErrorMessage)
}

// A chat, streamed (Ollama's default) and not, says what the same chat
// says through /v1/chat/completions, with its counts, done_reason and
// log-probabilities.
func TestOllamaClientChat(t *testing.T) {
	c, base, _ := ollamaClient(t, "")
	ctx := context.Background()
	msgs := []api.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}
	opts := map[string]any{"temperature": 0, "num_predict": 6}

	var want openAIChat
	openAI(t, base+"/v1/chat/completions", "", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"temperature":0,"max_tokens":6,"logprobs":true,"top_logprobs":2}`, &want)
	require.NotEmpty(t, want.Choices[0].Message.Content)

	var chunks []api.ChatResponse
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: msgs, Options: opts}, func(r api.ChatResponse) error {
		chunks = append(chunks, r)
		return nil
	}))
	require.Greater(t, len(chunks), 2, "streamed by default")
	var text strings.Builder
	for _, ch := range chunks[:len(chunks)-1] {
		assert.False(t, ch.Done)
		assert.Equal(t, "assistant", ch.Message.Role)
		text.WriteString(ch.Message.Content)
	}
	last := chunks[len(chunks)-1]
	assert.True(t, last.Done)
	assert.Equal(t, "length", last.DoneReason)
	assert.Equal(t, want.Choices[0].Message.Content, text.String())
	assert.Equal(t, want.Usage.PromptTokens, last.PromptEvalCount)
	assert.Equal(t, 6, last.EvalCount)
	assert.Positive(t, last.TotalDuration)
	assert.Positive(t, last.PromptEvalDuration)
	assert.Positive(t, last.EvalDuration)

	var whole []api.ChatResponse
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: msgs, Options: opts, Stream: ptr(false),
		Logprobs: true, TopLogprobs: 2}, func(r api.ChatResponse) error {
		whole = append(whole, r)
		return nil
	}))
	require.Len(t, whole, 1)
	assert.True(t, whole[0].Done)
	assert.Equal(t, want.Choices[0].Message.Content, whole[0].Message.Content)
	require.Len(t, whole[0].Logprobs, len(want.Choices[0].Logprobs.Content))
	for i, lp := range whole[0].Logprobs {
		assert.Equal(t, want.Choices[0].Logprobs.Content[i].Token, lp.Token)
		assert.InDelta(t, want.Choices[0].Logprobs.Content[i].Logprob, lp.Logprob, 1e-6)
		assert.Len(t, lp.TopLogprobs, 2)
	}

	// No messages: Ollama loads the model (and unloads it with keep_alive
	// 0); here it is always loaded.
	var load []api.ChatResponse
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo"}, func(r api.ChatResponse) error {
		load = append(load, r)
		return nil
	}))
	require.Len(t, load, 1)
	assert.Equal(t, "load", load[0].DoneReason)
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", KeepAlive: &api.Duration{}}, func(r api.ChatResponse) error {
		assert.Equal(t, "unload", r.DoneReason)
		return nil
	}))
}

// /api/generate: a prompt in the chat template as one user message (with
// system), or raw as it is, as /v1/chat/completions and /v1/completions
// say.
func TestOllamaClientGenerate(t *testing.T) {
	c, base, _ := ollamaClient(t, "")
	ctx := context.Background()
	opts := map[string]any{"temperature": 0, "num_predict": 5, "seed": 3}

	var chat, raw openAIChat
	openAI(t, base+"/v1/chat/completions", "", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Once upon"}],"temperature":0,"max_tokens":5}`, &chat)
	openAI(t, base+"/v1/completions", "", `{"prompt":"Once upon","temperature":0,"max_tokens":5}`, &raw)

	var text strings.Builder
	var last api.GenerateResponse
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "demo", System: "S", Prompt: "Once upon", Options: opts},
		func(r api.GenerateResponse) error {
			text.WriteString(r.Response)
			last = r
			return nil
		}))
	assert.Equal(t, chat.Choices[0].Message.Content, text.String())
	assert.True(t, last.Done)
	assert.Equal(t, chat.Usage.PromptTokens, last.PromptEvalCount)

	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "demo", Prompt: "Once upon", Raw: true, Stream: ptr(false), Options: opts},
		func(r api.GenerateResponse) error {
			last = r
			return nil
		}))
	assert.Equal(t, raw.Choices[0].Text, last.Response)
	assert.Equal(t, raw.Usage.PromptTokens, last.PromptEvalCount)
	assert.Equal(t, "length", last.DoneReason)

	// Without num_predict a raw generate runs to its end, as a chat (not
	// to the 16 tokens of a completion without max_tokens).
	var rawAll openAIChat
	openAI(t, base+"/v1/completions", "", `{"prompt":"Once upon","temperature":0,"max_tokens":256}`, &rawAll)
	require.Greater(t, rawAll.Usage.CompletionTokens, 16)
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "demo", Prompt: "Once upon", Raw: true, Stream: ptr(false),
		Options: map[string]any{"temperature": 0}}, func(r api.GenerateResponse) error {
		last = r
		return nil
	}))
	assert.Equal(t, rawAll.Choices[0].Text, last.Response)
	assert.Equal(t, rawAll.Usage.CompletionTokens, last.EvalCount)

	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "demo"}, func(r api.GenerateResponse) error {
		last = r
		return nil
	}))
	assert.Equal(t, "load", last.DoneReason)
}

// format "json" and a JSON schema constrain the reply as response_format
// does: a reply cut by num_predict is the start of a JSON object, a whole
// one is an object of the schema.
func TestOllamaClientFormat(t *testing.T) {
	c, _, _ := ollamaClient(t, "")
	ctx := context.Background()
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":0,"maximum":9}},"required":["city","n"],"additionalProperties":false}`
	chat := func(format string, n int) api.ChatResponse {
		var out api.ChatResponse
		require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Format: json.RawMessage(format), Stream: ptr(false),
			Messages: []api.Message{{Role: "user", Content: "A city?"}}, Options: map[string]any{"seed": 1, "num_predict": n}},
			func(r api.ChatResponse) error {
				out = r
				return nil
			}))
		return out
	}
	out := chat(`"json"`, 12)
	require.Equal(t, "length", out.DoneReason)
	require.True(t, strings.HasPrefix(out.Message.Content, "{"), out.Message.Content)
	var obj map[string]any
	err := json.Unmarshal([]byte(out.Message.Content), &obj)
	var se *json.SyntaxError
	require.ErrorAs(t, err, &se, "the start of an object, cut: %s", out.Message.Content)
	assert.Equal(t, "unexpected end of JSON input", se.Error())

	out = chat(schema, 200)
	require.Equal(t, "stop", out.DoneReason, out.Message.Content)
	require.NoError(t, json.Unmarshal([]byte(out.Message.Content), &obj), out.Message.Content)
	assert.IsType(t, "", obj["city"])
	assert.IsType(t, float64(0), obj["n"])
	assert.Len(t, obj, 2)
}

// A tool call round trip: the model's call (its output constrained to the
// plain JSON call format by a schema) comes back as tool_calls with
// arguments as an object; the call and its result sent back render the
// prompt that the same conversation renders through /v1/chat/completions.
func TestOllamaClientTools(t *testing.T) {
	c, base, _ := ollamaClient(t, "")
	ctx := context.Background()
	var tools api.Tools
	require.NoError(t, json.Unmarshal([]byte(`[{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"c":{"type":"string"}}}}}]`), &tools))
	callSchema := `{"type":"object","properties":{"name":{"const":"w"},"arguments":{"type":"object","properties":{"c":{"const":"P"}},"required":["c"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}`
	msgs := []api.Message{{Role: "user", Content: "Weather in Paris?"}}
	for _, stream := range []bool{false, true} {
		var calls []api.ToolCall
		var last api.ChatResponse
		require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: msgs, Tools: tools, Stream: &stream,
			Format: json.RawMessage(callSchema), Options: map[string]any{"seed": 3, "num_predict": 150}},
			func(r api.ChatResponse) error {
				calls = append(calls, r.Message.ToolCalls...)
				last = r
				return nil
			}))
		require.Len(t, calls, 1, "stream %v: %q %s %d", stream, last.Message.Content, last.DoneReason, last.EvalCount)
		assert.Equal(t, "w", calls[0].Function.Name)
		city, ok := calls[0].Function.Arguments.Get("c")
		assert.True(t, ok)
		assert.Equal(t, "P", city)
		assert.Equal(t, 0, calls[0].Function.Index)
		assert.Equal(t, "stop", last.DoneReason)
	}

	args := api.NewToolCallFunctionArguments()
	args.Set("c", "P")
	call := api.ToolCall{ID: "call_1", Function: api.ToolCallFunction{Name: "w", Arguments: args}}
	round := append(msgs, api.Message{Role: "assistant", ToolCalls: []api.ToolCall{call}},
		api.Message{Role: "tool", ToolName: "w", Content: `{"t": 21}`})
	var last api.ChatResponse
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: round, Tools: tools, Stream: ptr(false),
		Options: map[string]any{"temperature": 0, "num_predict": 3}}, func(r api.ChatResponse) error {
		last = r
		return nil
	}))
	var want openAIChat
	toolsJSON, err := json.Marshal(tools)
	require.NoError(t, err)
	openAI(t, base+"/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"c\":\"P\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"{\"t\": 21}"}],"tools":`+string(toolsJSON)+`,"temperature":0,"max_tokens":3}`, &want)
	assert.Equal(t, want.Usage.PromptTokens, last.PromptEvalCount)
	assert.Equal(t, want.Choices[0].Message.Content, last.Message.Content)
}

// Embeddings: /api/embed normalises them, /api/embeddings (the older
// endpoint) does not; the fake embedder's vector is [first token, length].
func TestOllamaClientEmbed(t *testing.T) {
	c, _, srv := ollamaClient(t, "")
	ctx := context.Background()
	inputs := []string{"Hello world", "a"}
	resp, err := c.Embed(ctx, &api.EmbedRequest{Model: "demo", Input: inputs})
	require.NoError(t, err)
	checkEmbeddings(t, srv, inputs, resp)

	old, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "demo", Prompt: "a"})
	require.NoError(t, err)
	toks, err := srv.cfg.Tokenizer.Tokenize("a", true, false)
	require.NoError(t, err)
	assert.Equal(t, []float64{float64(toks[0]), float64(len(toks))}, old.Embedding)
}

// checkEmbeddings checks the /api/embed reply of inputs: the fake
// embedder's [first token, length] of each, normalised.
func checkEmbeddings(t *testing.T, srv *Server, inputs []string, resp *api.EmbedResponse) {
	t.Helper()
	require.Len(t, resp.Embeddings, len(inputs))
	tokens := 0
	for i, in := range inputs {
		toks, err := srv.cfg.Tokenizer.Tokenize(in, true, false)
		require.NoError(t, err)
		tokens += len(toks)
		x, y := float64(toks[0]), float64(len(toks))
		n := math.Hypot(x, y)
		assert.InDeltaSlice(t, []float64{x / n, y / n}, []float64{float64(resp.Embeddings[i][0]), float64(resp.Embeddings[i][1])}, 1e-6)
	}
	assert.Equal(t, tokens, resp.PromptEvalCount)
}

// Errors come back in Ollama's shape ({"error": "..."}) with Ollama's
// statuses, so that its client reads them; the API key is required as a
// Bearer token.
func TestOllamaClientErrors(t *testing.T) {
	c, base, _ := ollamaClient(t, "sesame")
	ctx := context.Background()
	user := []api.Message{{Role: "user", Content: "Hi"}}
	nop := func(api.ChatResponse) error { return nil }
	for _, tc := range []struct {
		req    *api.ChatRequest
		status int
		msg    string
	}{
		{&api.ChatRequest{Model: "other", Messages: user}, 404, "model 'other' not found"},
		{&api.ChatRequest{Messages: user}, 400, "model is required"},
		{&api.ChatRequest{Model: "demo", Messages: user, Think: &api.ThinkValue{Value: true}}, 400, `"demo" does not support thinking`},
		{&api.ChatRequest{Model: "demo", Messages: user, Think: &api.ThinkValue{Value: "high"}}, 400, `think value "high" is not supported`},
		{&api.ChatRequest{Model: "demo", Messages: []api.Message{{Role: "user", Content: "Hi", Images: []api.ImageData{[]byte("x")}}}}, 400, "this model reads text only"},
		{&api.ChatRequest{Model: "demo", Messages: user, Options: map[string]any{"tfs_z": 1}}, 400, `unknown option "tfs_z"`},
		{&api.ChatRequest{Model: "demo", Messages: user, Options: map[string]any{"temperature": "hot"}}, 400, `option "temperature"`},
		{&api.ChatRequest{Model: "demo", Messages: user, Options: map[string]any{"temperature": 7}}, 400, "temperature 7: must be in [0, 2]"},
		{&api.ChatRequest{Model: "demo", Messages: user, Format: json.RawMessage(`"yaml"`)}, 400, `format "yaml": want "json" or a JSON schema`},
		{&api.ChatRequest{Model: "demo", Messages: user, Options: map[string]any{"repeat_penalty": -1}}, 400, "repeat_penalty"},
	} {
		err := c.Chat(ctx, tc.req, nop)
		var se api.StatusError
		require.ErrorAs(t, err, &se, "%+v", tc.req)
		assert.Equal(t, tc.status, se.StatusCode, se.ErrorMessage)
		assert.Contains(t, se.ErrorMessage, tc.msg)
	}
	err := c.Generate(ctx, &api.GenerateRequest{Model: "demo", Prompt: "x", Template: "{{ .Prompt }}"}, func(api.GenerateResponse) error { return nil })
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.ErrorMessage, "template: this server renders prompts with the model's own chat template")
	err = c.Generate(ctx, &api.GenerateRequest{Model: "demo", Prompt: "x", Raw: true, System: "s"}, func(api.GenerateResponse) error { return nil })
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "raw mode does not support template, system, or context", se.ErrorMessage)

	// The key, as Bearer: without it the client gets its AuthorizationError,
	// the body {"error": ...}.
	u, err := url.Parse(base)
	require.NoError(t, err)
	bare := api.NewClient(u, http.DefaultClient)
	_, err = bare.List(ctx)
	var ae api.AuthorizationError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode)
	resp, err := http.Get(base + "/api/tags")
	require.NoError(t, err)
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	assert.Contains(t, body["error"], "You didn't provide an API key")
	_, err = c.List(ctx)
	assert.NoError(t, err)
}

// What the model of thinkingHarness thinks and answers.
const thinkingText, thinkingAnswer = "Let me see.", "Paris, of course."

// thinkingHarness serves a model that thinks (its template has <think>
// markers) and writes <think>thinkingText</think>thinkingAnswer.
func thinkingHarness(t *testing.T) *harness {
	t.Helper()
	tmpl, err := NewChatTemplate(toolsTemplate+"{#- the model thinks between <think> and </think> #}", "<s>", "</s>")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: tmpl}, nil)
	h.model.SetScript(h.tok.Says("<think>" + thinkingText + "</think>" + thinkingAnswer))
	return h
}

// A model that thinks (its template has <think> markers): its reasoning
// comes back as thinking, apart from the content, streamed and not, on
// chat and generate; think false leaves it inline; show names the
// capability.
func TestOllamaClientThinking(t *testing.T) {
	h := thinkingHarness(t)
	const thinking, answer = thinkingText, thinkingAnswer
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	c := api.NewClient(u, http.DefaultClient)
	ctx := context.Background()

	show, err := c.Show(ctx, &api.ShowRequest{Model: "demo"})
	require.NoError(t, err)
	assert.Contains(t, show.Capabilities, model.Capability("thinking"))

	msgs := []api.Message{{Role: "user", Content: "The capital?"}}
	for _, think := range []*api.ThinkValue{nil, {Value: true}} {
		for _, stream := range []bool{false, true} {
			var content, thoughts strings.Builder
			var last api.ChatResponse
			require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: msgs, Think: think, Stream: &stream},
				func(r api.ChatResponse) error {
					content.WriteString(r.Message.Content)
					thoughts.WriteString(r.Message.Thinking)
					last = r
					return nil
				}))
			assert.Equal(t, thinking, thoughts.String(), "think %v, stream %v", think, stream)
			assert.Equal(t, answer, content.String())
			assert.Equal(t, "stop", last.DoneReason)
		}
	}
	var whole api.ChatResponse
	require.NoError(t, c.Chat(ctx, &api.ChatRequest{Model: "demo", Messages: msgs, Think: &api.ThinkValue{Value: false}, Stream: ptr(false)},
		func(r api.ChatResponse) error {
			whole = r
			return nil
		}))
	assert.Equal(t, "<think>"+thinking+"</think>"+answer, whole.Message.Content)
	assert.Empty(t, whole.Message.Thinking)

	var gen api.GenerateResponse
	require.NoError(t, c.Generate(ctx, &api.GenerateRequest{Model: "demo", Prompt: "The capital?", Think: &api.ThinkValue{Value: true}, Stream: ptr(false)},
		func(r api.GenerateResponse) error {
			gen = r
			return nil
		}))
	assert.Equal(t, thinking, gen.Thinking)
	assert.Equal(t, answer, gen.Response)
}

// Qwen 3's template and a call in its format: the reply's call comes back
// whole with its arguments as an object, beside the text before it,
// streamed and not.
func TestOllamaClientQwenCall(t *testing.T) {
	tmpl, err := NewChatTemplate(realTemplate(t, "Qwen3-8B-Q8_0.jinja"), "<s>", "</s>")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{SequenceSize: 4096, ChatTemplate: tmpl}, nil)
	h.model.SetScript(h.tok.Says("Let me see.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"))
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	c := api.NewClient(u, http.DefaultClient)
	var tools api.Tools
	require.NoError(t, json.Unmarshal([]byte(`[{"type":"function","function":{"name":"get_weather",
		"parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}]`), &tools))
	for _, stream := range []bool{false, true} {
		var content strings.Builder
		var calls []api.ToolCall
		var last api.ChatResponse
		require.NoError(t, c.Chat(context.Background(), &api.ChatRequest{Model: "demo", Tools: tools, Stream: &stream,
			Messages: []api.Message{{Role: "user", Content: "Weather in Paris?"}}}, func(r api.ChatResponse) error {
			content.WriteString(r.Message.Content)
			calls = append(calls, r.Message.ToolCalls...)
			last = r
			return nil
		}))
		assert.Equal(t, "Let me see.", strings.TrimSpace(content.String()), "stream %v", stream)
		require.Len(t, calls, 1)
		assert.Equal(t, "get_weather", calls[0].Function.Name)
		assert.Equal(t, `{"city":"Paris","days":2}`, calls[0].Function.Arguments.String())
		assert.NotEmpty(t, calls[0].ID)
		assert.Equal(t, "stop", last.DoneReason)
		assert.True(t, last.Done)
	}
}

// A stream that Abort cuts ends with an {"error": ...} line, which
// Ollama's client returns as the stream's error.
func TestOllamaAbortEndsStream(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	steps := 0
	h.model.SetBeforeEval(func() {
		if steps++; steps == 2 {
			<-release
		}
	})
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	c := api.NewClient(u, http.DefaultClient)
	chunks := 0
	err = c.Chat(context.Background(), &api.ChatRequest{Model: "demo", Messages: []api.Message{{Role: "user", Content: "Hi"}},
		Options: map[string]any{"num_predict": 100, "temperature": 0}}, func(r api.ChatResponse) error {
		if chunks++; chunks == 1 {
			h.srv.Abort()
		}
		return nil
	})
	require.Error(t, err)
	assert.Equal(t, "the server is shutting down: the request was cut", err.Error())
	assert.Equal(t, 1, chunks)
}

// Ollama's requests have the bounds of chat and embeddings requests: the
// body, the tools, the format's schema, the embeddings' inputs.
func TestOllamaBounds(t *testing.T) {
	h := newHarness(t, 1, Config{MaxBodyBytes: 4096, Embedder: &fakeEmbedder{},
		Limits: Limits{MaxTools: 1, MaxSchemaBytes: 64, MaxEmbeddingInputs: 2}}, nil)
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	c := api.NewClient(u, http.DefaultClient)
	ctx := context.Background()
	user := []api.Message{{Role: "user", Content: "Hi"}}
	var tools api.Tools
	require.NoError(t, json.Unmarshal([]byte(`[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},
		{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}]`), &tools))
	big := `{"type":"object","properties":{"a_long_property_name":{"type":"string"},"another":{"type":"integer"}}}`
	for _, tc := range []struct {
		req    *api.ChatRequest
		status int
		msg    string
	}{
		{&api.ChatRequest{Model: "demo", Messages: user, Tools: tools}, 400, "2 tools: a request takes at most 1 (llamaserve --max-tools)"},
		{&api.ChatRequest{Model: "demo", Messages: user, Format: json.RawMessage(big)}, 400, "more than the 64 a request may have (llamaserve --max-schema-bytes)"},
		{&api.ChatRequest{Model: "demo", Messages: []api.Message{{Role: "user", Content: strings.Repeat("x", 5000)}}}, 413, "the body is larger than 4096 bytes"},
	} {
		err := c.Chat(ctx, tc.req, func(api.ChatResponse) error { return nil })
		var se api.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, tc.status, se.StatusCode)
		assert.Contains(t, se.ErrorMessage, tc.msg)
	}
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "demo", Input: []string{"a", "b", "c"}})
	var se api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.StatusCode)
	assert.Equal(t, "3 inputs: a request takes at most 2 (llamaserve --max-embedding-inputs)", se.ErrorMessage)
}

// think reaches the template as enable_thinking (false: Qwen 3's template
// closes the thinking before the model writes), and an assistant's earlier
// thinking as its reasoning_content.
func TestOllamaThinkReachesTemplate(t *testing.T) {
	tmpl, err := NewChatTemplate(`{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}`, "<s>", "</s>")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: tmpl}, nil)
	var seen string
	h.model.SetScript(h.tok.Replies(func(prompt string) string { seen = prompt; return "ok" }))
	u, err := url.Parse(h.ts.URL)
	require.NoError(t, err)
	c := api.NewClient(u, http.DefaultClient)
	msgs := []api.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Thinking: "A greeting.", Content: "Hello"},
		{Role: "user", Content: "Bye"}}
	for _, think := range []bool{false, true} {
		require.NoError(t, c.Chat(context.Background(), &api.ChatRequest{Model: "demo", Messages: msgs, Think: &api.ThinkValue{Value: think},
			Stream: ptr(false)}, func(api.ChatResponse) error { return nil }))
		// (the prompt as the script reads it back: the demo's pieces of
		// special tokens end with a space)
		assert.Contains(t, seen, "<|im_start|> assistant\n<think>A greeting.</think>Hello<|im_end|>")
		assert.Equal(t, !think, strings.HasSuffix(seen, "<|im_start|> assistant\n<think>\n\n</think>\n\n"), "think %v: %q", think, seen)
	}
}
