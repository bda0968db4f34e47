package serve

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The page's files answer without the API key, with a CSP that allows no
// inline script and no other origin; other paths keep their 404.
func TestPageFiles(t *testing.T) {
	ts, _ := newServer(t, 1, Config{APIKey: "k"})
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html; charset=utf-8", 200},
		{"/ui/app.js", "text/javascript; charset=utf-8", 200},
		{"/ui/style.css", "text/css; charset=utf-8", 200},
		{"/ui/nothing.js", "application/json", 404},
		{"/ui/webui/index.html", "application/json", 404},
		{"/props", "application/json", 401},
		{"/index.html", "application/json", 401},
	} {
		resp, err := http.Get(ts.URL + tc.path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
		assert.Equal(t, tc.ctype, resp.Header.Get("Content-Type"), tc.path)
		if tc.status == 200 {
			assert.Equal(t, pageCSP, resp.Header.Get("Content-Security-Policy"), tc.path)
			assert.NotContains(t, pageCSP, "unsafe")
		}
	}
	req, _ := http.NewRequest("GET", ts.URL+"/props", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var p propsObject
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	assert.Equal(t, "demo", p.Model)
	assert.Equal(t, 256, p.NCtx)
	base := OpenAIBase() // newServer's Config has no Base
	assert.Equal(t, base.Temperature, p.Defaults.Temperature)
	assert.Equal(t, base.TopK, p.Defaults.TopK)
	assert.Equal(t, 256, p.Defaults.MaxTokens)
}
