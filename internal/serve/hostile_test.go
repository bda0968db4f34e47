package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scores that leave no token (every token suppressed, or a JSON grammar
// whose every token is banned too) are the request's error, 400, on chat,
// completions and the Responses API; streamed, the error event says so.
func TestNoTokenLeftIs400(t *testing.T) {
	ts, e := newServer(t, 1, Config{})
	var all strings.Builder
	for i := range e.VocabSize() {
		if i > 0 {
			all.WriteString(",")
		}
		fmt.Fprint(&all, i)
	}
	suppress := `"suppress_tokens":[` + all.String() + `]`
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,` + suppress + `}`},
		{"/v1/completions", `{"prompt":"The model","max_tokens":2,` + suppress + `}`},
		{"/v1/responses", `{"input":"hi","max_output_tokens":2,` + suppress + `}`},
	} {
		resp := post(t, ts.URL+tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.path)
		e := errorOf(t, resp)
		assert.Equal(t, "invalid_request_error", e.Error.Type)
		assert.Contains(t, e.Error.Message, "the request leaves no token to choose", tc.path)
		assert.Contains(t, e.Error.Message, "every score is -inf", tc.path)
	}
	resp := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,`+suppress+`}`)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"type":"invalid_request_error"`)
	assert.Contains(t, string(data), "the request leaves no token to choose")
}

// A chunked body whose chunk length is not hex is a 400 with an error, not
// an empty 200.
func TestMalformedChunkedBody(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\nZZ\r\nmpt\"\r\n0\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	e := errorOf(t, resp)
	assert.Contains(t, e.Error.Message, "the body cannot be read")
	assert.Contains(t, e.Error.Message, "invalid byte in chunk length")
}

// The bounds of the command line hold for the same fields of a request:
// genconfig.Validate applies them on every path.
func TestRequestBounds(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	for _, tc := range []struct{ body, param, msg string }{
		{`{"prompt":"x","min_new_tokens":16777217}`, "min_new_tokens", "min_new_tokens (=16777217) must be at most 16777216"},
		{`{"prompt":"x","no_repeat_ngram_size":2000000000}`, "no_repeat_ngram_size", "no_repeat_ngram_size (=2000000000) must be at most 16777216"},
		{`{"prompt":"x","max_tokens":16777217}`, "max_tokens", "max_tokens 16777217: must be from 1 to 16777216"},
	} {
		resp := post(t, ts.URL+"/v1/completions", tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.body)
		e := errorOf(t, resp)
		require.NotNil(t, e.Error.Param, tc.body)
		assert.Equal(t, tc.param, *e.Error.Param)
		assert.Equal(t, tc.msg, e.Error.Message)
	}
}

// Errors quote a short prefix of a long input: a bad sequence_bias of
// 325 KB, a refused pattern of 200 KB, a field name of 100 KB.
func TestErrorsQuoteShortPrefixes(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	var bias strings.Builder
	bias.WriteString(`[[[`)
	for i := range 60_000 {
		if i > 0 {
			bias.WriteString(",")
		}
		bias.WriteString("99999")
	}
	bias.WriteString(`],-1.0]]`)
	pattern := strings.Repeat("(a", 100_000)
	for _, tc := range []struct{ body, start string }{
		{`{"prompt":"x","sequence_bias":` + bias.String() + `}`, "sequence_bias (=[99999 99999"},
		{`{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"string","pattern":"` + pattern + `"}}}}`, "response_format"},
		{`{"prompt":"x","` + strings.Repeat("k", 100_000) + `":1}`, `unknown field "kkkk`},
	} {
		resp := post(t, ts.URL+"/v1/completions", tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		e := errorOf(t, resp)
		t.Logf("%d-byte body: %d-byte message", len(tc.body), len(e.Error.Message))
		assert.Contains(t, e.Error.Message, tc.start)
		assert.Less(t, len(e.Error.Message), 1100)
		if e.Error.Param != nil {
			assert.Less(t, len(*e.Error.Param), 100)
		}
	}
}
