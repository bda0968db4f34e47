package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model whose template fails on the start-up check (a macro calling
// itself) is served with llama.cpp's built-in template (here ChatML, which
// llama.cpp recognises in the template's markers), and the start line
// says why; --template-limits sets the limits by name.
func TestHostileTemplateAtStartup(t *testing.T) {
	s := startServer(t, "-m", familyModel(t, "hostile", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"+
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "--template-limits", "MaxCallDepth=7")
	assert.Contains(t, s.log(), "chat template: llama.cpp's built-in (the model's Jinja template fails on a one-message test chat: jinja: template exceeded MaxCallDepth (7 nested macro calls))")
	resp, err := http.Post(s.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, "builtin", resp.Header.Get("X-Chat-Template"))

	// Without markers llama.cpp knows, there is no built-in to fall back
	// to: chat requests get a 400 that says so.
	s = startServer(t, "-m", familyModel(t, "hostile2", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"))
	assert.Contains(t, s.log(), "exceeded MaxCallDepth (100 nested macro calls)")
	resp, err = http.Post(s.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(b), "chat template not recognised by llama.cpp")
}

// A template that passes the start-up check but goes over a limit on a
// request gets a 500 chat_template_limit naming it; the server goes on.
func TestTemplateLimitOnRequest(t *testing.T) {
	s := startServer(t, "-m", familyModel(t, "long", "{% for m in messages %}{{ m.content * 100 }}{% endfor %}"),
		"--template-limits", "MaxValueBytes=1000")
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 20) + `"}],"max_tokens":2}`
	resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"chat_template_limit"`)
	assert.Contains(t, string(b), "jinja: template exceeded MaxValueBytes (1000 bytes in one value)")
	resp, err = http.Post(s.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
