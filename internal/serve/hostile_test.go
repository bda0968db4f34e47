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
