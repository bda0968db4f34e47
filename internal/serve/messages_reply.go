package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
)

// The Messages API's reply: a message whose content blocks are the
// choice's thinking, text and tool_use blocks in the order the model wrote
// them, streamed as Anthropic's server-sent events (message_start, ping,
// content_block_start / _delta / _stop per block, message_delta with the
// stop reason and usage, message_stop) or written whole.

// messageObject is Anthropic's Message.
type messageObject struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"` // of the wire shapes of messageBlock
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        messagesUsage  `json:"usage"`
	blocks       []messageBlock // the content as it is built
}

type messagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// messageBlock is a content block of the reply.
type messageBlock struct {
	kind  string // text, thinking or tool_use
	text  strings.Builder
	id    string
	name  string
	input json.RawMessage // a tool_use's input, once known
}

// The blocks as the API writes them.
type (
	textBlock struct {
		Type string `json:"type"` // text
		Text string `json:"text"`
	}
	thinkingBlock struct {
		Type      string `json:"type"` // thinking
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"` // none: nothing here signs the thinking
	}
	toolUseBlock struct {
		Type  string          `json:"type"` // tool_use
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
)

// wire is the block as the API writes it; start is its empty form of
// content_block_start.
func (b *messageBlock) wire(start bool) any {
	text := b.text.String()
	if start {
		text = ""
	}
	switch b.kind {
	case "thinking":
		return thinkingBlock{Type: "thinking", Thinking: text}
	case "tool_use":
		input := b.input
		if start || len(input) == 0 {
			input = json.RawMessage("{}")
		}
		return toolUseBlock{Type: "tool_use", ID: b.id, Name: b.name, Input: input}
	}
	return textBlock{Type: "text", Text: text}
}

// messageReply formats one choice's output as a message: each piece
// (thinking, text, a call's start or arguments) opens its block when the
// block before is of another kind or call, and, when send is set, goes out
// as its event.
type messageReply struct {
	msg          *messageObject
	send         func(event string, data any) // nil: a whole reply
	showThinking bool
	open         int         // the block being written; -1 none
	calls        map[int]int // the reader's call index -> block index
}

func newMessageReply(msg *messageObject, showThinking bool, send func(string, any)) *messageReply {
	return &messageReply{msg: msg, send: send, showThinking: showThinking, open: -1, calls: map[int]int{}}
}

func (mr *messageReply) emit(event string, data any) {
	if mr.send != nil {
		mr.send(event, data)
	}
}

// start sends the message_start event and a ping, as Anthropic does.
func (mr *messageReply) start() {
	if mr.send == nil {
		return
	}
	m := *mr.msg
	m.Content = []any{}
	mr.emit("message_start", messageStartEvent{Type: "message_start", Message: m})
	mr.emit("ping", typeOnly{Type: "ping"})
}

// openBlock closes the open block and opens one of kind.
func (mr *messageReply) openBlock(b *messageBlock) int {
	mr.closeBlock()
	mr.msg.blocks = append(mr.msg.blocks, *b)
	mr.open = len(mr.msg.blocks) - 1
	mr.emit("content_block_start", blockStartEvent{Type: "content_block_start", Index: mr.open, ContentBlock: b.wire(true)})
	return mr.open
}

func (mr *messageReply) closeBlock() {
	if mr.open < 0 {
		return
	}
	mr.emit("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: mr.open})
	mr.open = -1
}

// text adds text of kind "text" or "thinking".
func (mr *messageReply) text(kind, s string) {
	if s == "" || kind == "thinking" && !mr.showThinking {
		return
	}
	if mr.open < 0 || mr.msg.blocks[mr.open].kind != kind {
		mr.openBlock(&messageBlock{kind: kind})
	}
	mr.msg.blocks[mr.open].text.WriteString(s)
	var delta any = textDelta{Type: "text_delta", Text: s}
	if kind == "thinking" {
		delta = thinkingDelta{Type: "thinking_delta", Thinking: s}
	}
	mr.emit("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: mr.open, Delta: delta})
}

// call adds a piece of the reader's call i: its first names it, the next
// ones add to its arguments (its input's JSON text).
func (mr *messageReply) call(i int, id, name, args string) {
	k, ok := mr.calls[i]
	if !ok {
		k = mr.openBlock(&messageBlock{kind: "tool_use", id: toolUseID(id), name: name})
		mr.calls[i] = k
	}
	if args == "" {
		return
	}
	mr.msg.blocks[k].text.WriteString(args)
	mr.emit("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: k,
		Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: args}})
}

// toolUseID is a call's id as Anthropic spells them.
func toolUseID(id string) string {
	if strings.HasPrefix(id, "toolu_") {
		return id
	}
	if rest, ok := strings.CutPrefix(id, "call_"); ok && rest != "" {
		return "toolu_" + rest
	}
	return newItemID("toolu")
}

// finish ends the message: the calls' inputs as read at the end (by the
// reader's call index), the stop reason (the chat's "stop", "length" or
// "tool_calls"; stopSeq the stop sequence that ended it) and the output
// tokens.
func (mr *messageReply) finish(reason, stopSeq string, inputs map[int]string, outputTokens int) {
	// A call still open whose fragments fall short of its arguments as
	// read at the end gets the rest before it closes (the fragments joined
	// should be the arguments; a reader that holds back the end of a call
	// does not give them all).
	for i, k := range mr.calls {
		b := &mr.msg.blocks[k]
		in, ok := inputs[i]
		if k != mr.open || !ok {
			continue
		}
		if rest, ok := strings.CutPrefix(in, b.text.String()); ok && rest != "" {
			mr.call(i, "", "", rest)
		}
	}
	mr.closeBlock()
	for i, k := range mr.calls {
		b := &mr.msg.blocks[k]
		args := b.text.String()
		if in, ok := inputs[i]; ok {
			args = in
		}
		if json.Valid([]byte(args)) && bytes.HasPrefix(bytes.TrimSpace([]byte(args)), []byte("{")) {
			b.input = json.RawMessage(args)
		}
	}
	stop := "end_turn"
	switch {
	case reason == "length":
		stop = "max_tokens"
	case reason == "tool_calls" || len(mr.calls) > 0:
		stop = "tool_use"
	case stopSeq != "":
		stop = "stop_sequence"
		mr.msg.StopSequence = &stopSeq
	}
	mr.msg.StopReason = &stop
	mr.msg.Usage.OutputTokens = outputTokens
	mr.msg.Content = make([]any, len(mr.msg.blocks))
	for k := range mr.msg.blocks {
		mr.msg.Content[k] = mr.msg.blocks[k].wire(false)
	}
	ev := messageDeltaEvent{Type: "message_delta"}
	ev.Delta.StopReason, ev.Delta.StopSequence, ev.Usage.OutputTokens = stop, mr.msg.StopSequence, outputTokens
	mr.emit("message_delta", ev)
	mr.emit("message_stop", typeOnly{Type: "message_stop"})
}

// messages serves POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	w = anthropicWriter{w}
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
	req, mc, p, err := s.planMessages(r, body, false)
	if err != nil {
		writeError(w, asRequestError(err))
		return
	}
	s.runMessage(w, r, h, req, mc, p)
}

