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
	// The request counts against --max-concurrent from here: its inputs'
	// tokenization is work too.
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
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
	vecs, err := s.embedFor(r, h, emb, inputs)
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

// embed computes the embeddings of inputs one at a time, each in a turn of
// s.embedTurns: the requests that wait for the embeddings context take
// turns input by input, and a small request waits for an input of a large
// one, not for all of them.
// embedFor computes the embeddings of request r's inputs, cancelled when
// its client goes or the server aborts, and then releases h.
func (s *Server) embedFor(r *http.Request, h *holding, emb Embedder, inputs [][]int32) ([][]float32, error) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.stopping, cancel)
	vecs, err := s.embed(ctx, emb, inputs)
	stop()
	cancel()
	h.release()
	return vecs, err
}

func (s *Server) embed(ctx context.Context, emb Embedder, inputs [][]int32) ([][]float32, error) {
	vecs := make([][]float32, 0, len(inputs))
	for _, in := range inputs {
		if err := s.embedTurns.acquire(ctx); err != nil {
			return nil, err
		}
		v, err := emb.Embed(ctx, [][]int32{in})
		s.embedTurns.release()
		if err != nil {
			return nil, err
		}
		if len(v) != 1 {
			return nil, fmt.Errorf("the embedder returned %d embeddings for one input", len(v))
		}
		vecs = append(vecs, v[0])
	}
	return vecs, nil
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
	lim := s.cfg.Limits
	if n := len(texts) + len(inputs); n > lim.MaxEmbeddingInputs {
		return nil, &requestError{status: http.StatusBadRequest, param: "input", code: "too_many_inputs",
			msg: fmt.Sprintf("%d inputs: a request takes at most %d (llamaserve --max-embedding-inputs)", n, lim.MaxEmbeddingInputs)}
	}
	total := 0
	tooManyTokens := func(i int) *requestError {
		return &requestError{status: http.StatusBadRequest, param: "input", code: "too_many_tokens",
			msg: fmt.Sprintf("the inputs up to input %d have %d tokens: a request takes at most %d (llamaserve --max-embedding-tokens)", i, total, lim.MaxEmbeddingTokens)}
	}
	for _, t := range texts {
		if t == "" {
			return nil, badRequest("input", "input %d is an empty string", len(inputs))
		}
		toks, err := s.cfg.Tokenizer.Tokenize(t, true, false)
		if err != nil {
			return nil, badRequest("input", "input %d: %v", len(inputs), err)
		}
		if total += len(toks); total > lim.MaxEmbeddingTokens {
			return nil, tooManyTokens(len(inputs))
		}
		inputs = append(inputs, toks)
	}
	if len(inputs) == 0 {
		return nil, badRequest("input", "input is an empty array")
	}
	if texts == nil {
		for i, in := range inputs {
			if total += len(in); total > lim.MaxEmbeddingTokens {
				return nil, tooManyTokens(i)
			}
		}
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
