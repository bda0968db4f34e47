package serve

import (
	"net/http/httptest"
	"testing"

	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/scripted"
	"github.com/stretchr/testify/require"
)

// The server's tests run on the demo model in Go (internal/testkit/scripted:
// llama.cpp's tokenizer of the demo vocabulary and the demo's Markov chain
// over backend.MemoryBackend), so that they build and run with
// CGO_ENABLED=0 in milliseconds; a test scripts what the model writes with
// harness.model.SetScript (harness.tok.Says, Replies, ...). The few tests
// that need llama.cpp itself are in the files built with cgo
// (llama_test.go: newLlamaServer).

// harness is a server over the demo model in Go.
type harness struct {
	ts     *httptest.Server
	srv    *Server
	engine *generation.Engine
	model  *scripted.Model
	tok    *scripted.Tokenizer
}

// seqTokens is the size of every sequence of the test servers, as the
// llama.cpp ones have it.
const seqTokens = 256

// newHarness serves the demo model in Go through an engine of slots
// sequences of cfg.SequenceSize tokens (default seqTokens), with cfg's
// other fields; script, when not nil, replaces the demo's Markov chain.
func newHarness(t *testing.T, slots int, cfg Config, script scripted.Script) *harness {
	t.Helper()
	size := seqTokens
	if cfg.SequenceSize > 0 {
		size = cfg.SequenceSize
	}
	tok, m, err := scripted.Demo(slots, size)
	require.NoError(t, err)
	if script != nil {
		m.SetScript(script)
	}
	e, err := scripted.NewEngine(m, tok)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	cfg.Engine, cfg.Tokenizer, cfg.ModelID, cfg.SequenceSize = e, tok, "demo", m.Room(0)
	srv := New(cfg)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &harness{ts: ts, srv: srv, engine: e, model: m, tok: tok}
}

// newServer serves the demo model in Go through an engine of slots
// sequences of seqTokens tokens.
func newServer(t *testing.T, slots int, cfg Config) (*httptest.Server, *generation.Engine) {
	t.Helper()
	h := newHarness(t, slots, cfg, nil)
	return h.ts, h.engine
}

// newServerOf is newServer that also returns the Server.
func newServerOf(t *testing.T, slots int, cfg Config) (*httptest.Server, *Server, *generation.Engine) {
	t.Helper()
	h := newHarness(t, slots, cfg, nil)
	return h.ts, h.srv, h.engine
}
