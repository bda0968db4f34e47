package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeEmbedder answers an input's embedding as [its first token, its
// length]; block, when set, is called with each input before it answers.
type fakeEmbedder struct {
	block func(in []int32)
}

func (f *fakeEmbedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		if f.block != nil {
			f.block(in)
		}
		out[i] = []float32{float32(in[0]), float32(len(in))}
	}
	return out, nil
}
func (f *fakeEmbedder) Dimensions() int { return 2 }
func (f *fakeEmbedder) MaxTokens() int  { return 64 }

// toolsJSON is n function tools f0, f1, ... whose parameters each have one
// string property.
func toolsJSON(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"f%d","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}`, i)
	}
	return "[" + b.String() + "]"
}

// Each limit of Limits answers 400 with the code that names it and the
// flag that sets it; at the limit, the request is served.
func TestRequestLimits(t *testing.T) {
	ts, _ := newServer(t, 1, Config{Embedder: &fakeEmbedder{},
		Limits: Limits{MaxTools: 1, MaxSchemaBytes: 200, MaxEmbeddingInputs: 2, MaxEmbeddingTokens: 10}})
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,` + extra + `}`
	}
	enum := func(n int) string { // a schema of 10+7n bytes
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"v%03d"`, i)
		}
		return `{"enum":[` + b.String() + `]}`
	}
	require.Len(t, enum(27), 199)
	for _, tc := range []struct{ path, body, param, code, flag string }{
		{"/v1/chat/completions", chat(`"tool_choice":"required","tools":` + toolsJSON(2)), "tools", "too_many_tools", "--max-tools"},
		// parameters of 231 bytes
		{"/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"a":{"type":"string"}},"description":"` +
			strings.Repeat("x", 160) + `"}}}]`), "tools[0].function.parameters", "schema_too_large", "--max-schema-bytes"},
		{"/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"e","schema":` + enum(28) + `}}`), "response_format", "schema_too_large", "--max-schema-bytes"},
		{"/v1/embeddings", `{"input":[[1],[2],[3]]}`, "input", "too_many_inputs", "--max-embedding-inputs"},
		{"/v1/embeddings", `{"input":[[1,2,3,4,5,6],[1,2,3,4,5]]}`, "input", "too_many_tokens", "--max-embedding-tokens"},
	} {
		resp := post(t, ts.URL+tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.code)
		e := errorOf(t, resp)
		if assert.NotNil(t, e.Error.Code, tc.code) {
			assert.Equal(t, tc.code, *e.Error.Code)
		}
		if assert.NotNil(t, e.Error.Param, tc.code) {
			assert.Equal(t, tc.param, *e.Error.Param)
		}
		assert.Contains(t, e.Error.Message, tc.flag)
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", chat(`"tool_choice":"required","tools":` + toolsJSON(1))},
		{"/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"e","schema":` + enum(27) + `}}`)},
		{"/v1/embeddings", `{"input":[[1,2,3,4,5],[1,2,3,4,5]]}`},
	} {
		resp := post(t, ts.URL+tc.path, tc.body)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", tc.body, data)
	}
}

// A request counts against --max-concurrent while it is being prepared
// (here: while its response_format compiles): with room for one, a
// neighbour is answered 429; with room for two, the neighbour is served
// while the first is still compiling; the first is then served too.
func TestPreparationCountsAgainstMaxConcurrent(t *testing.T) {
	for _, maxConcurrent := range []int{1, 2} {
		ts, _ := newServer(t, 1, Config{MaxConcurrent: maxConcurrent})
		s := ts.Config.Handler.(*Server)
		compiling, proceed := make(chan struct{}), make(chan struct{})
		var first atomic.Bool
		s.params.formats.building = func() {
			if first.CompareAndSwap(false, true) { // the first request only
				close(compiling)
				<-proceed
			}
		}
		heavy := make(chan int)
		go func() {
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
				`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"response_format":{"type":"json_schema","json_schema":{"name":"e","schema":{"enum":["a","b"]}}}}`))
			if err != nil {
				heavy <- 0
				return
			}
			resp.Body.Close()
			heavy <- resp.StatusCode
		}()
		<-compiling
		assert.Equal(t, int64(1), s.inFlight.Load(), "the request being prepared counts")
		neighbour := post(t, ts.URL+"/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"enum":["c"]}}}}`)
		neighbour.Body.Close()
		if maxConcurrent == 1 {
			assert.Equal(t, http.StatusTooManyRequests, neighbour.StatusCode)
		} else {
			assert.Equal(t, http.StatusOK, neighbour.StatusCode, "served while the other compiles")
		}
		select {
		case <-heavy:
			t.Fatal("the first request ended before it was let go on")
		default:
		}
		close(proceed)
		assert.Equal(t, http.StatusOK, <-heavy)
		assert.Equal(t, int64(0), s.inFlight.Load())
	}
}

// The requests waiting for the embeddings context take turns input by
// input: a one-input neighbour that arrives while a three-input request's
// first input is computed comes next, before that request's other inputs.
func TestEmbeddingsTakeTurns(t *testing.T) {
	var mu sync.Mutex
	var order []int32
	first, proceed := make(chan struct{}), make(chan struct{})
	emb := &fakeEmbedder{block: func(in []int32) {
		mu.Lock()
		order = append(order, in[0])
		mu.Unlock()
		if in[0] == 10 {
			close(first)
			<-proceed
		}
	}}
	ts, _ := newServer(t, 1, Config{Embedder: emb})
	s := ts.Config.Handler.(*Server)
	queued := make(chan int, 8)
	s.embedTurns.queued = func(waiting int) { queued <- waiting }
	type result struct {
		status int
		body   string
	}
	run := func(body string, out chan<- result) {
		resp, err := http.Post(ts.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			out <- result{body: err.Error()}
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- result{resp.StatusCode, string(data)}
	}
	large, small := make(chan result, 1), make(chan result, 1)
	go run(`{"input":[[10],[11,1],[12,1,2]]}`, large)
	<-first
	go run(`{"input":[[20]]}`, small)
	assert.Equal(t, 1, <-queued, "the neighbour waits for its turn")
	close(proceed)
	r := <-small
	assert.Equal(t, http.StatusOK, r.status, r.body)
	r = <-large
	assert.Equal(t, http.StatusOK, r.status, r.body)
	assert.Equal(t, []int32{10, 20, 11, 12}, order)
	// the large request's embeddings in its inputs' order: [first token, length], normalised
	assert.Contains(t, r.body, `"index":2`)
}
