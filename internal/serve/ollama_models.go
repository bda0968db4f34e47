package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/internal/quote"
)

// ollamaAPIVersion is the version /api/version answers: that of Ollama's
// API this server follows (github.com/ollama/ollama/api of the module
// pinned in go.mod), which clients read to know what they may ask.
const ollamaAPIVersion = "0.17.4"

// ModelDetails describe the model to Ollama's /api/tags, /api/show and
// /api/ps; llamaserve fills them from the GGUF file. Zero fields are left
// out.
type ModelDetails struct {
	Architecture string // general.architecture, e.g. "llama"
	Quantization string // e.g. "Q8_0"
	Params       uint64 // number of parameters
	FileSize     int64
	ModifiedAt   time.Time
	// Digest names the file: llamaserve's is the SHA-256 of its path, size
	// and time (hashing gigabytes at start-up would cost seconds).
	Digest        string
	ContextLength int // n_ctx_train
	EmbeddingSize int
	Layers        int
	Heads         int
	HeadsKV       int
	// Template is the chat template's source, for /api/show.
	Template string
}

// ollamaName is the model's name in Ollama's listings: its id with a tag,
// ":latest" unless it has one.
func (s *Server) ollamaName() string {
	if strings.Contains(s.cfg.ModelID, ":") {
		return s.cfg.ModelID
	}
	return s.cfg.ModelID + ":latest"
}

type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func (s *Server) ollamaDetails() ollamaDetails {
	d := s.cfg.Details
	out := ollamaDetails{Format: "gguf", Family: d.Architecture, QuantizationLevel: d.Quantization,
		ParameterSize: parameterSize(d.Params)}
	if d.Architecture != "" {
		out.Families = []string{d.Architecture}
	}
	return out
}

