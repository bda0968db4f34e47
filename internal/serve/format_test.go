package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/testhook"

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

// TestHostileSchemaBesideOthers runs the overlapping recursive anyOf schema
// of issue 26 with a logit_bias that forces "[" (which grew llamaserve to
// 4.1 GB and held a concurrent 2-token request for 48.6 s) beside plain
// requests: each plain one finishes promptly, the hostile one ends at its
// max_tokens, and the heap stays small.
func TestHostileSchemaBesideOthers(t *testing.T) {
	ts, e := newServer(t, 2, Config{})
	resp := post(t, ts.URL+"/tokenize", `{"content":"a[","with_pieces":true}`)
	var tk struct {
		Tokens []struct {
			ID    int32
			Piece string
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tk))
	resp.Body.Close()
	bracket := tk.Tokens[len(tk.Tokens)-1]
	require.Equal(t, "[", bracket.Piece)
	schema := `{"$defs":{"a":{"type":"array","items":{"$ref":"#"}},"b":{"type":"array","items":{"$ref":"#"},"maxItems":9}},` +
		`"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}`
	hostile := fmt.Sprintf(`{"prompt":"x","max_tokens":200,"logit_bias":{"%d":100},"response_format":{"type":"json_schema","json_schema":{"name":"h","schema":%s}}}`, bracket.ID, schema)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// While the plain requests run, the engine's loop generates no token
	// with one request alone until the hostile one is answered: it waits
	// after each token until a plain one is running or waiting. The
	// hostile one so takes a few tokens per plain one, and is still running
	// when the fifth is answered, unless the plain ones waited for its end.
	var neighbours, hostileAnswered atomic.Bool
	neighbours.Store(true)
	unset := testhook.SetGenerated(func() {
		for neighbours.Load() && !hostileAnswered.Load() {
			if st := e.Stats(); st.Active+st.Waiting >= 2 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	defer unset()
	defer neighbours.Store(false) // first: a failure must free the loop
	done := make(chan *http.Response, 1)
	go func() {
		resp := post(t, ts.URL+"/v1/completions", hostile)
		hostileAnswered.Store(true)
		done <- resp
	}()
	for range 5 {
		resp := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","max_tokens":2}`)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	select {
	case <-done:
		require.Fail(t, "the plain requests were answered only after the hostile one")
	default:
	}
	neighbours.Store(false)
	resp = <-done
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	assert.Equal(t, "length", out.Choices[0].FinishReason)
	assert.Equal(t, strings.Repeat("[", 200), out.Choices[0].Text)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(256<<20))
}

// TestBudgetErrorIsBadRequest: a generation that failed on its grammar's
// budget is the request's fault (400, code grammar_budget_exceeded); any
// other failure is the server's.
func TestBudgetErrorIsBadRequest(t *testing.T) {
	g, err := grammar.Parse(`root ::= "a"`)
	require.NoError(t, err)
	v, err := grammar.NewVocabulary([][]byte{[]byte("a")}, nil)
	require.NoError(t, err)
	m := grammar.NewMatcher(g, v)
	s := &Server{}
	e := s.choiceError("test", m.Err(-1))
	assert.Equal(t, http.StatusBadRequest, e.status)
	assert.Equal(t, "grammar_budget_exceeded", e.code)
	assert.Contains(t, e.msg, "Options.StepWork")
	assert.Equal(t, http.StatusInternalServerError, s.choiceError("test", errors.New("x")).status)
}
