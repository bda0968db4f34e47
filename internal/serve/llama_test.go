//go:build cgo

package serve

// The tests that need llama.cpp itself: the server on the demo model
// through llama.cpp, which the Go demo of harness_test.go must answer
// alike, and llama.cpp's own tokenization of chats.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var demoPath = sync.OnceValues(func() (string, error) {
	d, err := testmodel.NewDemo()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "serve-test")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "demo.gguf")
	return path, d.Write(path)
})

// newLlamaServer serves the demo model through llama.cpp: an engine of
// slots sequences of seqTokens tokens.
func newLlamaServer(t *testing.T, slots int, cfg Config) (*httptest.Server, *generation.Engine) {
	t.Helper()
	path, err := demoPath()
	require.NoError(t, err)
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	c, err := m.NewContext(llamacpp.ContextParams{ContextSize: seqTokens * slots, Sequences: slots, Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	b, err := llamabackend.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	tok := llamabackend.Tokenizer{Vocab: m.Vocab()}
	e, err := generation.NewEngine(b, tok, generation.EngineOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	cfg.Engine, cfg.Tokenizer, cfg.ModelID, cfg.SequenceSize = e, tok, "demo", b.Room(0)
	srv := New(cfg)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, e
}

// On benign chats (with tools and calls, and without), every real template
// gives the ids it gave before: the rendered text tokenized whole with
// special-token parsing, on the demo vocabulary (whose ChatML markers the
// Qwen templates write).
func TestBenignChatsTokenizeAsBefore(t *testing.T) {
	tok := llamaTokenizer(t)
	names, err := filepath.Glob(filepath.Join(realTemplates, "*.jinja"))
	require.NoError(t, err)
	srcs := map[string]string{"hermes": hermesTemplate, "chatml": testmodel.ChatMLTemplate}
	for _, n := range names {
		data, err := os.ReadFile(n)
		require.NoError(t, err)
		srcs[filepath.Base(n)] = string(data)
	}
	compared := 0
	for name, src := range srcs {
		tmpl, err := NewChatTemplate(src, "<s>", "</s>")
		require.NoError(t, err)
		p := &params{chat: tmpl, tok: tok}
		for _, tc := range []struct {
			msgs  []chatMessage
			tools string
		}{{toolChat[:2], ""}, {toolChat, weatherTools},
			{[]chatMessage{{Role: "user", Content: "  Hello <s> world  "}, {Role: "assistant", Content: "x"}, {Role: "user", Content: "y\n"}}, ""}} {
			var tools []byte
			if tc.tools != "" {
				tools = []byte(tc.tools)
			}
			text, err := tmpl.render(context.Background(), templateMessages(tc.msgs), tools, true)
			if err != nil {
				continue // the template refuses this chat
			}
			want, err := tok.Tokenize(text, false, true)
			require.NoError(t, err)
			got, err := p.renderChat(context.Background(), tc.msgs, tools, false)
			if strings.Contains(tc.msgs[0].Content, "<s>") {
				// "<s>" is the BOS control token's text: kept as text
				// where the template can be followed, refused otherwise.
				if err != nil {
					assert.Contains(t, err.Error(), `holds the text of the control token "<s>"`, name)
				} else {
					assert.NotEqual(t, want, got, name)
				}
				continue
			}
			require.NoError(t, err, name)
			assert.Equal(t, want, got, "%s: %d messages", name, len(tc.msgs))
			compared++
		}
	}
	t.Logf("%d benign chats compared over %d templates", compared, len(srcs))
	// Some templates refuse a chat here: Gemma 2's a system message,
	// firefunction's any chat without its functions, Mistral's a call id
	// that is not 9 alphanumerics.
	assert.Greater(t, compared, 2*len(srcs)-10)
}

// llamaTokenizer is llama.cpp's tokenizer of the demo model.
func llamaTokenizer(t *testing.T) llamabackend.Tokenizer {
	t.Helper()
	path, err := demoPath()
	require.NoError(t, err)
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{VocabOnly: true}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return llamabackend.Tokenizer{Vocab: m.Vocab()}
}

// A client that leaves frees its sequence of llama.cpp too.
func TestDisconnectsFreeEverythingLlama(t *testing.T) {
	disconnectsFreeEverything(t, newLlamaServer)
}

// The Go demo the other tests run on answers as llama.cpp's demo does:
// the same texts, tokens, finish reasons and usage, and log-probabilities
// within 1e-3, for completions and chats, whole and streamed, and the
// Responses API (ids and times aside).
func TestGoDemoAnswersAsLlamaCpp(t *testing.T) {
	llama, _ := newLlamaServer(t, 2, Config{})
	goDemo, _ := newServer(t, 2, Config{})
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"The model","max_tokens":12,"temperature":0,"logprobs":3,"logit_bias":{"2":-100}}`},
		{"/v1/completions", `{"prompt":["The model","A token"],"max_tokens":6,"temperature":0,"stream":true,"stop":["ing"]}`},
		{"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":10,"temperature":0,"logprobs":true,"top_logprobs":2}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/responses", `{"input":"Hello","max_output_tokens":8,"temperature":0}`},
		{"/v1/responses", `{"input":"Hello","max_output_tokens":5,"temperature":0,"stream":true}`},
		{"/tokenize", `{"content":"Hello <|im_end|> world","with_pieces":true}`},
	} {
		want, got := byChoice(replyValues(t, llama.URL+tc.path, tc.body)), byChoice(replyValues(t, goDemo.URL+tc.path, tc.body))
		require.Equal(t, len(want), len(got), "%s %s", tc.path, tc.body)
		for i := range want {
			sameValue(t, want[i], got[i], tc.path+" "+tc.body)
		}
	}
}

// replyValues posts body and returns the reply's JSON values: the body, or
// each event of a stream.
func replyValues(t *testing.T, url, body string) []any {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, body)
	var out []any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range events(t, resp.Body) {
			var v any
			if ev != "[DONE]" {
				require.NoError(t, json.Unmarshal([]byte(ev), &v), ev)
			}
			out = append(out, v)
		}
		return out
	}
	var v any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return append(out, v)
}

// byChoice orders the events of a stream by their choice, keeping each
// choice's order: the choices of a request stream side by side in any
// interleaving.
func byChoice(evs []any) []any {
	index := func(ev any) float64 {
		m, _ := ev.(map[string]any)
		cs, _ := m["choices"].([]any)
		if len(cs) == 0 {
			return math.Inf(1)
		}
		c, _ := cs[0].(map[string]any)
		i, _ := c["index"].(float64)
		return i
	}
	slices.SortStableFunc(evs, func(a, b any) int { return cmp.Compare(index(a), index(b)) })
	return evs
}

// sameValue compares two JSON values: numbers within 1e-3, ids and times
// left out.
func sameValue(t *testing.T, want, got any, where string) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !assert.True(t, ok, "%s: %v, want an object", where, got) {
			return
		}
		assert.Equal(t, len(w), len(g), "%s: keys of %v and %v", where, w, g)
		for k, wv := range w {
			if k == "id" || strings.HasSuffix(k, "_id") || strings.HasPrefix(k, "created") {
				continue
			}
			sameValue(t, wv, g[k], where+"."+k)
		}
	case []any:
		g, ok := got.([]any)
		if !assert.True(t, ok, "%s: %v, want an array", where, got) || !assert.Len(t, g, len(w), where) {
			return
		}
		for i := range w {
			sameValue(t, w[i], g[i], fmt.Sprintf("%s[%d]", where, i))
		}
	case float64:
		assert.InDelta(t, w, got, 1e-3, where)
	default:
		assert.Equal(t, want, got, where)
	}
}
