package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/internal/testhook"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// events reads the data lines of a server-sent event stream.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, data)
		}
	}
	return out
}

type completionLogprobsJSON struct {
	Tokens     []string `json:"tokens"`
	TextOffset []int    `json:"text_offset"`
}

// A streamed completion's text_offset continues from chunk to chunk, as
// the whole reply's does: each token's offset is the length of the text
// before it.
func TestStreamedTextOffset(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	body := fmt.Sprintf(`{"prompt":"The model","max_tokens":12,"temperature":0,"logprobs":1,"logit_bias":{"%d":-100}`, testmodel.EOS)
	resp := post(t, ts.URL+"/v1/completions", body+`,"stream":true}`)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var tokens []string
	var offsets []int
	var text strings.Builder
	evs := events(t, resp.Body)
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	for _, ev := range evs[:len(evs)-1] {
		var chunk struct {
			Choices []struct {
				Text     string                  `json:"text"`
				Logprobs *completionLogprobsJSON `json:"logprobs"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev), &chunk), ev)
		require.Len(t, chunk.Choices, 1)
		c := chunk.Choices[0]
		text.WriteString(c.Text)
		require.NotNil(t, c.Logprobs, ev)
		tokens = append(tokens, c.Logprobs.Tokens...)
		offsets = append(offsets, c.Logprobs.TextOffset...)
	}
	require.Len(t, tokens, 12)
	require.Len(t, offsets, 12)
	at := 0
	for i, tok := range tokens {
		assert.Equal(t, at, offsets[i], "token %d %q", i, tok)
		at += len(tok)
	}
	assert.Equal(t, text.String(), strings.Join(tokens, ""))
	assert.Positive(t, offsets[11], "not [0] on every chunk")

	whole := post(t, ts.URL+"/v1/completions", body+`}`)
	defer whole.Body.Close()
	var w struct {
		Choices []struct {
			Text     string                 `json:"text"`
			Logprobs completionLogprobsJSON `json:"logprobs"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(whole.Body).Decode(&w))
	require.Len(t, w.Choices, 1)
	assert.Equal(t, text.String(), w.Choices[0].Text)
	assert.Equal(t, tokens, w.Choices[0].Logprobs.Tokens)
	assert.Equal(t, offsets, w.Choices[0].Logprobs.TextOffset)
}

// Abort ends a stream in progress with an error event (no [DONE]), and a
// request that comes after it is 503.
func TestAbortEndsStreamsWithError(t *testing.T) {
	h := newHarness(t, 1, Config{}, nil)
	ts, srv := h.ts, h.srv
	// The engine stops at its second step (after the prompt's, which gave
	// the first token) until the test ends: the stream is in progress when
	// Abort comes, and ends without the engine.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	steps := 0
	h.model.SetBeforeEval(func() {
		if steps++; steps == 2 {
			<-release
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions",
		strings.NewReader(fmt.Sprintf(`{"prompt":"The model","max_tokens":200,"temperature":0,"stream":true,"logit_bias":{"%d":-100}}`, testmodel.EOS)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: {"), line)
	srv.Abort()
	evs := events(t, r)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	var e apiError
	require.NoError(t, json.Unmarshal([]byte(last), &e), last)
	assert.Equal(t, "the server is shutting down: the request was cut", e.Error.Message)
	assert.Equal(t, "server_error", e.Error.Type)
	require.NotNil(t, e.Error.Code)
	assert.Equal(t, "server_shutting_down", *e.Error.Code)
	assert.Len(t, evs, 1, "the stream was cut after its first token")

	after := post(t, ts.URL+"/v1/completions", `{"prompt":"The model","max_tokens":2}`)
	assert.Equal(t, http.StatusServiceUnavailable, after.StatusCode)
	assert.Equal(t, "server_shutting_down", *errorOf(t, after).Error.Code)
}

// A body that is not JSON by its Content-Type is 415; none, or JSON with a
// charset, is served.
func TestContentTypeStatus(t *testing.T) {
	ts, _ := newServer(t, 1, Config{})
	for ctype, status := range map[string]int{
		"":                                  http.StatusOK,
		"application/json; charset=utf-8":   http.StatusOK,
		"text/plain":                        http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded": http.StatusUnsupportedMediaType,
	} {
		req, err := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"The model","max_tokens":2}`))
		require.NoError(t, err)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		assert.Equal(t, status, resp.StatusCode, ctype)
		if status != http.StatusOK {
			e := errorOf(t, resp)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			assert.Contains(t, e.Error.Message, "application/json", ctype)
		} else {
			resp.Body.Close()
		}
	}
	resp := post(t, ts.URL+"/v1/completions", "{\"prompt\":\"The \xffmodel\"}")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "the body is not valid UTF-8", errorOf(t, resp).Error.Message)
}

// A request that waits longer than the write timeout for its answer still
// gets it: Abort's 503 comes after the requests queued for the one
// sequence (8000 tokens, seconds of work) have waited 600 ms, with a write
// timeout of 150 ms. The engine generates nothing more until Abort, so
// the answers cannot come first on a fast machine.
func TestAnswerAfterLongWait(t *testing.T) {
	ts, _ := newServer(t, 1, Config{WriteTimeout: 150 * time.Millisecond})
	srv := ts.Config.Handler.(*Server)
	body := fmt.Sprintf(`{"prompt":"The model","max_tokens":250,"n":32,"logit_bias":{"%d":-100}}`, testmodel.EOS)
	// The engine's loop waits after its first token until Abort: the
	// requests are still unanswered then, however fast the machine.
	release := make(chan struct{})
	defer testhook.SetGenerated(func() { <-release })()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	statuses := make(chan int, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var e apiError
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				errs <- err
				return
			}
			statuses <- resp.StatusCode
		}()
	}
	// Both admitted (their 64 sequences counted), then a wait longer than
	// the write timeout: the time is what the test is about, and a slower
	// machine only makes the wait longer.
	for srv.inFlight.Load() < 64 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond)
	srv.Abort()
	close(release)
	for range 2 {
		select {
		case err := <-errs:
			t.Fatalf("no answer: %v", err)
		case status := <-statuses:
			assert.Equal(t, http.StatusServiceUnavailable, status)
		}
	}
}
