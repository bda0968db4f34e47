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
// /v1/chat/completions takes messages (system, developer, user,
// assistant with tool_calls, and tool roles; text content) instead of
// prompt, max_tokens or max_completion_tokens (default: the end of the
// sequence), logprobs (a boolean), top_logprobs (0-20), and tools,
// tool_choice (none, auto, required or a function) and
// parallel_tool_calls. Temperature 0 is greedy decoding;
// presence_penalty and frequency_penalty (-2 to 2) count the tokens
// generated so far. OpenAI's fields that change nothing here (metadata,
// store, service_tier, reasoning_effort, ...) are accepted and ignored;
// those that ask for what the server lacks (audio, moderation, the
// deprecated functions) are refused unless null or empty.
//
// A chat prompt is the model's Jinja chat template (Config.ChatTemplate)
// rendered with the messages and tools, or llama.cpp's built-in template
// for a model without one or when the template fails; the reply's
// X-Chat-Template header says which. The reply is read as tool calls in
// the formats of the Hermes/Qwen, Llama 3, Mistral and plain JSON
// families; tool_choice required or a function constrains it with a
// grammar to one call whose arguments validate against the function's
// parameters. A stream sends a call's name, then its arguments, as the
// model writes them. A model whose template has reasoning markers
// (<think>...</think>: Qwen 3, DeepSeek R1, ...) has its thinking
// returned apart, as reasoning_content on chat completions (whole and
// streamed) and as a reasoning item on Responses, unless the request's
// reasoning_format (llama-server's extension) is "none", which keeps it
// inline in the content. grammar (llama-server's extension) constrains a
// reply to a GBNF grammar.
//
// Every reply is one stream of events per choice (reply.go), read once
// from the model's text by internal/chat's reader; each API's chunks,
// messages, events and items are formatters of those events.
// The transformers GenerationConfig fields (top_k, min_p, typical_p,
// repetition_penalty, no_repeat_ngram_size, do_sample, sequence_bias,
// suppress_tokens, ...) and Mirostat (mirostat 1 or 2, mirostat_tau,
// mirostat_eta) are accepted as extensions; the server's base config (see
// Config.Base) gives every field a request leaves out.
//
// A field the server does not know (the first in the body's order), bad
// JSON, invalid UTF-8 or a bad value is answered with 400 and OpenAI's
// error object naming the field; a Content-Type that is not JSON with 415
// (none is taken as JSON); a body over Config.MaxBodyBytes with 413; a
// prompt longer than a sequence with 400 and code context_length_exceeded;
// more concurrent sequences than Config.MaxConcurrent with 429. A client
// that goes away cancels its requests: the engine frees their sequences at
// its next step. A request stops counting against MaxConcurrent when its
// generation ends: its reply is written from memory, and a client that
// reads nothing of it for Config.WriteTimeout, or whose stream has more
// than Config.MaxBufferedBytes waiting, is cut (and counted in the
// metrics).
package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/clicommon"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// CacheStats is the prefix cache (a *prefixcache.Cache) as the metrics see
// it.
type CacheStats interface {
	Stats() prefixcache.Stats
}

// Defaults of Config's limits.
const (
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxConcurrent    = 64
	DefaultWriteTimeout     = 30 * time.Second
	DefaultMaxBufferedBytes = 16 << 20
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
	// DefaultMaxConcurrent). A request counts until its generation ends,
	// not until its reply is written.
	MaxConcurrent int
	// WriteTimeout cuts a connection whose client reads nothing for that
	// long while a reply waits to be written (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxBufferedBytes cuts a stream whose events waiting to be written
	// exceed it (default DefaultMaxBufferedBytes): the generation never
	// waits for the client, so a client slower than it finds its stream
	// cut rather than the server's memory filled.
	MaxBufferedBytes int64
	// ChatTemplate is the model's Jinja chat template, which renders chat
	// prompts with their tools; nil renders them with the engine
	// tokenizer's (llama.cpp's built-in templates), which is also the
	// fallback when the Jinja template fails on a request. Every chat
	// reply names the one that ran in its X-Chat-Template header (jinja or
	// builtin).
	ChatTemplate *ChatTemplate
	// Cache reports the prefix cache's counters; nil reports zeros.
	Cache CacheStats
	// Log receives a line per failed request (status 500); nil discards.
	Log *log.Logger
	// APIKey, when set, is required as a Bearer token or an x-api-key
	// header on every endpoint but /health and /metrics (401 otherwise).
	APIKey string
	// CORSOrigins are the origins whose pages may call the server ("*":
	// any); none means same-origin only, without CORS headers.
	CORSOrigins []string
	// Embedder, when set, answers /v1/embeddings (embeddings.go); without
	// it that endpoint answers 400. The generation endpoints do not use it.
	Embedder Embedder
	// Matryoshka says the model's embeddings keep their meaning cut to
	// their first values, so that /v1/embeddings may take dimensions.
	Matryoshka bool
	// Limits bound the work of preparing a request; zero fields take
	// their defaults.
	Limits Limits
	// Details describe the model to Ollama's /api/tags, /api/show and
	// /api/ps (ollama_models.go).
	Details ModelDetails
	// Media, when set, reads the images and audio of chat messages (the
	// model's projector, llamaserve --mmproj); without it a request with
	// media is answered 400.
	Media MediaPrompter
}

