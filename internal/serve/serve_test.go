package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	return resp
}

func errorOf(t *testing.T, resp *http.Response) apiError {
	t.Helper()
	defer resp.Body.Close()
	var e apiError
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	return e
}

// More choices than the server ever runs at once is a 400 naming the
// bound (a 429 would have the client try again forever); a closed engine
// is 503. (429 for a busy server: TestPreparationCountsAgainstMaxConcurrent.)
func TestBusyAndClosed(t *testing.T) {
	ts, e := newServer(t, 1, Config{MaxConcurrent: 2})
	resp := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","n":3}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	apiErr := errorOf(t, resp)
	require.NotNil(t, apiErr.Error.Param)
	assert.Equal(t, "n", *apiErr.Error.Param)
	assert.Contains(t, apiErr.Error.Message, "n 3: more choices than the 2 sequences the server runs at once (--max-concurrent)")

	resp = post(t, ts.URL+"/v1/completions", `{"prompt":"The model","n":2,"max_tokens":3}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	require.NoError(t, e.Close())
	resp = post(t, ts.URL+"/v1/completions", `{"prompt":"The model"}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "server_error", errorOf(t, resp).Error.Type)
}

// A client that leaves while its request waits for the one sequence, and
// one that leaves while its request runs, leave nothing behind: once the
// running request is gone, no sequence is held and none waits.
func TestDisconnectsFreeEverything(t *testing.T) { disconnectsFreeEverything(t, newServer) }

