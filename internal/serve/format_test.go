package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponseFormat samples constrained replies of the demo model, whose
// unconstrained output is prose: every reply of a json_schema request is a
// document of its schema and every reply of a json_object request an object;
// bad formats are 400 with the schema's own message.
func TestResponseFormat(t *testing.T) {
	ts, _ := newServer(t, 4, Config{})
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":-5,"maximum":99},
		"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name","n"]}`
	type choice struct{ text, finish string }
	chat := func(format string, seed int) []choice {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Give JSON"}],"max_tokens":200,"temperature":1,"seed":%d,"n":4,"response_format":%s}`, seed, format)
		resp := post(t, ts.URL+"/v1/chat/completions", body)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
		var r struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		require.NoError(t, json.Unmarshal(data, &r))
		require.Len(t, r.Choices, 4)
		out := make([]choice, len(r.Choices))
		for i, c := range r.Choices {
			out[i] = choice{c.Message.Content, c.FinishReason}
		}
		return out
	}
	for seed := range 5 {
		for _, c := range chat(`{"type":"json_schema","json_schema":{"name":"doc","schema":`+schema+`}}`, seed*4) {
			text := c.text
			require.Equal(t, "stop", c.finish, "a bounded document ends before max_tokens: %q", text)
			var doc map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(text), &doc), text)
			var name string
			require.NoError(t, json.Unmarshal(doc["name"], &name), text)
			assert.LessOrEqual(t, len([]rune(name)), 8, text)
			var n int
			require.NoError(t, json.Unmarshal(doc["n"], &n), text)
			assert.True(t, n >= -5 && n <= 99, text)
			for k := range doc {
				assert.Contains(t, []string{"name", "n", "tags"}, k, text)
			}
		}
	}

	// json_object: an object, whatever its keys (its nesting is not
	// bounded, so a reply may also stop at max_tokens, cut short).
	stopped := 0
	for seed := range 3 {
		for _, c := range chat(`{"type":"json_object"}`, 100+seed*4) {
			require.NotEmpty(t, c.text)
			assert.Equal(t, byte('{'), c.text[0], c.text)
			if c.finish == "stop" {
				stopped++
				var obj map[string]any
				assert.NoError(t, json.Unmarshal([]byte(c.text), &obj), c.text)
			}
		}
	}
	t.Logf("json_object: %d of 12 replies complete within 200 tokens", stopped)

	for _, c := range []struct{ format, msg string }{
		{`{"type":"yaml"}`, `response_format type "yaml": want text, json_object or json_schema`},
		{`{"type":"json_schema"}`, `response_format json_schema needs json_schema.schema`},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","not":{"const":3}}}}`,
			`response_format: json schema at /: keyword "not" is not supported (the grammar cannot express it)`},
	} {
		resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":`+c.format+`}`)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, c.format)
		e := errorOf(t, resp)
		assert.Equal(t, c.msg, e.Error.Message, c.format)
		require.NotNil(t, e.Error.Param, c.format)
		assert.Equal(t, "response_format", *e.Error.Param, c.format)
	}
}
