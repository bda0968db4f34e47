package serve

import (
	"bytes"
	"errors"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
)

// choice is one sequence of a response while it runs.
type choice struct {
	index    int
	task     *generation.Task
	stops    []string
	tok      backend.Tokenizer
	logprobs bool
	topN     int
	reader   outputReader // reads the text: nil, content only
	special  bool         // the text spells special tokens (generation.Request.RenderSpecial)

	text   []byte // generated so far
	sent   int    // bytes of text given to the response
	tokens int
	finish string
	err    error // a failure of the generation (not a cancellation)

	// pending are the logprobs of tokens whose text is held back.
	pending []pendingEntry
}

// logprobs are the log-probabilities of some tokens of a choice, in both
// APIs' shapes: completions lists tokens, token_logprobs and top_logprobs
// side by side, chat lists one entry per token.
type logprobs struct {
	entries []tokenLogprob
}

type tokenLogprob struct {
	Token   string       `json:"token"`
	Logprob float32      `json:"logprob"`
	Bytes   []int        `json:"bytes"`
	Top     []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// run iterates the choice's events. For each event it calls emit with the
// text that may be shown now (stop strings are left out, and text that may
// begin one is held back), the log-probabilities of the tokens whose text
// begins in it (nil unless asked) and, on the last event, the finish
// reason. The log-probabilities list the tokens of the text only: not the
// end token, nor the tokens of a stop string left out (a token that begins
// before the stop string is listed).
func (c *choice) run(emit func(text string, lp *logprobs, finish *string)) {
	var one logprobs
	for ev := range c.task.Events() {
		start := len(c.text) // where the token's bytes begin
		c.text = append(c.text, ev.Text...)
		if ev.Token >= 0 {
			c.tokens++
			if c.logprobs && ev.Finish != generation.FinishEOS {
				c.pending = append(c.pending, pendingEntry{start: start, entry: c.entry(ev)})
			}
		}
		end := len(c.text)
		var finish *string
		switch ev.Finish {
		case generation.NotFinished:
			end -= holdBack(c.text[c.sent:], c.stops)
		case generation.FinishStop:
			if i := bytes.Index(c.text, []byte(ev.StopString)); i >= c.sent {
				end = i
			}
			c.finish = "stop"
		case generation.FinishEOS:
			if c.special && c.tok != nil && ev.Token >= 0 {
				// A reply that is read renders special tokens (the
				// families' markers, [TOOL_CALLS], <|python_tag|>,
				// <think>): the end token's text is not the reply's.
				if p, err := c.tok.AppendPiece(nil, ev.Token, true); err == nil && bytes.HasSuffix(c.text[c.sent:], p) {
					c.text = c.text[:len(c.text)-len(p)]
					end = len(c.text)
				}
			}
			c.finish = "stop"
		case generation.FinishLength, generation.FinishContextFull:
			c.finish = "length"
		case generation.FinishCancelled:
			return
		default:
			c.err = ev.Err
			if c.err == nil {
				c.err = errors.New("generation failed")
			}
			return
		}
		if c.finish != "" {
			finish = &c.finish
		}
		lp := &one
		one.entries = one.entries[:0]
		// The tokens that begin in the text shown so far are released; at
		// the end, those that begin past it (in the stop string) are
		// dropped, and a token without bytes at the very end is kept.
		k := 0
		for k < len(c.pending) && (c.pending[k].start < end || finish != nil && c.pending[k].start == end && end == len(c.text)) {
			lp.entries = append(lp.entries, c.pending[k].entry)
			k++
		}
		c.pending = c.pending[k:]
		if finish != nil {
			c.pending = nil
		}
		text := string(c.text[c.sent:end])
		c.sent = end
		if text != "" || finish != nil || len(one.entries) > 0 {
			var l *logprobs
			if c.logprobs {
				l = &one
			}
			emit(text, l, finish)
		}
	}
}

// pendingEntry is a token's log-probabilities waiting for its text to be
// shown: start is the offset of its bytes in the choice's text.
type pendingEntry struct {
	start int
	entry tokenLogprob
}

// entry spells the token of ev and its alternatives.
func (c *choice) entry(ev generation.Event) tokenLogprob {
	e := tokenLogprob{Logprob: ev.Logprob}
	e.Token, e.Bytes = c.piece(ev.Token)
	if c.topN > 0 {
		e.Top = make([]topLogprob, len(ev.Top))
		for i, t := range ev.Top {
			e.Top[i].Logprob = t.Logprob
			e.Top[i].Token, e.Top[i].Bytes = c.piece(t.Token)
		}
	} else {
		e.Top = []topLogprob{}
	}
	return e
}

// piece is a token's text and its bytes (a token may hold part of a UTF-8
// character); special tokens are spelled.
func (c *choice) piece(t int32) (string, []int) {
	if c.tok == nil {
		return "", nil
	}
	b, err := c.tok.AppendPiece(nil, t, true)
	if err != nil {
		return "", nil
	}
	ints := make([]int, len(b))
	for i, x := range b {
		ints[i] = int(x)
	}
	return string(b), ints
}

// holdBack is the length of the longest end of text that begins one of
// stops: it may become a stop string, which is not shown.
func holdBack(text []byte, stops []string) int {
	h := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(text)); k > h; k-- {
			if bytes.HasSuffix(text, []byte(s[:k])) {
				h = k
				break
			}
		}
	}
	return h
}

// response is what every chunk and the whole response share.
type response struct {
	id           string
	created      int64
	model        string
	chat         bool
	promptTokens int
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (r *response) usage(choices []*choice) usage {
	u := usage{PromptTokens: r.promptTokens}
	for _, c := range choices {
		u.CompletionTokens += c.tokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// completionLogprobs is the logprobs object of /v1/completions.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// chatLogprobs is the logprobs object of /v1/chat/completions.
type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal []tokenLogprob `json:"refusal"`
}

// logprobsObject returns entries in the shape of the response's API (nil
// for none); offset is the text offset of its first token (completions).
func (r *response) logprobsObject(entries []tokenLogprob, offset int) any {
	if entries == nil {
		return nil
	}
	if r.chat {
		return chatLogprobs{Content: entries, Refusal: nil}
	}
	out := completionLogprobs{
		Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{},
	}
	for _, e := range entries {
		out.Tokens = append(out.Tokens, e.Token)
		out.TokenLogprobs = append(out.TokenLogprobs, e.Logprob)
		top := map[string]float32{}
		for _, t := range e.Top {
			if _, ok := top[t.Token]; !ok {
				top[t.Token] = t.Logprob
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(e.Token)
	}
	return out
}

type body struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           any    `json:"choices"`
	Usage             *usage `json:"usage,omitempty"`
}

func (r *response) body(object string, choices any) body {
	return body{ID: r.id, Object: object, Created: r.created, Model: r.model, SystemFingerprint: "llamaloop", Choices: choices}
}
