package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// The replies of /api/chat and /api/generate: newline-delimited JSON
// objects when streamed (Ollama streams by default), one object otherwise.

// ollamaMetrics are the counts and times of a reply (api.Metrics), in
// nanoseconds. They are measured by the server around the engine: prompt
// evaluation from the submission to the first event of the reply, the
// evaluation from there to its end; the model is loaded at start, so
// load_duration is 0 (left out).
type ollamaMetrics struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

type ollamaOutMessage struct {
	Role      string              `json:"role"`
	Content   string              `json:"content"`
	Thinking  string              `json:"thinking,omitempty"`
	ToolCalls []ollamaOutToolCall `json:"tool_calls,omitempty"`
}

type ollamaOutToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaChatResponse is api.ChatResponse.
type ollamaChatResponse struct {
	Model      string           `json:"model"`
	CreatedAt  time.Time        `json:"created_at"`
	Message    ollamaOutMessage `json:"message"`
	Done       bool             `json:"done"`
	DoneReason string           `json:"done_reason,omitempty"`
	Logprobs   []tokenLogprob   `json:"logprobs,omitempty"`
	ollamaMetrics
}

// ollamaGenerateResponse is api.GenerateResponse.
type ollamaGenerateResponse struct {
	Model      string              `json:"model"`
	CreatedAt  time.Time           `json:"created_at"`
	Response   string              `json:"response"`
	Thinking   string              `json:"thinking,omitempty"`
	Done       bool                `json:"done"`
	DoneReason string              `json:"done_reason,omitempty"`
	ToolCalls  []ollamaOutToolCall `json:"tool_calls,omitempty"`
	Logprobs   []tokenLogprob      `json:"logprobs,omitempty"`
	ollamaMetrics
}

// ollamaPiece is what a reply adds at one step: text, reasoning, calls
// complete, the log-probabilities of its tokens and, at its end, why it
// ended ("stop", "length").
type ollamaPiece struct {
	content, thinking string
	calls             []toolCall
	logprobs          []tokenLogprob
	finish            string
}

// ollamaCalls are calls in Ollama's shape, numbered from first.
func ollamaCalls(calls []toolCall, first int) []ollamaOutToolCall {
	out := make([]ollamaOutToolCall, len(calls))
	for i, c := range calls {
		out[i].ID = c.ID
		out[i].Function.Index = first + i
		out[i].Function.Name = c.Name
		out[i].Function.Arguments = json.RawMessage(c.Arguments)
	}
	return out
}

// ollamaReply gathers a reply's pieces into the object one response (or
// the last of a stream) holds.
type ollamaReply struct {
	content, thinking []byte
	calls             []toolCall
	logprobs          []tokenLogprob
	finish            string
}

func (r *ollamaReply) add(p ollamaPiece) {
	r.content = append(r.content, p.content...)
	r.thinking = append(r.thinking, p.thinking...)
	r.calls = append(r.calls, p.calls...)
	r.logprobs = append(r.logprobs, p.logprobs...)
	if p.finish != "" {
		r.finish = p.finish
	}
}

// ollamaRun is one Ollama request on its way: the chat request that runs
// it and the writer of its objects (chat or generate).
type ollamaRun struct {
	s      *Server
	chat   bool // /api/chat
	model  string
	start  time.Time
	stream bool
}

// object is the response object of a piece (or of the whole reply) for
// the endpoint.
func (o *ollamaRun) object(p ollamaPiece, done bool, m ollamaMetrics, firstCall int) any {
	now := time.Now().UTC()
	var calls []ollamaOutToolCall
	if len(p.calls) > 0 {
		calls = ollamaCalls(p.calls, firstCall)
	}
	if o.chat {
		r := ollamaChatResponse{Model: o.model, CreatedAt: now, Done: done, Logprobs: p.logprobs,
			Message: ollamaOutMessage{Role: "assistant", Content: p.content, Thinking: p.thinking, ToolCalls: calls}}
		if done {
			r.DoneReason, r.ollamaMetrics = p.finish, m
		}
		return r
	}
	r := ollamaGenerateResponse{Model: o.model, CreatedAt: now, Response: p.content, Thinking: p.thinking, Done: done,
		ToolCalls: calls, Logprobs: p.logprobs}
	if done {
		r.DoneReason, r.ollamaMetrics = p.finish, m
	}
	return r
}

