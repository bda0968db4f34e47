package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The API key is read from the Bearer scheme only, with the scheme's name
// in any case; health and metrics need none; CORS answers preflights before
// the key is checked.
func TestGate(t *testing.T) {
	ts, _ := newServer(t, 1, Config{APIKey: "k3y", CORSOrigins: []string{"http://a.example"}})
	do := func(method, path string, headers ...string) *http.Response {
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(`{"content":"x"}`))
		require.NoError(t, err)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for auth, status := range map[string]int{
		"Bearer k3y": 200, "bearer k3y": 200, "BEARER  k3y ": 200,
		"": 401, "Bearer": 401, "Bearer ": 401, "k3y": 401, "Basic k3y": 401, "Bearer k3": 401, "Bearer k3yy": 401,
	} {
		var h []string
		if auth != "" {
			h = []string{"Authorization", auth}
		}
		resp := do("POST", "/tokenize", h...)
		assert.Equal(t, status, resp.StatusCode, "%q", auth)
		if status == 401 {
			assert.Equal(t, `Bearer realm="llamaserve"`, resp.Header.Get("WWW-Authenticate"))
		}
	}
	assert.Equal(t, 200, do("GET", "/health").StatusCode)
	assert.Equal(t, 200, do("GET", "/metrics").StatusCode)

	resp := do("OPTIONS", "/v1/responses", "Origin", "http://a.example", "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "http://a.example", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, corsHeaders, resp.Header.Get("Access-Control-Allow-Headers"))
	resp = do("POST", "/tokenize", "Origin", "http://b.example", "Authorization", "Bearer k3y")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Values("Vary"), "Origin")
}
