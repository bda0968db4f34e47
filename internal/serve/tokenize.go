package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// readBody reads a POST request's JSON body, answering the request itself
// (405, 415, 413) when it cannot; nil then.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) []byte {
	if !allow(w, r, http.MethodPost) {
		return nil
	}
	if e := checkContentType(r.Header.Get("Content-Type")); e != nil {
		writeError(w, e)
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, &requestError{status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit)})
			return nil
		}
		// A malformed body (a bad chunk length, a body cut short): the
		// answer is an error, which a client that went away never reads.
		writeError(w, badRequest("", "the body cannot be read: %v", err))
		return nil
	}
	return body
}

// decodeStrict reads body, a JSON object of the fields known, into v: bad
// JSON, invalid UTF-8 and the first field not among known are 400.
func decodeStrict(body []byte, known []string, v any) *requestError {
	if !utf8.Valid(body) {
		return badRequest("", "the body is not valid UTF-8")
	}
	keys, err := objectKeys(body)
	if err != nil {
		return badRequest("", "the body is not a JSON object: %v", err)
	}
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return badRequest(quote.Value(k), "unknown field %s", quote.String(k))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "field %q: a JSON %s cannot be %s", te.Field, te.Value, te.Type)
		}
		return badRequest("", "the body is not a JSON object: %v", err)
	}
	if dec.More() {
		return badRequest("", "the body holds more than one JSON value")
	}
	return nil
}

// tokenizeRequest is the body of /tokenize, as llama.cpp's server reads it.
type tokenizeRequest struct {
	// Content is a text, or an array of texts and token ids (a token id
	// stays as it is).
	Content json.RawMessage `json:"content"`
	// AddSpecial adds the model's BOS (and EOS) tokens where it wants them
	// (default false).
	AddSpecial bool `json:"add_special"`
	// ParseSpecial reads the text of special tokens as those tokens
	// (default true).
	ParseSpecial *bool `json:"parse_special"`
	// WithPieces lists {id, piece} instead of ids.
	WithPieces bool `json:"with_pieces"`
}

// tokenPiece is a token of /tokenize with with_pieces: its piece is a
// string when it is valid UTF-8, its bytes otherwise, as llama.cpp's
// server has it.
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1) // tokenizing is work too
	if h == nil {
		return
	}
	defer h.release()
	var req tokenizeRequest
	if e := decodeStrict(body, []string{"content", "add_special", "parse_special", "with_pieces", "model"}, &req); e != nil {
		writeError(w, e)
		return
	}
	parseSpecial := req.ParseSpecial == nil || *req.ParseSpecial
	tokens, err := s.tokens(req.Content, req.AddSpecial, parseSpecial)
	if err != nil {
		writeError(w, err)
		return
	}
	if !req.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": tokens})
		return
	}
	pieces := make([]tokenPiece, len(tokens))
	for i, t := range tokens {
		b, err := s.cfg.Tokenizer.AppendPiece(nil, t, true)
		if err != nil {
			writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
			return
		}
		pieces[i].ID = t
		if utf8.Valid(b) {
			pieces[i].Piece = string(b)
		} else {
			ints := make([]int, len(b))
			for j, x := range b {
				ints[j] = int(x)
			}
			pieces[i].Piece = ints
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
}

// tokens tokenizes content, a text or an array of texts and token ids;
// add_special applies to the first text only, as in llama.cpp's server.
func (s *Server) tokens(content json.RawMessage, addSpecial, parseSpecial bool) ([]int32, *requestError) {
	content = bytes.TrimSpace(content)
	out := []int32{}
	if len(content) == 0 || string(content) == "null" {
		return out, nil
	}
	var parts []json.RawMessage
	if content[0] == '[' {
		if err := json.Unmarshal(content, &parts); err != nil {
			return nil, badRequest("content", "content must be a string or an array of strings and token ids")
		}
	} else {
		parts = []json.RawMessage{content}
	}
	for i, p := range parts {
		var text string
		if json.Unmarshal(p, &text) == nil {
			ids, err := s.cfg.Tokenizer.Tokenize(text, addSpecial && i == 0, parseSpecial)
			if err != nil {
				return nil, badRequest("content", "content: %v", err)
			}
			out = append(out, ids...)
			continue
		}
		var id int32
		if json.Unmarshal(p, &id) != nil {
			return nil, badRequest("content", "content[%d]: %s is neither a string nor a token id", i, quote.Value(p))
		}
		if id < 0 || int(id) >= s.cfg.Engine.VocabSize() {
			return nil, badRequest("content", "content[%d]: %d is not a token id in [0, %d)", i, id, s.cfg.Engine.VocabSize())
		}
		out = append(out, id)
	}
	return out, nil
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1) // tokenizing is work too
	if h == nil {
		return
	}
	defer h.release()
	var req struct {
		Tokens []int32 `json:"tokens"`
	}
	if e := decodeStrict(body, []string{"tokens", "model"}, &req); e != nil {
		writeError(w, e)
		return
	}
	var text []byte
	for i, t := range req.Tokens {
		if t < 0 || int(t) >= s.cfg.Engine.VocabSize() {
			writeError(w, badRequest("tokens", "tokens[%d]: %d is not a token id in [0, %d)", i, t, s.cfg.Engine.VocabSize()))
			return
		}
		var err error
		if text, err = s.cfg.Tokenizer.AppendPiece(text, t, true); err != nil {
			writeError(w, badRequest("tokens", "tokens[%d]: %v", i, err))
			return
		}
	}
	// Bytes that are not UTF-8 (a token list cut inside a character) are
	// sent as U+FFFD, as JSON must be UTF-8.
	writeJSON(w, http.StatusOK, map[string]string{"content": string(text)})
}