// planMessages decodes a Messages request and plans its chat request.
func (s *Server) planMessages(r *http.Request, body []byte, count bool) (*messagesRequest, *messagesChat, *plan, error) {
	req, err := decodeMessagesRequest(body, count)
	if err != nil {
		return nil, nil, nil, err
	}
	mc, err := req.chatRequest()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, done := s.planContext(r)
	p, err := s.params.plan(ctx, mc.chat, true)
	done()
	if err != nil {
		return nil, nil, nil, mc.messagesParam(err)
	}
	return req, mc, p, nil
}

func asRequestError(err error) *requestError {
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	return re
}

// countTokens serves POST /v1/messages/count_tokens: the prompt's tokens.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	w = anthropicWriter{w}
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
	_, mc, p, err := s.planMessages(r, body, true)
	if err != nil {
		writeError(w, asRequestError(err))
		return
	}
	n, err := s.promptTokens(p)
	if err != nil {
		writeError(w, mc.messagesParam(s.submitError(err, true)).(*requestError))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
}

// promptTokens counts the tokens of p's prompt: those the Jinja template
// made, or llama.cpp's built-in template's rendering tokenized (as the
// engine does, but for the text of a control token in a message, which
// counts as that token here).
func (s *Server) promptTokens(p *plan) (int, error) {
	req := p.reqs[0]
	if len(req.Prompt) > 0 {
		return len(req.Prompt), nil
	}
	tmpl, ok := s.cfg.Tokenizer.(backend.ChatTemplater)
	if !ok {
		return 0, errors.New("the model's tokenizer has no chat template")
	}
	text, err := tmpl.ApplyChatTemplate(req.Messages, true)
	if err != nil {
		return 0, err
	}
	toks, err := s.cfg.Tokenizer.Tokenize(text, false, true)
	return len(toks), err
}