// ollamaError writes e in Ollama's shape: {"error": "..."} with its status.
func ollamaError(w http.ResponseWriter, err error) {
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	writeError(w, re) // the /api/ paths' writer (ollamaErrors) shapes it
}

// ollamaChat serves POST /api/chat.
func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	var req ollamaChatRequest
	o, h, think := s.ollamaStart(w, r, true, &req, func() (string, json.RawMessage) { return req.Model, req.Think })
	if o == nil {
		return
	}
	defer h.release()
	if len(req.Messages) == 0 {
		o.loaded(w, req.KeepAlive)
		return
	}
	chat, err := req.chatRequest()
	if err != nil {
		ollamaError(w, err)
		return
	}
	chat.ReasoningFormat, chat.thinking = reasoningFormat(think), think
	o.run(w, r, h, chat, true)
}

// ollamaGenerate serves POST /api/generate.
func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	var req ollamaGenerateRequest
	o, h, think := s.ollamaStart(w, r, false, &req, func() (string, json.RawMessage) { return req.Model, req.Think })
	if o == nil {
		return
	}
	defer h.release()
	if req.Prompt == "" {
		o.loaded(w, req.KeepAlive)
		return
	}
	gen, chat, err := req.generateRequest()
	if err != nil {
		ollamaError(w, err)
		return
	}
	if chat {
		gen.ReasoningFormat, gen.thinking = reasoningFormat(think), think
	} else if gen.Logprobs != nil {
		// A completion's logprobs is the number of alternatives.
		top := 0
		if gen.TopLogprobs != nil {
			top = *gen.TopLogprobs
		}
		gen.Logprobs, gen.TopLogprobs = json.RawMessage(fmt.Sprint(top)), nil
	}
	o.run(w, r, h, gen, chat)
}

// ollamaStart reads the body of /api/chat (chat) or /api/generate into v,
// holds its sequence and checks its model and think (which fields gives),
// or answers the request and returns nil. The caller releases h.
func (s *Server) ollamaStart(w http.ResponseWriter, r *http.Request, chat bool, v any,
	fields func() (model string, think json.RawMessage)) (o *ollamaRun, h *holding, think *bool) {
	start := time.Now()
	body := s.ollamaBody(w, r)
	if body == nil {
		return nil, nil, nil
	}
	if h = s.hold(w, 1); h == nil {
		return nil, nil, nil
	}
	err := decodeOllama(body, chat, v)
	model, rawThink := fields()
	if e := ollamaModelError(model, s.cfg.ModelID); err == nil && e != nil {
		err = e
	}
	if err == nil {
		think, err = ollamaThink(rawThink)
	}
	if err == nil {
		err = s.checkThink(model, think)
	}
	if err != nil {
		h.release()
		ollamaError(w, err)
		return nil, nil, nil
	}
	return &ollamaRun{s: s, chat: chat, model: model, start: start}, h, think
}

// checkThink refuses think true for a model whose template separates no
// reasoning (Ollama's answer to a model without the thinking capability).
func (s *Server) checkThink(model string, think *bool) error {
	if think != nil && *think && !s.thinks() {
		return badRequest("think", "%q does not support thinking", model)
	}
	return nil
}

// reasoningFormat is the reasoning_format of think: the thinking apart
// (Ollama's default for a model that thinks), or with think false inline
// in the content (the template, told enable_thinking false, may still let
// the model think: what it writes is then shown, not dropped).
func reasoningFormat(think *bool) string {
	if think != nil && !*think {
		return "none"
	}
	return "auto"
}

// thinks reports whether the model's replies reason apart (its template
// has reasoning markers).
func (s *Server) thinks() bool {
	return s.cfg.ChatTemplate != nil && s.cfg.ChatTemplate.format().Reasoning.Open != ""
}

// loaded answers a request without a prompt or messages, which loads the
// model in Ollama (and unloads it with keep_alive 0): here it is always
// loaded.
func (o *ollamaRun) loaded(w http.ResponseWriter, keepAlive json.RawMessage) {
	reason := "load"
	if string(keepAlive) == "0" || string(keepAlive) == `"0"` || string(keepAlive) == `"0s"` {
		reason = "unload"
	}
	writeJSON(w, http.StatusOK, o.object(ollamaPiece{finish: reason}, true, ollamaMetrics{}, 0))
}

