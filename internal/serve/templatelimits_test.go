package serve

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/internal/jinja"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileLimits keeps the hostile renders short on a loaded machine:
// the bounds are those of the defaults, with fewer steps.
var hostileLimits = jinja.Limits{MaxSteps: 200_000}

// Every template of the hostile corpus ends in an error when the server
// renders a chat with it (at compile time, or at render time), and an
// error of a limit becomes a 500 chat_template_limit naming it.
func TestHostileTemplatesThroughChatTemplate(t *testing.T) {
	names, err := filepath.Glob("../jinja/testdata/hostile/*.jinja")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(names), 67)
	limits := 0
	for _, name := range names {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		tmpl, err := NewChatTemplateLimits(string(src), "<s>", "</s>", hostileLimits)
		if err == nil {
			_, err = tmpl.render(context.Background(), templateMessages(toolChat), []byte(weatherTools), true)
		}
		if err == nil {
			continue // harmless here (internal/jinja's test says why)
		}
		var le *jinja.LimitError
		if errors.As(err, &le) {
			limits++
			re := templateError(err)
			require.NotNil(t, re, filepath.Base(name))
			assert.Equal(t, http.StatusInternalServerError, re.status)
			assert.Equal(t, "chat_template_limit", re.code)
			assert.Contains(t, re.msg, le.Limit)
		} else {
			assert.Nil(t, templateError(err), "%s: %v", filepath.Base(name), err)
		}
	}
	assert.GreaterOrEqual(t, limits, 60)
}

// Check refuses at load a template that fails on the one-message chat,
// or goes over a limit with a tool; a real template passes.
func TestChatTemplateCheck(t *testing.T) {
	for _, src := range []string{
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"{{ raise_exception('no') }}",
		"{% for t in tools %}{{ 'ab' * 100000000 }}{% endfor %}",
	} {
		tmpl, err := NewChatTemplateLimits(src, "", "", hostileLimits)
		require.NoError(t, err)
		assert.Error(t, tmpl.Check(), src)
	}
	tmpl, err := NewChatTemplate(realTemplate(t, "meta-llama-Llama-3.2-3B-Instruct.jinja"), "<|begin_of_text|>", "<|eot_id|>")
	require.NoError(t, err)
	assert.NoError(t, tmpl.Check())
}

// A render that does not end stops when its request's context ends, with
// the context's error.
func TestChatTemplateRenderStopsWithContext(t *testing.T) {
	tmpl, err := NewChatTemplateLimits("{{ cancel() }}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "", "",
		jinja.Limits{MaxSteps: 1 << 62, MaxAllocBytes: 1 << 50})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	tmpl.globals = map[string]jinja.Value{"cancel": jinja.NewFunc("cancel", func(*jinja.Call) (jinja.Value, error) {
		cancel() // the client leaves once the render has started
		return jinja.NewString(""), nil
	})}
	_, err = tmpl.render(ctx, templateMessages(toolChat[:2]), nil, true)
	require.ErrorIs(t, err, context.Canceled)
	re := templateError(err)
	require.NotNil(t, re)
	assert.Equal(t, http.StatusServiceUnavailable, re.status)
}

// While a chat request's render runs (a template that would not end for
// hours), a neighbour is served; when the chat's client leaves, the
// render stops (the server's Close, at the test's end, waits for it).
func TestHostileTemplateServerGoesOn(t *testing.T) {
	tmpl, err := NewChatTemplateLimits("{{ started() }}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "", "",
		jinja.Limits{MaxSteps: 1 << 62, MaxAllocBytes: 1 << 50})
	require.NoError(t, err)
	started := make(chan struct{}, 2)
	tmpl.globals = map[string]jinja.Value{"started": jinja.NewFunc("started", func(c *jinja.Call) (jinja.Value, error) {
		started <- struct{}{}
		return jinja.NewString(""), nil
	})}
	ts, _ := newServer(t, 1, Config{ChatTemplate: tmpl})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started // the hostile render runs

	resp := post(t, ts.URL+"/v1/completions", `{"prompt":"Hello","max_tokens":2}`)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the neighbour is served")
	select {
	case err := <-done:
		t.Fatalf("the hostile request ended before its client left: %v", err)
	default:
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// When the server aborts (SIGTERM past --shutdown-timeout), a render that
// does not end stops with it.
func TestHostileTemplateStopsOnAbort(t *testing.T) {
	tmpl, err := NewChatTemplateLimits("{{ started() }}{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "", "",
		jinja.Limits{MaxSteps: 1 << 62, MaxAllocBytes: 1 << 50})
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	tmpl.globals = map[string]jinja.Value{"started": jinja.NewFunc("started", func(c *jinja.Call) (jinja.Value, error) {
		started <- struct{}{}
		return jinja.NewString(""), nil
	})}
	ts, srv, _ := newServerOf(t, 1, Config{ChatTemplate: tmpl})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-started
	srv.Abort()
	assert.Equal(t, http.StatusServiceUnavailable, <-done)
}

// A template over a limit answers 500 chat_template_limit naming it.
func TestTemplateLimitReply(t *testing.T) {
	tmpl, err := NewChatTemplateLimits("{{ messages[0].content * 10000000000 }}", "", "", jinja.Limits{})
	require.NoError(t, err)
	ts, _ := newServer(t, 1, Config{ChatTemplate: tmpl})
	resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	e := errorOf(t, resp)
	require.NotNil(t, e.Error.Code)
	assert.Equal(t, "chat_template_limit", *e.Error.Code)
	assert.Contains(t, e.Error.Message, "jinja: template exceeded MaxValueBytes (16777216 bytes in one value)")
	resp = post(t, ts.URL+"/v1/completions", `{"prompt":"Hello","max_tokens":2}`)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