// parameterSize writes n as Ollama does: "8.0B", "135M".
func parameterSize(n uint64) string {
	switch {
	case n == 0:
		return ""
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
}

type ollamaListModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt time.Time     `json:"modified_at"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
}

// ollamaTags serves GET /api/tags: the one model.
func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	d := s.cfg.Details
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaListModel{{Name: s.ollamaName(), Model: s.ollamaName(),
		ModifiedAt: d.ModifiedAt, Size: d.FileSize, Digest: d.Digest, Details: s.ollamaDetails()}}})
}

// ollamaPS serves GET /api/ps: the model, loaded as long as llamaserve
// runs (expires_at is Ollama's for keep_alive -1).
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	d := s.cfg.Details
	writeJSON(w, http.StatusOK, map[string]any{"models": []map[string]any{{
		"name": s.ollamaName(), "model": s.ollamaName(), "size": d.FileSize, "digest": d.Digest,
		"details": s.ollamaDetails(), "expires_at": time.Now().Add(time.Duration(math.MaxInt64)).UTC(),
		"size_vram": 0, "context_length": s.cfg.SequenceSize,
	}}})
}

// ollamaVersion serves GET /api/version.
func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaAPIVersion})
}

// capabilities are the model's, as /api/show names them: every chat takes
// tools (the template renders them, or the system message describes
// them).
func (s *Server) capabilities() []string {
	caps := []string{"completion", "tools"}
	if s.thinks() {
		caps = append(caps, "thinking")
	}
	if s.cfg.Embedder != nil {
		caps = append(caps, "embedding")
	}
	return caps
}

// ollamaShow serves POST /api/show: the model's details, its GGUF keys
// that matter to clients, its chat template and capabilities. system,
// template and options, which would describe a model made of this one,
// are refused.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	body := s.ollamaBody(w, r)
	if body == nil {
		return
	}
	var req struct {
		Model, Name, System, Template string
		Verbose                       bool
		Options                       json.RawMessage
	}
	if e := decodeStrict(body, []string{"model", "name", "system", "template", "verbose", "options"}, &req); e != nil {
		ollamaError(w, e)
		return
	}
	model := req.Model
	if model == "" {
		model = req.Name // the older field
	}
	if e := ollamaModelError(model, s.cfg.ModelID); e != nil {
		ollamaError(w, e)
		return
	}
	if req.System != "" || req.Template != "" || !ollamaEmpty(req.Options) {
		ollamaError(w, badRequest("", "system, template and options describe a model made of this one: this server creates no models"))
		return
	}
	d := s.cfg.Details
	info := map[string]any{}
	if a := d.Architecture; a != "" {
		info["general.architecture"] = a
		for k, v := range map[string]int{"context_length": d.ContextLength, "embedding_length": d.EmbeddingSize,
			"block_count": d.Layers, "attention.head_count": d.Heads, "attention.head_count_kv": d.HeadsKV} {
			if v != 0 {
				info[a+"."+k] = v
			}
		}
	}
	if d.Params != 0 {
		info["general.parameter_count"] = d.Params
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"modelfile":    fmt.Sprintf("# served by llamaserve\nFROM %s\n", s.cfg.ModelID),
		"template":     d.Template,
		"details":      s.ollamaDetails(),
		"model_info":   info,
		"capabilities": s.capabilities(),
		"modified_at":  d.ModifiedAt,
	})
}

// ollamaEmbed serves POST /api/embed: the L2-normalised embeddings of the
// inputs (a string or strings), as Ollama's are. truncate changes
// nothing: an input longer than the embeddings context is a 400 here.
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		KeepAlive  json.RawMessage `json:"keep_alive"`
		Truncate   *bool           `json:"truncate"`
		Dimensions int             `json:"dimensions"`
		Options    json.RawMessage `json:"options"`
	}
	start := time.Now()
	h, emb, ok := s.ollamaEmbedStart(w, r, []string{"model", "input", "keep_alive", "truncate", "dimensions", "options"}, &req)
	if !ok {
		return
	}
	defer h.release()
	if e := ollamaModelError(req.Model, s.cfg.ModelID); e != nil {
		ollamaError(w, e)
		return
	}
	if ollamaEmpty(req.Input) {
		writeJSON(w, http.StatusOK, map[string]any{"model": req.Model, "embeddings": [][]float32{}})
		return
	}
	if t := bytes.TrimSpace(req.Input); t[0] != '"' && t[0] != '[' {
		ollamaError(w, badRequest("input", "invalid input type"))
		return
	}
	dims := emb.Dimensions()
	if d := req.Dimensions; d != 0 && d != dims {
		switch {
		case d < 1 || d > dims:
			ollamaError(w, badRequest("dimensions", "dimensions %d outside [1, %d], the model's width", d, dims))
			return
		case !s.cfg.Matryoshka:
			ollamaError(w, badRequest("dimensions", "the model's embeddings cannot be truncated to %d dimensions: start llamaserve with --matryoshka if the model was trained for it", d))
			return
		}
		dims = d
	}
	vecs, tokens, ok := s.ollamaEmbedRun(w, r, h, emb, req.Input)
	if !ok {
		return
	}
	for i, v := range vecs {
		vecs[i] = v[:dims]
		embedding.Normalize(vecs[i], embedding.NormL2)
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": req.Model, "embeddings": vecs,
		"total_duration": time.Since(start).Nanoseconds(), "prompt_eval_count": tokens})
}

// ollamaEmbeddings serves POST /api/embeddings, Ollama's older endpoint:
// the embedding of one prompt, not normalised.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string          `json:"model"`
		Prompt    string          `json:"prompt"`
		KeepAlive json.RawMessage `json:"keep_alive"`
		Options   json.RawMessage `json:"options"`
	}
	h, emb, ok := s.ollamaEmbedStart(w, r, []string{"model", "prompt", "keep_alive", "options"}, &req)
	if !ok {
		return
	}
	defer h.release()
	if e := ollamaModelError(req.Model, s.cfg.ModelID); e != nil {
		ollamaError(w, e)
		return
	}
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, map[string]any{"embedding": []float32{}})
		return
	}
	input, _ := json.Marshal(req.Prompt)
	vecs, _, ok := s.ollamaEmbedRun(w, r, h, emb, input)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": vecs[0]})
}

// ollamaEmbedStart reads an embeddings request into v (keep_alive and
// options are accepted and change nothing of an embedding) and holds its
// sequence, or answers.
func (s *Server) ollamaEmbedStart(w http.ResponseWriter, r *http.Request, fields []string, v any) (*holding, Embedder, bool) {
	body := s.ollamaBody(w, r)
	if body == nil {
		return nil, nil, false
	}
	emb := s.cfg.Embedder
	if emb == nil {
		ollamaError(w, badRequest("", "this server computes no embeddings: start llamaserve with --embeddings"))
		return nil, nil, false
	}
	h := s.hold(w, 1)
	if h == nil {
		return nil, nil, false
	}
	if e := decodeStrict(body, fields, v); e != nil {
		h.release()
		ollamaError(w, e)
		return nil, nil, false
	}
	return h, emb, true
}

// ollamaEmbedRun tokenizes input and computes its embeddings under the
// bounds of /v1/embeddings; it reports their tokens.
func (s *Server) ollamaEmbedRun(w http.ResponseWriter, r *http.Request, h *holding, emb Embedder, input json.RawMessage) ([][]float32, int, bool) {
	inputs, e := s.embeddingInputs(input, emb.MaxTokens())
	if e != nil {
		ollamaError(w, e)
		return nil, 0, false
	}
	vecs, err := s.embedFor(r, h, emb, inputs)
	if err != nil {
		switch {
		case s.stopping.Err() != nil:
			ollamaError(w, errShuttingDown)
		case r.Context().Err() == nil:
			s.logf("%s: %v", r.URL.Path, err)
			ollamaError(w, err)
		}
		return nil, 0, false
	}
	tokens := 0
	for _, in := range inputs {
		tokens += len(in)
	}
	return vecs, tokens, true
}

// ollamaBody reads a request's body as readBody does, but for a body
// sent as a form (curl -d's default, which Ollama's documentation uses
// throughout): Ollama's server reads any body as JSON.
func (s *Server) ollamaBody(w http.ResponseWriter, r *http.Request) []byte {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		r.Header.Del("Content-Type")
	}
	return s.readBody(w, r)
}

// ollamaErrors is the ResponseWriter of Ollama's paths: writeError gives
// every error there (the API key's 401, 404, 405, 413, 415, 429 and the
// requests' own) Ollama's shape, {"error": "..."}.
type ollamaErrors struct {
	http.ResponseWriter
}

func (w *ollamaErrors) writeShapedError(e *requestError) {
	writeJSON(w.ResponseWriter, e.status, map[string]string{"error": quote.Message(e.msg)})
}

// Flush sends what is buffered.
func (w *ollamaErrors) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *ollamaErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ollamaWriter is w, with Ollama's errors on its paths.
func ollamaWriter(w http.ResponseWriter, path string) http.ResponseWriter {
	if path == "/api" || strings.HasPrefix(path, "/api/") {
		return &ollamaErrors{ResponseWriter: w}
	}
	return w
}
