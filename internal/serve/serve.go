// Package serve is the HTTP side of llamaserve: OpenAI-compatible
// completions and chat completions (streamed with server-sent events or
// not), the model list, a health check and Prometheus metrics, on a
// generation.Engine that runs every request in one continuously batched
// decoding loop.
//
// Requests follow OpenAI's API (https://platform.openai.com/docs/api-reference):
// /v1/completions takes model, prompt (a string, strings, token ids or
// lists of them), max_tokens (default 16), temperature, top_p, n, stream,
// stream_options.include_usage, logprobs (0-5), stop (up to 4 strings,
// left out of the text as OpenAI does), seed, logit_bias and user;
// /v1/chat/completions takes messages (system, developer, user and
// assistant roles; text content) instead of prompt, max_tokens or
// max_completion_tokens (default: the end of the sequence), logprobs (a
// boolean) and top_logprobs (0-20). Temperature 0 is greedy decoding.
// The transformers GenerationConfig fields (top_k, min_p, typical_p,
// repetition_penalty, no_repeat_ngram_size, do_sample, sequence_bias,
// suppress_tokens, ...) and Mirostat (mirostat 1 or 2, mirostat_tau,
// mirostat_eta) are accepted as extensions; the server's base config (see
// Config.Base) gives every field a request leaves out.
//
// A field the server does not know, bad JSON or a bad value is answered
// with 400 and OpenAI's error object naming the field; a body over
// Config.MaxBodyBytes with 413; a prompt longer than a sequence with 400
// and code context_length_exceeded; more concurrent requests than
// Config.MaxConcurrent with 429. A client that goes away cancels its
// requests: the engine frees their sequences at its next step.
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// CacheStats is the prefix cache (a *prefixcache.Cache) as the metrics see
// it.
type CacheStats interface {
	Stats() prefixcache.Stats
}

// Defaults of Config's limits.
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxConcurrent = 64
)

// Config is what a Server serves.
type Config struct {
	// Engine runs the requests; the server does not close it.
	Engine *generation.Engine
	// Tokenizer is the engine's tokenizer: it spells tokens in logprobs.
	Tokenizer backend.Tokenizer
	// ModelID is the model's name in /v1/models and in responses.
	ModelID string
	// Base is the generation config every request starts from; nil means
	// OpenAI's defaults: sampling at temperature 1 without top-k.
	Base *genconfig.Config
	// SequenceSize is the number of tokens one sequence holds: a prompt
	// must leave room for a token.
	SequenceSize int
	// MaxBodyBytes limits a request's body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxConcurrent limits the sequences (choices) of the requests in
	// progress, running or waiting for a slot (default
	// DefaultMaxConcurrent).
	MaxConcurrent int
	// Cache reports the prefix cache's counters; nil reports zeros.
	Cache CacheStats
	// Log receives a line per failed request (status 500); nil discards.
	Log *log.Logger
}

// Server is the HTTP handler of llamaserve.
type Server struct {
	cfg     Config
	params  params
	mux     *http.ServeMux
	created int64

	inFlight atomic.Int64 // sequences of the requests in progress
	metrics  metrics
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	base := cfg.Base
	if base == nil {
		base = genconfig.Default()
		base.DoSample = true
		base.TopK = 0
	}
	s := &Server{
		cfg: cfg,
		params: params{base: base, vocab: cfg.Engine.VocabSize(), slotSize: cfg.SequenceSize,
			formats: &formats{tok: cfg.Tokenizer, vocab: cfg.Engine.VocabSize()}},
		mux:     http.NewServeMux(),
		created: time.Now().Unix(),
	}
	s.metrics.requests = map[requestKey]uint64{}
	s.mux.HandleFunc("/v1/completions", s.completions)
	s.mux.HandleFunc("/v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.HandleFunc("/v1/models/{id...}", s.model)
	s.mux.HandleFunc("/health", s.health)
	s.mux.HandleFunc("/metrics", s.metricsHandler)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &requestError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("no endpoint %s", r.URL.Path)})
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	// The pattern, not the path, labels the metrics: their number stays
	// bounded whatever paths clients ask for.
	_, path := s.mux.Handler(r)
	if path == "/" || path == "" {
		path = "other"
	}
	s.mux.ServeHTTP(sw, r)
	s.metrics.count(path, sw.status)
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered: the events of a stream.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// apiError is OpenAI's error object.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, e *requestError) {
	var body apiError
	body.Error.Message = e.msg
	switch {
	case e.status >= 500:
		body.Error.Type = "server_error"
	case e.status == http.StatusTooManyRequests:
		body.Error.Type = "rate_limit_error"
	default:
		body.Error.Type = "invalid_request_error"
	}
	if e.param != "" {
		body.Error.Param = &e.param
	}
	if e.code != "" {
		body.Error.Code = &e.code
	}
	writeJSON(w, e.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.cfg.ModelID, Object: "model", Created: s.created, OwnedBy: "llamaloop"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelObject{s.modelObject()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	if id := r.PathValue("id"); id != s.cfg.ModelID {
		writeError(w, &requestError{status: http.StatusNotFound, param: "model", code: "model_not_found",
			msg: fmt.Sprintf("the model %q does not exist; this server has %q", id, s.cfg.ModelID)})
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// allow answers 405 to a method other than method.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || method == http.MethodGet && r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, &requestError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("%s needs %s, not %s", r.URL.Path, method, r.Method)})
	return false
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request)     { s.generate(w, r, false) }
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) }

