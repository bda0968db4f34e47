package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// The Responses API's formatters of the reply events: the output items of
// a whole response, and the stream of events.

// reasoningItem is the model's thinking in a response's output, before
// its message.
type reasoningItem struct {
	Type    string          `json:"type"` // reasoning
	ID      string          `json:"id"`
	Summary []any           `json:"summary"`
	Content []reasoningText `json:"content"`
	Status  string          `json:"status"`
}

type reasoningText struct {
	Type string `json:"type"` // reasoning_text
	Text string `json:"text"`
}

// runResponse runs the one choice of p and writes it as a response
// object, or as the Responses API's stream of events.
func (s *Server) runResponse(w http.ResponseWriter, r *http.Request, h *holding, req *responsesRequest, p *plan) {
	ctx, cancel, ok := s.admit(w, r, h, p)
	if !ok {
		return
	}
	release := h.release
	defer cancel()
	task, err := s.cfg.Engine.Submit(ctx, p.reqs[0])
	if err != nil {
		writeError(w, responsesParam(s.submitError(err, true)).(*requestError))
		return
	}
	c := p.newChoice(0, task, s.cfg.Tokenizer)
	obj := s.newResponseObject(req, p)
	msgID := newItemID("msg")
	if req.Stream {
		s.streamResponse(ctx, r.Context(), cancel, w, obj, msgID, c, task.PromptTokens(), release)
		return
	}
	reply := c.whole()
	switch {
	case ctx.Err() != nil:
		if r.Context().Err() == nil {
			writeError(w, errShuttingDown)
		}
		return
	case reply.Err != nil:
		writeError(w, s.choiceError(r.URL.Path, reply.Err))
		return
	}
	release()
	obj.finish(outputItems(reply, msgID, itemStatus(c)), c, task.PromptTokens())
	data, err := json.Marshal(obj)
	if err != nil {
		writeError(w, &requestError{status: http.StatusInternalServerError, msg: err.Error()})
		return
	}
	s.writeReply(w, append(data, '\n'))
}

// outputItems are a whole reply's output items: its reasoning, its
// message (unless it only calls) and its calls.
func outputItems(reply wholeReply, msgID, status string) []any {
	var output []any
	if reply.Reasoning != "" {
		output = append(output, reasoningItem{Type: "reasoning", ID: newItemID("rs"), Summary: []any{},
			Content: []reasoningText{{Type: "reasoning_text", Text: reply.Reasoning}}, Status: status})
	}
	if len(reply.Calls) == 0 || reply.Content != "" {
		part := outputText{Type: "output_text", Text: reply.Content, Annotations: []any{}, Logprobs: []tokenLogprob{}}
		part.Logprobs = append(part.Logprobs, reply.Logprobs...)
		output = append(output, outputMessage{Type: "message", ID: msgID, Status: status, Role: "assistant",
			Content: []outputText{part}})
	}
	for _, call := range reply.Calls {
		output = append(output, functionCallItem{Type: "function_call", ID: newItemID("fc"), CallID: call.ID,
			Name: call.Name, Arguments: call.Arguments, Status: "completed"})
	}
	return output
}