// Server is the HTTP handler of llamaserve.
type Server struct {
	cfg     Config
	params  params
	mux     *http.ServeMux
	created int64

	apiKeyHash []byte // the digest of Config.APIKey; nil without one

	inFlight   atomic.Int64 // sequences of the requests in progress
	embedTurns turns        // the embeddings context's, input by input
	metrics    metrics

	// stopping ends when Abort is called: every request in progress ends.
	stopping context.Context
	abort    context.CancelFunc
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxBufferedBytes <= 0 {
		cfg.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	cfg.Limits = cfg.Limits.withDefaults()
	base := cfg.Base
	if base == nil {
		base = OpenAIBase()
	}
	s := &Server{
		cfg: cfg,
		params: params{base: base, vocab: cfg.Engine.VocabSize(), slotSize: cfg.SequenceSize,
			formats: &formats{tok: cfg.Tokenizer, vocab: cfg.Engine.VocabSize(), maxSchemaBytes: cfg.Limits.MaxSchemaBytes},
			tok:     cfg.Tokenizer, chat: cfg.ChatTemplate, limits: cfg.Limits, media: cfg.Media},
		mux:     http.NewServeMux(),
		created: time.Now().Unix(),

		apiKeyHash: apiKeyDigest(cfg.APIKey),
	}
	s.params.logf = s.logf
	s.metrics.requests = map[requestKey]uint64{}
	s.stopping, s.abort = context.WithCancel(context.Background())
	s.mux.HandleFunc("/v1/completions", s.completions)
	s.mux.HandleFunc("/v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("/v1/models", s.models)
	s.mux.HandleFunc("/v1/models/{id...}", s.model)
	s.mux.HandleFunc("/health", s.health)
	s.mux.HandleFunc("/metrics", s.metricsHandler)
	s.moreRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &requestError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("no endpoint %s", r.URL.Path)})
	})
	return s
}

// Abort ends every request in progress, as when the server must stop
// before they end: a stream ends with an error event, a reply not yet
// written is answered 503, and requests that come later are answered 503.
// The caller then closes the connections (http.Server.Close) once the
// handlers have written these last words.
func (s *Server) Abort() { s.abort() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A client that reads nothing cannot hold a handler forever: every
	// write must go through within the write timeout of the response's
	// start (the replies that write for longer move the deadline as they
	// go).
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, timeout: s.cfg.WriteTimeout}
	sw.deadline()
	// A path with a trailing slash is the same endpoint, as OpenAI's
	// clients and llama-server have it.
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r.URL.Path, r.URL.RawPath = "/"+strings.Trim(p, "/"), ""
	}
	// The pattern, not the path, labels the metrics: their number stays
	// bounded whatever paths clients ask for.
	_, path := s.mux.Handler(r)
	if path == "/" || path == "" {
		path = "other"
	}
	// Ollama's paths answer errors in Ollama's shape.
	hw := ollamaWriter(sw, r.URL.Path)
	if !s.gate(hw, r) {
		s.mux.ServeHTTP(hw, r)
	}
	s.metrics.count(path, sw.status)
}

// statusWriter records the status of a response, and moves the write
// deadline to the write timeout from its start: an answer written after a
// long generation (an error, a 503) has the whole timeout.
type statusWriter struct {
	http.ResponseWriter
	status  int
	wrote   bool
	timeout time.Duration
}