// run plans req and writes its one choice.
func (o *ollamaRun) run(w http.ResponseWriter, r *http.Request, h *holding, req *apiRequest, chat bool) {
	s := o.s
	o.stream = req.Stream
	ctx, done := s.planContext(r)
	p, err := s.params.plan(ctx, req, chat)
	done()
	if err != nil {
		ollamaError(w, ollamaParam(err))
		return
	}
	if req.MaxTokens == nil && !chat {
		// A raw generate runs to its end, as a chat, not to OpenAI's 16
		// tokens of a completion.
		cfg := p.reqs[0].Config.Clone()
		n := s.params.slotSize
		cfg.MaxNewTokens = &n
		p.reqs[0].Config = cfg
	}
	actx, cancel, ok := s.admit(w, r, h, p)
	if !ok {
		return
	}
	defer cancel()
	submitted := time.Now()
	task, err := s.cfg.Engine.Submit(actx, p.reqs[0])
	if err != nil {
		ollamaError(w, ollamaParam(s.submitError(err, chat)))
		return
	}
	c := p.newChoice(0, task, s.cfg.Tokenizer)
	var first time.Time
	metrics := func() ollamaMetrics {
		end := time.Now()
		if first.IsZero() {
			first = end
		}
		return ollamaMetrics{TotalDuration: int64(end.Sub(o.start)), PromptEvalCount: task.PromptTokens(),
			PromptEvalDuration: max(1, int64(first.Sub(submitted))), EvalCount: c.tokens, EvalDuration: max(1, int64(end.Sub(first)))}
	}
	var reply ollamaReply
	if !o.stream {
		ollamaPieces(c, func(pc ollamaPiece) {
			if first.IsZero() {
				first = time.Now()
			}
			reply.add(pc)
		})
		h.release()
		switch {
		case actx.Err() != nil:
			if r.Context().Err() == nil {
				ollamaError(w, errShuttingDown)
			}
			return
		case c.err != nil:
			ollamaError(w, s.choiceError(r.URL.Path, c.err))
			return
		}
		whole := ollamaPiece{content: string(reply.content), thinking: string(reply.thinking), calls: reply.calls,
			logprobs: reply.logprobs, finish: reply.finish}
		data, err := json.Marshal(o.object(whole, true, metrics(), 0))
		if err != nil {
			ollamaError(w, err)
			return
		}
		s.writeReply(w, append(data, '\n'))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := s.newStreamWriter(w, cancel)
	send := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			s.logf("stream: %v", err)
			return
		}
		out.send(append(data, '\n'))
	}
	calls := 0
	ollamaPieces(c, func(pc ollamaPiece) {
		if first.IsZero() {
			first = time.Now()
		}
		finish := pc.finish
		pc.finish = ""
		if pc.content != "" || pc.thinking != "" || len(pc.calls) > 0 || len(pc.logprobs) > 0 {
			send(o.object(pc, false, ollamaMetrics{}, calls))
			calls += len(pc.calls)
		}
		if finish != "" {
			send(o.object(ollamaPiece{finish: finish}, true, metrics(), 0))
		}
	})
	h.release()
	switch {
	case actx.Err() != nil:
		if r.Context().Err() == nil && s.stopping.Err() != nil {
			send(map[string]string{"error": quote.Message(errShuttingDown.msg)})
		}
	case c.err != nil:
		send(map[string]string{"error": quote.Message(s.choiceError("stream", c.err).msg)})
	}
	out.close()
}

// ollamaPieces runs the choice and gives its reply's events to emit as
// Ollama's pieces: the answer's text, the thinking, and the calls, whole,
// on the last (Ollama's done_reason is "stop" for a reply that calls).
func ollamaPieces(c *choice, emit func(ollamaPiece)) {
	for ev := range c.reply() {
		if ev.Err != nil {
			return // c.err says it
		}
		var content, thinking []byte
		for _, d := range ev.Deltas {
			switch {
			case d.Call != nil: // the calls come whole with the finish
			case d.Reasoning != "":
				thinking = append(thinking, d.Reasoning...)
			default:
				content = append(content, d.Content...)
			}
		}
		pc := ollamaPiece{content: string(content), thinking: string(thinking), logprobs: ev.Logprobs}
		if ev.Finish != "" {
			pc.calls, pc.finish = ev.Calls, ev.Finish
			if pc.finish == "tool_calls" {
				pc.finish = "stop"
			}
		}
		emit(pc)
	}
}