// streamResponse writes the choice as the Responses API streams it: named
// server-sent events, each with its sequence number, from
// response.created to response.completed (response.incomplete when the
// reply reached max_output_tokens, response.failed when it failed); a
// stream that Abort ends gets an error event instead.
func (s *Server) streamResponse(ctx, client context.Context, cancel context.CancelFunc, w http.ResponseWriter,
	obj *responseObject, msgID string, c *choice, promptTokens int, release func()) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := s.newStreamWriter(w, cancel)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		data, err := json.Marshal(fields)
		if err != nil {
			s.logf("stream: %v", err)
			return
		}
		out.send(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", typ, data))
	}
	snapshot := func() responseObject { // the object as it is now: the events do not share it
		o := *obj
		o.Output = slices.Clone(obj.Output)
		return o
	}
	send("response.created", map[string]any{"response": snapshot()})
	send("response.in_progress", map[string]any{"response": snapshot()})
	st := &outputStream{send: send, msgID: msgID}
	var failed error
	for ev := range c.reply() {
		if ev.Err != nil {
			failed = ev.Err
			break
		}
		st.event(ev)
	}
	release()
	switch {
	case ctx.Err() != nil:
		if client.Err() == nil && s.stopping.Err() != nil {
			send("error", map[string]any{"code": errShuttingDown.code, "message": errShuttingDown.msg, "param": nil})
		}
	case failed != nil:
		re := s.choiceError("stream", failed)
		obj.Status = "failed"
		obj.Error = &responseError{Code: "server_error", Message: quote.Message(re.msg)}
		if re.status < 500 {
			obj.Error.Code = "invalid_prompt"
		}
		obj.Output = st.output
		send("response.failed", map[string]any{"response": snapshot()})
	default:
		st.closeReasoning(itemStatus(c))
		if len(st.calls) == 0 && st.msg == nil {
			st.open() // a reply has its message, if empty
		}
		st.closeMessage(itemStatus(c))
		st.closeCalls()
		obj.finish(st.output, c, promptTokens)
		event := "response.completed"
		if obj.Status == "incomplete" {
			event = "response.incomplete"
		}
		send(event, map[string]any{"response": snapshot()})
	}
	out.close()
}

// outputStream sends a response's output items as the Responses API
// streams them: a reasoning item opened at the first thought, a message
// item opened at its first text, its text deltas, and a function_call item
// per call with its arguments' deltas.
type outputStream struct {
	send   func(typ string, fields map[string]any)
	msgID  string
	output []any

	thought      *reasoningItem // the reasoning item open, nil when none
	thoughtIndex int
	thinking     strings.Builder

	msg      *outputMessage // the message item open, nil when none
	msgIndex int
	part     outputText
	buf      strings.Builder
	pending  []tokenLogprob // logprobs of an event without text, for the next text

	calls []*functionCallItem
	at    []int      // the output index of each call
	final []toolCall // the calls as read at the end
}

// event sends the reply event ev: its thoughts, its text (with its
// logprobs), its calls' deltas.
func (st *outputStream) event(ev replyEvent) {
	var text, thought strings.Builder
	for _, d := range ev.Deltas {
		text.WriteString(d.Content)
		thought.WriteString(d.Reasoning)
	}
	if thought.Len() > 0 {
		st.reasoning(thought.String())
	}
	st.pending = append(st.pending, ev.Logprobs...)
	if text.Len() > 0 || thought.Len() == 0 && len(st.pending) > 0 {
		st.text(text.String(), st.pending)
		st.pending = nil
	}
	for _, d := range ev.Deltas {
		if d.Call != nil {
			st.call(*d.Call)
		}
	}
	if ev.Finish != "" {
		st.final = ev.Calls
	}
}

// reasoning sends a delta of the reasoning item (opening it first).
func (st *outputStream) reasoning(delta string) {
	if st.thought == nil {
		st.thought = &reasoningItem{Type: "reasoning", ID: newItemID("rs"), Summary: []any{}, Content: []reasoningText{}, Status: "in_progress"}
		st.thoughtIndex = len(st.output)
		st.output = append(st.output, *st.thought)
		st.thinking.Reset()
		st.send("response.output_item.added", map[string]any{"output_index": st.thoughtIndex, "item": *st.thought})
		st.send("response.content_part.added", st.atThought(map[string]any{"part": reasoningText{Type: "reasoning_text"}}))
	}
	st.thinking.WriteString(delta)
	st.send("response.reasoning_text.delta", st.atThought(map[string]any{"delta": delta}))
}

// atThought adds the open reasoning item's position to fields.
func (st *outputStream) atThought(fields map[string]any) map[string]any {
	fields["item_id"], fields["output_index"], fields["content_index"] = st.thought.ID, st.thoughtIndex, 0
	return fields
}

// closeReasoning ends the open reasoning item, if any.
func (st *outputStream) closeReasoning(status string) {
	if st.thought == nil {
		return
	}
	part := reasoningText{Type: "reasoning_text", Text: st.thinking.String()}
	st.send("response.reasoning_text.done", st.atThought(map[string]any{"text": part.Text}))
	st.send("response.content_part.done", st.atThought(map[string]any{"part": part}))
	st.thought.Status, st.thought.Content = status, []reasoningText{part}
	st.output[st.thoughtIndex] = *st.thought
	st.send("response.output_item.done", map[string]any{"output_index": st.thoughtIndex, "item": *st.thought})
	st.thought = nil
}