func (w *statusWriter) deadline() {
	http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		w.deadline()
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

// errorShaper is the ResponseWriter of an API whose errors have another
// shape than OpenAI's (anthropicWriter).
type errorShaper interface {
	writeShapedError(e *requestError)
}

func writeError(w http.ResponseWriter, e *requestError) {
	if es, ok := w.(errorShaper); ok {
		es.writeShapedError(e)
		return
	}
	var body apiError
	body.Error.Message = quote.Message(e.msg)
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

// writeChunk is the most bytes written under one deadline: a client that
// reads a large reply slowly but steadily is not cut.
const writeChunk = 64 << 10

// writeReply writes data as a JSON reply, each chunk within the write
// timeout of the one before; it reports whether the client took it all.
func (s *Server) writeReply(w http.ResponseWriter, data []byte) bool {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for len(data) > 0 {
		n := min(len(data), writeChunk)
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(data[:n]); err != nil {
			s.writeFailed(err)
			return false
		}
		data = data[n:]
	}
	return true
}

// writeFailed counts a write that failed because of the write timeout as a
// cut connection (a client that closed its connection is not one).
func (s *Server) writeFailed(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.metrics.cut(cutWriteTimeout)
	}
}

// checkContentType refuses a body that says it is not JSON: a missing
// Content-Type is taken as JSON, and the charset, when given, must be UTF-8.
func checkContentType(h string) *requestError {
	if h == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(h)
	if err != nil {
		return &requestError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
			msg: fmt.Sprintf("Content-Type %s cannot be read: %v; send application/json", quote.String(h), err)}
	}
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		msg := fmt.Sprintf("Content-Type %s: the body must be JSON, sent as application/json", mt)
		if mt == "application/x-www-form-urlencoded" {
			msg += " (curl -d sends application/x-www-form-urlencoded: add -H 'Content-Type: application/json')"
		}
		return &requestError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", msg: msg}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return &requestError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
			msg: fmt.Sprintf("Content-Type charset %s: the body must be UTF-8", cs)}
	}
	return nil
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
			msg: fmt.Sprintf("the model %s does not exist; this server has %q", quote.String(id), s.cfg.ModelID)})
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

// planContext is the context of a request's plan (its chat template's
// render): it ends when the client leaves or the server aborts.
func (s *Server) planContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request)     { s.generate(w, r, false) }
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) }

// generate serves both generation endpoints.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
	req, err := decodeRequest(body, chat)
	if err == nil {
		var p *plan
		ctx, done := s.planContext(r)
		p, err = s.params.plan(ctx, req, chat)
		done()
		if err == nil {
			s.run(w, r, h, req, p, chat)
			return
		}
	}
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	writeError(w, re)
}

// errShuttingDown answers the requests that Abort ends.
var errShuttingDown = &requestError{status: http.StatusServiceUnavailable, code: "server_shutting_down",
	msg: "the server is shutting down: the request was cut"}

// run submits the choices of p and writes the response.
func (s *Server) run(w http.ResponseWriter, r *http.Request, h *holding, req *apiRequest, p *plan, chat bool) {
	ctx, cancel, ok := s.admit(w, r, h, p)
	if !ok {
		return
	}
	release := h.release
	defer cancel()
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
		choices[i] = p.newChoice(i, task, s.cfg.Tokenizer)
	}
	resp := &response{
		id: fmt.Sprintf("cmpl-%016x", rand.Uint64()), created: time.Now().Unix(),
		model: s.cfg.ModelID, chat: chat, promptTokens: promptTokens,
	}
	if chat {
		resp.id = "chat" + resp.id
	}
	if req.Stream {
		s.stream(ctx, r.Context(), cancel, w, resp, choices, p.includeUsage, release)
		return
	}
	replies := make([]wholeReply, len(choices))
	for i, c := range choices {
		replies[i] = c.whole()
		if ctx.Err() != nil {
			if r.Context().Err() == nil { // not the client: Abort
				writeError(w, errShuttingDown)
			}
			return
		}
		if replies[i].Err != nil {
			writeError(w, s.choiceError(r.URL.Path, replies[i].Err))
			return
		}
	}
	release()
	data, err := json.Marshal(resp.whole(choices, replies))
	if err != nil {
		s.logf("%s: %v", r.URL.Path, err)
		writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
		return
	}
	s.writeReply(w, append(data, '\n'))
}

// choiceError maps the error that ended a choice to its response: a
// grammar past its budget (grammar.ErrBudget) and scores that leave no
// token to choose (suppress_tokens of every token, a grammar whose tokens
// bad_words_ids bans) are the request's doing, 400; anything else is the
// server's, 500, and logged with where.
func (s *Server) choiceError(where string, err error) *requestError {
	if errors.Is(err, grammar.ErrBudget) {
		return &requestError{status: http.StatusBadRequest, code: "grammar_budget_exceeded", msg: err.Error()}
	}
	if errors.Is(err, logits.ErrNoChoice) {
		return badRequest("", "the request leaves no token to choose: its logit_bias, response_format, tool_choice or generation fields (suppress_tokens, bad_words_ids, ...) give every token a score of -inf (%s)",
			strings.TrimPrefix(err.Error(), "logits: "))
	}
	s.logf("%s: %v", where, err)
	return &requestError{status: http.StatusInternalServerError, msg: err.Error()}
}

// submitError maps an error of Engine.Submit to its response.
func (s *Server) submitError(err error, chat bool) *requestError {
	msg := clicommon.Line(err)
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

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		s.cfg.Log.Printf(format, args...)
	}
}

func ptr[T any](v T) *T { return &v }

// OpenAIBase is the generation config of Config.Base nil: OpenAI's
// defaults, sampling at temperature 1 without top-k.
func OpenAIBase() *genconfig.Config {
	base := genconfig.Default()
	base.DoSample = true
	base.TopK = 0
	return base
}