// generate serves both generation endpoints.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, &requestError{status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit)})
			return
		}
		return // the client went away
	}
	req, err := decodeRequest(body, chat)
	if err == nil {
		var p *plan
		if p, err = s.params.plan(req, chat); err == nil {
			s.run(w, r, req, p, chat)
			return
		}
	}
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	writeError(w, re)
}

// run submits the choices of p and writes the response.
func (s *Server) run(w http.ResponseWriter, r *http.Request, req *apiRequest, p *plan, chat bool) {
	n := int64(len(p.reqs))
	if s.inFlight.Add(n) > int64(s.cfg.MaxConcurrent) {
		s.inFlight.Add(-n)
		w.Header().Set("Retry-After", "1")
		writeError(w, &requestError{status: http.StatusTooManyRequests, code: "server_busy",
			msg: fmt.Sprintf("the server runs %d sequences at most; try again", s.cfg.MaxConcurrent)})
		return
	}
	// The sequences count until they end, not until the response is
	// written: a client that has its whole reply finds them gone.
	release := sync.OnceFunc(func() { s.inFlight.Add(-n) })
	defer release()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends every choice still running, whatever ends the response
	choices := make([]*choice, len(p.reqs))
	promptTokens := 0
	nPerPrompt := 1
	if req.N != nil {
		nPerPrompt = *req.N
	}
	for i := range p.reqs {
		task, err := s.cfg.Engine.Submit(ctx, p.reqs[i])
		if err != nil {
			writeError(w, s.submitError(err, chat))
			return
		}
		if i%nPerPrompt == 0 {
			promptTokens += task.PromptTokens()
		}
		choices[i] = &choice{index: i, task: task, stops: p.stops, tok: s.cfg.Tokenizer, topN: p.topLogprobs, logprobs: p.logprobs}
	}
	resp := &response{
		id: fmt.Sprintf("cmpl-%016x", rand.Uint64()), created: time.Now().Unix(),
		model: s.cfg.ModelID, chat: chat, promptTokens: promptTokens,
	}
	if chat {
		resp.id = "chat" + resp.id
	}
	if req.Stream {
		s.stream(ctx, cancel, w, resp, choices, p.includeUsage, release)
		return
	}
	for _, c := range choices {
		c.run(nil)
		if ctx.Err() != nil {
			return // the client went away
		}
		if c.err != nil {
			if ctx.Err() == nil {
				s.logf("%s: %v", r.URL.Path, c.err)
				writeError(w, &requestError{status: http.StatusInternalServerError, msg: c.err.Error()})
			}
			return
		}
	}
	release()
	writeJSON(w, http.StatusOK, resp.whole(choices))
}

// submitError maps an error of Engine.Submit to its response.
func (s *Server) submitError(err error, chat bool) *requestError {
	msg := cli.Message(err)
	param := "prompt"
	if chat {
		param = "messages"
	}
	switch {
	case errors.Is(err, generation.ErrPromptTooLong):
		return &requestError{status: http.StatusBadRequest, param: param, code: "context_length_exceeded",
			msg: fmt.Sprintf("the prompt does not fit in a sequence of %d tokens: %s", s.cfg.SequenceSize, msg)}
	case errors.Is(err, generation.ErrClosed):
		return &requestError{status: http.StatusServiceUnavailable, msg: "the server is shutting down"}
	}
	return &requestError{status: http.StatusBadRequest, param: param, msg: msg}
}

// stream writes the choices' events as server-sent events, each choice from
// its own goroutine, then the usage chunk when asked and [DONE].
func (s *Server) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, resp *response, choices []*choice, includeUsage bool, release func()) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	failed := false
	send := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		if failed {
			return
		}
		data, err := json.Marshal(v)
		if err == nil {
			_, err = fmt.Fprintf(w, "data: %s\n\n", data)
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			failed = true
			cancel() // the client is gone: its sequences end
		}
	}
	var wg sync.WaitGroup
	for _, c := range choices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp.chat {
				send(resp.chunk(c.index, &delta{Role: "assistant", Content: ptr("")}, nil, nil))
			}
			c.run(func(text string, lp *logprobs, finish *string) {
				var d *delta
				if resp.chat {
					d = &delta{}
					if text != "" || finish == nil {
						d.Content = &text
					}
				}
				send(resp.textChunk(c.index, d, text, lp, finish))
			})
			if c.err != nil && ctx.Err() == nil {
				s.logf("stream: %v", c.err)
				var e apiError
				e.Error.Message, e.Error.Type = c.err.Error(), "server_error"
				send(e)
			}
		}()
	}
	wg.Wait()
	release()
	if ctx.Err() != nil {
		return
	}
	if includeUsage {
		send(resp.usageChunk(choices))
	}
	mu.Lock()
	if !failed {
		io.WriteString(w, "data: [DONE]\n\n")
		rc.Flush()
	}
	mu.Unlock()
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		s.cfg.Log.Printf(format, args...)
	}
}

func ptr[T any](v T) *T { return &v }