// open opens the message item.
func (st *outputStream) open() {
	st.closeReasoning("completed")
	id := st.msgID
	if slices.ContainsFunc(st.output, func(it any) bool { _, ok := it.(outputMessage); return ok }) {
		id = newItemID("msg")
	}
	st.msg = &outputMessage{Type: "message", ID: id, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	st.msgIndex = len(st.output)
	st.output = append(st.output, *st.msg)
	st.part = outputText{Type: "output_text", Annotations: []any{}, Logprobs: []tokenLogprob{}}
	st.buf.Reset()
	st.send("response.output_item.added", map[string]any{"output_index": st.msgIndex, "item": *st.msg})
	st.send("response.content_part.added", st.at0(map[string]any{"part": st.part}))
}

// at0 adds the open message's position to fields.
func (st *outputStream) at0(fields map[string]any) map[string]any {
	fields["item_id"], fields["output_index"], fields["content_index"] = st.msg.ID, st.msgIndex, 0
	return fields
}

// text sends a delta of the message's text (opening it first).
func (st *outputStream) text(delta string, entries []tokenLogprob) {
	if delta == "" && len(entries) == 0 {
		return
	}
	if st.msg == nil {
		st.open()
	}
	if entries == nil {
		entries = []tokenLogprob{}
	}
	st.buf.WriteString(delta)
	st.part.Logprobs = append(st.part.Logprobs, entries...)
	st.send("response.output_text.delta", st.at0(map[string]any{"delta": delta, "logprobs": entries}))
}

// closeMessage ends the open message item, if any.
func (st *outputStream) closeMessage(status string) {
	if st.msg == nil {
		return
	}
	st.part.Text = st.buf.String()
	st.send("response.output_text.done", st.at0(map[string]any{"text": st.part.Text, "logprobs": st.part.Logprobs}))
	st.send("response.content_part.done", st.at0(map[string]any{"part": st.part}))
	st.msg.Status, st.msg.Content = status, []outputText{st.part}
	st.output[st.msgIndex] = *st.msg
	st.send("response.output_item.done", map[string]any{"output_index": st.msgIndex, "item": *st.msg})
	st.msg = nil
}

// call sends a delta of a call: the first opens its item (after the
// reasoning and the message, which it ends), the next ones add to its
// arguments.
func (st *outputStream) call(d callDelta) {
	i := d.Index
	if i == len(st.calls) {
		st.closeReasoning("completed")
		st.closeMessage("completed")
		item := &functionCallItem{Type: "function_call", ID: newItemID("fc"), CallID: d.ID, Name: d.Name, Status: "in_progress"}
		st.calls = append(st.calls, item)
		st.at = append(st.at, len(st.output))
		st.output = append(st.output, *item)
		st.send("response.output_item.added", map[string]any{"output_index": st.at[i], "item": *item})
	}
	if i >= len(st.calls) || d.Arguments == "" {
		return
	}
	st.calls[i].Arguments += d.Arguments
	st.send("response.function_call_arguments.delta", map[string]any{"item_id": st.calls[i].ID,
		"output_index": st.at[i], "delta": d.Arguments})
}

// closeCalls ends the call items, with the arguments as read at the end.
func (st *outputStream) closeCalls() {
	for i, item := range st.calls {
		if i < len(st.final) {
			item.Arguments = st.final[i].Arguments
		}
		item.Status = "completed"
		st.send("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": st.at[i],
			"name": item.Name, "arguments": item.Arguments})
		st.output[st.at[i]] = *item
		st.send("response.output_item.done", map[string]any{"output_index": st.at[i], "item": *item})
	}
}

// newItemID returns a new output item's id, prefix_ and 32 hex digits.
func newItemID(prefix string) string {
	return fmt.Sprintf("%s_%016x%016x", prefix, rand.Uint64(), rand.Uint64())
}