// runMessage runs the one choice of p and writes it as a message, or as
// the Messages API's stream of events.
func (s *Server) runMessage(w http.ResponseWriter, r *http.Request, h *holding, req *messagesRequest, mc *messagesChat, p *plan) {
	ctx, cancel, ok := s.admit(w, r, h, p)
	if !ok {
		return
	}
	defer cancel()
	task, err := s.cfg.Engine.Submit(ctx, p.reqs[0])
	if err != nil {
		writeError(w, mc.messagesParam(s.submitError(err, true)).(*requestError))
		return
	}
	c := p.newChoice(0, task, s.cfg.Tokenizer)
	msg := &messageObject{ID: newItemID("msg"), Type: "message", Role: "assistant", Model: s.cfg.ModelID,
		Content: []any{}, Usage: messagesUsage{InputTokens: task.PromptTokens()}}
	if !req.Stream {
		mr := newMessageReply(msg, req.showThinking, nil)
		feedMessage(c, mr)
		switch {
		case ctx.Err() != nil:
			if r.Context().Err() == nil {
				writeError(w, errShuttingDown)
			}
			return
		case c.err != nil:
			writeError(w, s.choiceError(r.URL.Path, c.err))
			return
		}
		h.release()
		data, err := json.Marshal(msg)
		if err != nil {
			writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
			return
		}
		s.writeReply(w, append(data, '\n'))
		return
	}
	out := s.openStream(w, "text/event-stream", cancel)
	send := func(event string, data any) {
		out.send(sseEvent(event, data))
	}
	mr := newMessageReply(msg, req.showThinking, send)
	mr.start()
	feedMessage(c, mr)
	h.release()
	streamEnd(ctx, r.Context(), s, c, send)
	out.close()
}

// sseEvent is an event of the Messages API's stream.
func sseEvent(event string, data any) []byte {
	b, _ := json.Marshal(data) // the event types below: they always marshal
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", event, b)
}

// The events of the Messages API's stream, their fields in Anthropic's
// order.
type (
	typeOnly struct {
		Type string `json:"type"` // ping, message_stop
	}
	messageStartEvent struct {
		Type    string        `json:"type"`
		Message messageObject `json:"message"`
	}
	blockStartEvent struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDeltaEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	blockStopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	inputJSONDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	messageDeltaEvent struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	errorEvent struct {
		Type  string `json:"type"`
		Error any    `json:"error"`
	}
)

// streamEnd sends the error event of a stream that failed or that Abort
// ended.
func streamEnd(ctx, client context.Context, s *Server, c *choice, send func(string, any)) {
	var re *requestError
	switch {
	case ctx.Err() != nil:
		if client.Err() != nil || s.stopping.Err() == nil {
			return
		}
		re = errShuttingDown
	case c.err != nil:
		re = s.choiceError("stream", c.err)
	default:
		return
	}
	body := anthropicError(re)
	send("error", errorEvent{Type: "error", Error: body.Error})
}

// feedMessage runs the choice and formats its reply events as mr's
// blocks.
func feedMessage(c *choice, mr *messageReply) {
	for ev := range c.reply() {
		if ev.Err != nil {
			return // c.err says why
		}
		for _, d := range ev.Deltas {
			switch {
			case d.Call != nil:
				mr.call(d.Call.Index, d.Call.ID, d.Call.Name, d.Call.Arguments)
			case d.Reasoning != "":
				mr.text("thinking", d.Reasoning)
			default:
				mr.text("text", d.Content)
			}
		}
		if ev.Finish != "" {
			inputs := make(map[int]string, len(ev.Calls))
			for i, call := range ev.Calls {
				inputs[i] = call.Arguments
			}
			mr.finish(ev.Finish, stopSequence(c), inputs, c.tokens)
		}
	}
}

// stopSequence is the stop sequence that ended the choice, or "": the text
// past what the reply shows begins with it (the stop string is left out of
// the reply).
func stopSequence(c *choice) string {
	if c.finish != "stop" {
		return ""
	}
	rest := c.text[c.sent:]
	for _, st := range c.stops {
		if bytes.HasPrefix(rest, []byte(st)) {
			return st
		}
	}
	return ""
}
