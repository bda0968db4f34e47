package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/llamaloop/llamaloop/embedding"
	"github.com/llamaloop/llamaloop/internal/quote"
)

// Embedder computes the pooled embeddings /v1/embeddings answers with;
// llamaserve's runs llamacpp's Context.Embed on a context of its own.
type Embedder interface {
	// Embed returns the pooled embedding of each input as the model
	// computes it (not normalised). It honours ctx.
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
	// Dimensions is the width of an embedding.
	Dimensions() int
	// MaxTokens is the most tokens of one input.
	MaxTokens() int
}

// MaxEmbeddingInputs is the most inputs of one /v1/embeddings request, as
// OpenAI has it.
const MaxEmbeddingInputs = 2048

// embeddingsRequest is the body of /v1/embeddings.
type embeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// embeddingObject is one embedding of the reply; Embedding is a []float32
// or, with encoding_format base64, the base64 of its little-endian float32
// bytes.
type embeddingObject struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingsResponse struct {
	Object string            `json:"object"`
	Data   []embeddingObject `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embeddings answers OpenAI's POST /v1/embeddings: the pooled embedding of
// each input, truncated to dimensions when the model can be
// (Config.Matryoshka), then L2-normalised as OpenAI's are.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	emb := s.cfg.Embedder
	if emb == nil {
		writeError(w, &requestError{status: http.StatusBadRequest, code: "embeddings_not_loaded",
			msg: "this server computes no embeddings: start llamaserve with --embeddings"})
		return
	}
	var req embeddingsRequest
	if e := decodeStrict(body, []string{"input", "model", "encoding_format", "dimensions", "user"}, &req); e != nil {
		writeError(w, e)
		return
	}
	inputs, e := s.embeddingInputs(req.Input, emb.MaxTokens())
	if e != nil {
		writeError(w, e)
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeError(w, badRequest("encoding_format", "encoding_format %s (want float or base64)", quote.String(req.EncodingFormat)))
		return
	}
	dims := emb.Dimensions()
	if d := req.Dimensions; d != nil && *d != dims {
		switch {
		case *d < 1 || *d > dims:
			writeError(w, badRequest("dimensions", "dimensions %d outside [1, %d], the model's width", *d, dims))
			return
		case !s.cfg.Matryoshka:
			writeError(w, badRequest("dimensions", "the model's embeddings cannot be truncated to %d dimensions: only a model "+
				"trained for it (Matryoshka representation learning) keeps their meaning, which no GGUF key says; "+
				"start llamaserve with --matryoshka if it was", *d))
			return
		}
		dims = *d
	}
	if s.stopping.Err() != nil {
		writeError(w, errShuttingDown)
		return
	}
	if s.inFlight.Add(1) > int64(s.cfg.MaxConcurrent) {
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		writeError(w, &requestError{status: http.StatusTooManyRequests, code: "server_busy",
			msg: fmt.Sprintf("the server runs %d sequences at most; try again", s.cfg.MaxConcurrent)})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.stopping, cancel)
	vecs, err := emb.Embed(ctx, inputs)
	stop()
	cancel()
	s.inFlight.Add(-1)
	if err != nil {
		switch {
		case s.stopping.Err() != nil:
			writeError(w, errShuttingDown)
		case r.Context().Err() == nil:
			s.logf("embeddings: %v", err)
			writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
		}
		return
	}
	resp := embeddingsResponse{Object: "list", Model: s.cfg.ModelID, Data: make([]embeddingObject, len(vecs))}
	for i, v := range vecs {
		v = v[:dims]
		embedding.Normalize(v, embedding.NormL2)
		resp.Data[i] = embeddingObject{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			resp.Data[i].Embedding = base64Floats(v)
		}
		resp.Usage.PromptTokens += len(inputs[i])
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	data, err := json.Marshal(resp)
	if err != nil {
		writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
		return
	}
	s.writeReply(w, data)
}

// embeddingInputs reads input: a string, an array of strings, an array of
// token ids or an array of such arrays. A text is tokenized with the
// model's BOS (and EOS) where it wants them, its special tokens' texts as
// plain text.
func (s *Server) embeddingInputs(raw json.RawMessage, maxTokens int) ([][]int32, *requestError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("input", "input is required")
	}
	// each form into a fresh value: a failed json.Unmarshal leaves what it
	// had decoded until its error
	var inputs [][]int32
	var texts []string
	var text string
	var ids []int32
	switch {
	case json.Unmarshal(raw, &text) == nil:
		texts = []string{text}
	case json.Unmarshal(raw, &texts) == nil:
	case json.Unmarshal(raw, &ids) == nil:
		texts, inputs = nil, [][]int32{ids}
	case json.Unmarshal(raw, &inputs) == nil:
		texts = nil
	default:
		return nil, badRequest("input", "input must be a string, an array of strings, an array of token ids or an array of such arrays")
	}
	for _, t := range texts {
		if t == "" {
			return nil, badRequest("input", "input %d is an empty string", len(inputs))
		}
		toks, err := s.cfg.Tokenizer.Tokenize(t, true, false)
		if err != nil {
			return nil, badRequest("input", "input %d: %v", len(inputs), err)
		}
		inputs = append(inputs, toks)
	}
	if len(inputs) == 0 || len(inputs) > MaxEmbeddingInputs {
		return nil, badRequest("input", "%d inputs (want 1 to %d)", len(inputs), MaxEmbeddingInputs)
	}
	for i, in := range inputs {
		if len(in) == 0 {
			return nil, badRequest("input", "input %d is empty", i)
		}
		if len(in) > maxTokens {
			return nil, &requestError{status: http.StatusBadRequest, param: "input", code: "context_length_exceeded",
				msg: fmt.Sprintf("input %d has %d tokens; an embedding takes at most %d (--batch)", i, len(in), maxTokens)}
		}
		for j, t := range in {
			if t < 0 || int(t) >= s.params.vocab {
				return nil, badRequest("input", "input %d: token %d is %d, not a token id in [0, %d)", i, j, t, s.params.vocab)
			}
		}
	}
	return inputs, nil
}

// base64Floats is the base64 of v's little-endian float32 bytes, as
// OpenAI's encoding_format base64 has it.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