func disconnectsFreeEverything(t *testing.T, newServer func(*testing.T, int, Config) (*httptest.Server, *generation.Engine)) {
	ts, e := newServer(t, 1, Config{})
	stream := func(ctx context.Context) *bufio.Reader {
		req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"Hello"}],"stream":true,"temperature":0}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return bufio.NewReader(resp.Body)
	}
	runCtx, leaveRunning := context.WithCancel(context.Background())
	running := stream(runCtx)
	for range 3 { // the role chunk and two tokens: the request holds the sequence
		_, err := running.ReadString('\n')
		require.NoError(t, err)
		_, err = running.ReadString('\n')
		require.NoError(t, err)
	}
	waitCtx, leaveWaiting := context.WithCancel(context.Background())
	waiting := stream(waitCtx)
	line, err := waiting.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"role":"assistant"`)
	leaveWaiting()
	leaveRunning()

	// The next request gets the sequence and runs to its end.
	resp := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","max_tokens":4,"temperature":0}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	st := e.Stats()
	assert.Zero(t, st.Active)
	assert.Zero(t, st.Waiting)
	assert.Equal(t, uint64(3), st.Submitted)
	assert.Equal(t, st.Submitted, st.Finished)
}

// The metrics are Prometheus' text format: every sample follows its HELP
// and TYPE lines, and the counters count.
func TestMetrics(t *testing.T) {
	ts, _ := newServer(t, 2, Config{})
	resp := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","max_tokens":5,"temperature":0}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	resp = post(t, ts.URL+"/v1/completions", `{"bad"`)
	resp.Body.Close()
	resp, err := http.Get(ts.URL + "/nowhere")
	require.NoError(t, err)
	resp.Body.Close()

	resp, err = http.Get(ts.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	typed := map[string]bool{}
	samples := map[string]string{}
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			assert.Contains(t, []string{"counter", "gauge"}, typ)
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		base, _, _ := strings.Cut(name, "{")
		assert.True(t, typed[base], "sample %s before its TYPE", name)
		samples[name] = value
	}
	assert.Equal(t, "5", samples["llamaserve_generated_tokens_total"])
	assert.Equal(t, "1", samples["llamaserve_sequences_finished_total"])
	assert.Equal(t, "0", samples["llamaserve_prefix_cache_hits_total"])
	assert.Equal(t, "1", samples[`llamaserve_http_requests_total{path="/v1/completions",code="200"}`])
	assert.Equal(t, "1", samples[`llamaserve_http_requests_total{path="/v1/completions",code="400"}`])
	assert.Equal(t, "1", samples[`llamaserve_http_requests_total{path="other",code="404"}`])
}

// Text that may begin a stop string is held back, and only that.
func TestHoldBack(t *testing.T) {
	for _, tc := range []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello wor", []string{"world"}, 3},
		{"hello wor", []string{"xyz"}, 0},
		{"hello w", []string{"world", "w"}, 1},
		{"abab", []string{"abac"}, 2},
		{"", []string{"a"}, 0},
		{"tail", nil, 0},
		{"ends with a", []string{"a stop", "ends with a stop"}, 11},
	} {
		assert.Equal(t, tc.want, holdBack([]byte(tc.text), tc.stops), "%q %q", tc.text, tc.stops)
	}
}

// OpenAI's fields become the generation config the engine runs.
func TestPlanConfig(t *testing.T) {
	p := &params{base: func() *genconfig.Config { c := genconfig.Default(); c.DoSample, c.TopK = true, 0; return c }(), vocab: 100, slotSize: 256}
	plan := func(body string, chat bool) (*plan, error) {
		req, err := decodeRequest([]byte(body), chat)
		if err != nil {
			return nil, err
		}
		return p.plan(context.Background(), req, chat)
	}
	pl, err := plan(`{"prompt":["a","b"],"n":2,"seed":10,"temperature":0,"max_tokens":7,"stop":"x","logprobs":2,"logit_bias":{"5":-100},"top_k":4}`, false)
	require.NoError(t, err)
	require.Len(t, pl.reqs, 4)
	for i, r := range pl.reqs {
		assert.Equal(t, []string{"a", "a", "b", "b"}[i], r.Text)
		assert.Equal(t, uint64(10+i%2), r.Seed)
		assert.False(t, r.Config.DoSample, "temperature 0 is greedy")
		assert.Equal(t, 7, *r.Config.MaxNewTokens)
		assert.Equal(t, 4, r.Config.TopK)
		assert.Equal(t, []string{"x"}, r.StopStrings)
		assert.True(t, r.Logprobs)
		assert.Equal(t, 2, r.TopLogprobs)
		assert.Empty(t, r.Config.SequenceBias, "logit_bias is a processor, not sequence_bias")
		require.Len(t, r.Processors, 1)
		assert.Equal(t, "LogitBias", r.Processors[0].Name())
	}
	pl, err = plan(`{"messages":[{"role":"developer","content":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}]},{"role":"user","content":"Hi"}],"temperature":0.5,"top_p":0.9}`, true)
	require.NoError(t, err)
	require.Len(t, pl.reqs, 1)
	r := pl.reqs[0]
	assert.Equal(t, "system", r.Messages[0].Role)
	assert.Equal(t, "Be brief.", r.Messages[0].Content)
	assert.True(t, r.Config.DoSample)
	assert.Equal(t, 0.5, r.Config.Temperature)
	assert.Equal(t, 0.9, r.Config.TopP)
	assert.Equal(t, 256, *r.Config.MaxNewTokens, "a chat reply may fill its sequence")

	for body, param := range map[string]string{
		`{"prompt":"a","logprobs":6}`:            "logprobs",
		`{"prompt":"a","logit_bias":{"100":1}}`:  "logit_bias",
		`{"prompt":"a","temperature":3}`:         "temperature",
		`{"prompt":"a","mirostat":3}`:            "mirostat",
		`{"prompt":"a","stream_options":{}}`:     "stream_options",
		`{"prompt":"a","presence_penalty":2.5}`:  "presence_penalty",
		`{"prompt":"a","frequency_penalty":-3}`:  "frequency_penalty",
		`{"prompt":"a","max_new_tokens":5}`:      "max_new_tokens",
		`{"prompt":"a","num_beams":4}`:           "num_beams",
		`{"prompt":"a","repetition_penalty":-1}`: "repetition_penalty",
		`{"prompt":[]}`:                          "prompt",
		`{"prompt":"a","top_logprobs":2}`:        "top_logprobs",
	} {
		_, err := plan(body, false)
		var re *requestError
		require.ErrorAs(t, err, &re, body)
		assert.Equal(t, 400, re.status, body)
		assert.Equal(t, param, re.param, body)
	}
}

// A trailing slash names the same endpoint (OpenAI's clients send one when
// their base URL ends with a slash); an unknown path is still 404.
func TestTrailingSlash(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	for _, path := range []string{"/v1/chat/completions/", "/chat/completions//"} {
		resp := post(t, ts.URL+path, `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":2}`)
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		var reply struct {
			Object string `json:"object"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&reply))
		resp.Body.Close()
		assert.Equal(t, "chat.completion", reply.Object, path)
	}
	resp, err := http.Get(ts.URL + "/v1/models/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	resp = post(t, ts.URL+"/v1/nothing/", `{}`)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
}
