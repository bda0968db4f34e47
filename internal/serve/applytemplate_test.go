package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/jinja"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyTemplate posts body to /apply-template and returns the prompt and
// the template that rendered it.
func applyTemplate(t *testing.T, url, body string) (prompt, template string) {
	t.Helper()
	resp := post(t, url+"/apply-template", body)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]string
	require.NoError(t, json.Unmarshal(data, &out))
	require.Len(t, out, 1, "the reply is {\"prompt\": ...}")
	assert.NotContains(t, string(data), `\u003c`, "markers are not escaped as HTML")
	return out["prompt"], resp.Header.Get("X-Chat-Template")
}

const chatBody = `{"model":"demo","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"temperature":0.5,"stream":true}`

// The prompt of a chat, by the model's Jinja template or llama.cpp's
// built-in one (both ChatML here, written out by hand), with the
// generation's fields accepted.
func TestApplyTemplate(t *testing.T) {
	const want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	chatml, err := NewChatTemplate(testmodel.ChatMLTemplate, "<s>", "</s>")
	require.NoError(t, err)
	for tmpl, cfg := range map[string]Config{"jinja": {ChatTemplate: chatml}, "builtin": {}} {
		h := newHarness(t, 1, cfg, nil)
		prompt, used := applyTemplate(t, h.ts.URL, chatBody)
		assert.Equal(t, want, prompt, tmpl)
		assert.Equal(t, tmpl, used)
	}
	// A template that fails on a chat falls back to the built-in one, as
	// the chat endpoint does.
	failing, err := NewChatTemplate(`{{ raise_exception("no system role") }}`, "", "")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: failing}, nil)
	prompt, used := applyTemplate(t, h.ts.URL, chatBody)
	assert.Equal(t, want, prompt)
	assert.Equal(t, "builtin", used)
}

// chat_template_kwargs reach the template: Qwen 3's closes the thinking
// in the prompt when enable_thinking is false.
func TestApplyTemplateThinking(t *testing.T) {
	qwen3, err := NewChatTemplate(realTemplate(t, "Qwen3-8B-Q8_0.jinja"), "<s>", "</s>")
	require.NoError(t, err)
	h := newHarness(t, 1, Config{ChatTemplate: qwen3}, nil)
	const ask = `{"messages":[{"role":"user","content":"Hi"}]`
	prompt, _ := applyTemplate(t, h.ts.URL, ask+`}`)
	assert.True(t, strings.HasSuffix(prompt, "<|im_start|>assistant\n"), "%q", prompt)
	prompt, _ = applyTemplate(t, h.ts.URL, ask+`,"chat_template_kwargs":{"enable_thinking":false}}`)
	assert.True(t, strings.HasSuffix(prompt, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), "%q", prompt)
	resp := post(t, h.ts.URL+"/apply-template", ask+`,"chat_template_kwargs":{"colour":1}}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp.Body.Close()
}

// The prompt /apply-template returns is the one a chat request with the
// same body feeds the model, tools and all: the model here writes back
// the text of the prompt it was given.
func TestApplyTemplateIsThePrompt(t *testing.T) {
	qwen3, err := NewChatTemplate(realTemplate(t, "Qwen3-8B-Q8_0.jinja"), "<s>", "</s>")
	require.NoError(t, err)
	for name, cfg := range map[string]Config{"qwen3": {ChatTemplate: qwen3}, "builtin": {}} {
		cfg.SequenceSize = 4096
		h := newHarness(t, 1, cfg, nil)
		var seen string
		h.model.SetScript(h.tok.Replies(func(prompt string) string { seen = prompt; return "ok" }))
		body := `{"messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"18 C"}],"tools":` + weatherTools + `,"max_tokens":2}`
		prompt, _ := applyTemplate(t, h.ts.URL, body)
		assert.Contains(t, prompt, "get_weather", name)
		assert.Contains(t, prompt, "18 C", name)
		resp := post(t, h.ts.URL+"/v1/chat/completions", body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// The model sees the prompt's tokens: its text as the tokenizer
		// reads it (a space before each text after a control token).
		toks, err := h.tok.Tokenize(prompt, false, true)
		require.NoError(t, err)
		assert.Equal(t, h.tok.Text(toks), seen, name)
	}
}

// /apply-template is bounded as a chat request is: the body's size, its
// Content-Type, the fields and messages checked, the tools' number, the
// template's limits, and a sequence counted against MaxConcurrent.
func TestApplyTemplateBounds(t *testing.T) {
	hostile, err := NewChatTemplateLimits("{{ messages[0].content * 10000000000 }}", "", "", jinja.Limits{})
	require.NoError(t, err)
	h := newHarness(t, 1, Config{MaxBodyBytes: 4096, ChatTemplate: hostile, Limits: Limits{MaxTools: 2}}, nil)
	url := h.ts.URL + "/apply-template"
	for _, tc := range []struct {
		body         string
		status       int
		param, inMsg string
	}{
		{`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "", "larger than 4096 bytes"},
		{`{"messages":[]}`, 400, "messages", "messages is required"},
		{`{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages[0].role", "is not system"},
		{`{"messages":[{"role":"user","content":"x"}],"colour":1}`, 400, "colour", `unknown field "colour"`},
		{`{"messages":[{"role":"user","content":"x"}],"tools":` + toolsJSON(3) + `}`, 400, "tools", "3 tools"},
		{`{"messages":[{"role":"user","content":"x"}]}`, 500, "", "chat_template_limit"},
	} {
		resp := post(t, url, tc.body)
		assert.Equal(t, tc.status, resp.StatusCode, tc.body)
		e := errorOf(t, resp)
		if tc.param != "" {
			require.NotNil(t, e.Error.Param, tc.body)
			assert.Equal(t, tc.param, *e.Error.Param)
		}
		msg := e.Error.Message
		if e.Error.Code != nil {
			msg += " " + *e.Error.Code
		}
		assert.Contains(t, msg, tc.inMsg)
	}
	resp, err := http.Post(url, "text/plain", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	resp.Body.Close()
	resp, err = http.Get(url)
	require.NoError(t, err)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp.Body.Close()

	// While a render runs, it holds one of the MaxConcurrent sequences.
	started, proceed := make(chan struct{}), make(chan struct{})
	slow, err := NewChatTemplate("{{ wait() }}"+testmodel.ChatMLTemplate, "", "")
	require.NoError(t, err)
	slow.t.SetGlobals(map[string]jinja.Value{"wait": jinja.NewFunc("wait", func(*jinja.Call) (jinja.Value, error) {
		close(started)
		<-proceed
		return jinja.NewString(""), nil
	})})
	h = newHarness(t, 1, Config{MaxConcurrent: 1, ChatTemplate: slow}, nil)
	done := make(chan int)
	go func() {
		resp, err := http.Post(h.ts.URL+"/apply-template", "application/json", strings.NewReader(chatBody))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-started
	resp = post(t, h.ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resp.Body.Close()
	close(proceed)
	assert.Equal(t, http.StatusOK, <-done)
	assert.Zero(t, h.srv.inFlight.Load())
}
