package serve

import (
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/quote"
)

// replyEvent is one step of a choice's reply. A choice's reply is one
// stream of reply events, whatever the API that writes it: the choice's
// text goes through one reader (internal/chat's: the tool calls and the
// reasoning of the template's family), and every API's writer is a
// formatter of the events, streamed or gathered. No writer reads the
// model's text itself.
//
// A writer plans the request (params.plan of an apiRequest: another
// API's body maps onto one, as responsesRequest.chatRequest does),
// submits p.reqs[i] to the engine, makes each choice with p.newChoice,
// and formats its events (the chat-completions chunk, in stream.go, and
// the Responses events, in reply_responses.go, are formatters):
//
//	for ev := range c.reply() {
//		if ev.Err != nil {
//			// the generation failed: s.choiceError(where, ev.Err) says how
//			break
//		}
//		for _, d := range ev.Deltas {
//			switch {
//			case d.Call != nil:
//				// a piece of call d.Call.Index: its ID and Name on its
//				// first delta, then fragments of its Arguments
//			case d.Reasoning != "":
//				// a piece of the model's thinking
//			default:
//				// a piece of the answer's text, d.Content
//			}
//		}
//		// ev.Logprobs: the tokens released with this event (nil unless
//		// c.logprobs).
//		if ev.Finish != "" {
//			// the last event: "stop", "length" or "tool_calls"; ev.Calls
//			// are the calls, whole (their arguments are the fragments
//			// joined).
//		}
//	}
//
// and a whole reply is the same events gathered: c.whole().
//
// The sequence ends with an event whose Finish or Err is set, or without
// one when the request was cancelled (the client left or the server
// aborts): the formatter checks its context then. c.tokens and c.finish
// hold the choice's usage and finish reason once the sequence ends.
type replyEvent struct {
	// Index is the choice's index in its response.
	Index int
	// Deltas are the reply's new pieces, in the order written.
	Deltas []replyDelta
	// Logprobs are the log-probabilities of the tokens released with this
	// event (whose text begins in what the reply shows so far); nil when
	// the request did not ask for them.
	Logprobs []tokenLogprob
	// Finish is set on the last event: "stop", "length" or "tool_calls"
	// (the model ended by itself after whole calls).
	Finish string
	// Calls are the calls of the reply, on the last event: those its
	// deltas streamed, whole (a call the reply left open is Partial).
	Calls []toolCall
	// Err is set on the last event when the generation failed (not
	// cancelled).
	Err error
}

// replyDelta is a piece of a choice's reply: one of Content, Reasoning
// and Call is set (internal/chat's delta).
type replyDelta = chat.Delta

// callDelta is a piece of a tool call: the first of a call has its ID and
// Name (and maybe the first of its arguments), the next ones carry its
// arguments' text, which joined are the call's arguments (a JSON object).
type callDelta = chat.CallDelta

// toolCall is a call the model made.
type toolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object's text; when Partial, what the model wrote of it
	// Partial says the arguments do not close: the reply was cut in the
	// call (its finish is "length") or broke its syntax.
	Partial bool
}

// outputReader reads a choice's text as it comes: its content, its
// reasoning and its tool calls.
type outputReader interface {
	// Add takes the next piece of text and returns the deltas it
	// completes.
	Add(text string) []replyDelta
	// End returns the last deltas and the calls made, those its deltas
	// streamed (a call left open is Partial); stopped says the model
	// ended by itself, not cut by its length.
	End(stopped bool) ([]replyDelta, []toolCall)
}

// newChoice is choice index of p, running as task (Engine.Submit of
// p.reqs[index]); tok spells its tokens.
func (p *plan) newChoice(index int, task *generation.Task, tok backend.Tokenizer) *choice {
	return &choice{index: index, task: task, stops: p.stops, tok: tok, topN: p.topLogprobs, logprobs: p.logprobs,
		reader: p.newReader(), special: p.reqs[index].RenderSpecial}
}

// reply runs the choice and yields its reply's events.
func (c *choice) reply() iter.Seq[replyEvent] {
	return func(yield func(replyEvent) bool) {
		rd := c.reader
		if rd == nil {
			rd = contentReader{}
		}
		more := true
		c.run(func(text string, lp *logprobs, finish *string) {
			ev := replyEvent{Index: c.index, Deltas: rd.Add(text)}
			if lp != nil {
				ev.Logprobs = append([]tokenLogprob{}, lp.entries...)
			}
			if finish != nil {
				last, calls := rd.End(*finish == "stop")
				ev.Deltas = append(ev.Deltas, last...)
				if c.finish == "stop" && len(calls) > 0 && !slices.ContainsFunc(calls, func(c toolCall) bool { return c.Partial }) {
					c.finish = "tool_calls"
				}
				ev.Finish, ev.Calls = c.finish, calls
			}
			if more && (len(ev.Deltas) > 0 || lp != nil && len(lp.entries) > 0 || finish != nil) {
				more = yield(ev)
			}
		})
		if c.err != nil && more {
			yield(replyEvent{Index: c.index, Err: c.err})
		}
	}
}

// wholeReply is a choice's reply gathered.
type wholeReply struct {
	Content   string
	Reasoning string
	Calls     []toolCall
	Logprobs  []tokenLogprob // nil unless asked
	Finish    string         // "" when cancelled or failed
	Err       error
}

// whole runs the choice and gathers its reply.
func (c *choice) whole() wholeReply {
	var out wholeReply
	var content, reasoning strings.Builder
	if c.logprobs {
		out.Logprobs = []tokenLogprob{}
	}
	for ev := range c.reply() {
		for _, d := range ev.Deltas {
			content.WriteString(d.Content)
			reasoning.WriteString(d.Reasoning)
		}
		out.Logprobs = append(out.Logprobs, ev.Logprobs...)
		if ev.Finish != "" {
			out.Finish, out.Calls = ev.Finish, ev.Calls
		}
		out.Err = ev.Err
	}
	out.Content, out.Reasoning = content.String(), reasoning.String()
	return out
}

// contentReader reads text as content only: a completion's, or a chat
// reply that may make no call.
type contentReader struct{}

func (contentReader) Add(text string) []replyDelta {
	if text == "" {
		return nil
	}
	return []replyDelta{{Content: text}}
}

func (contentReader) End(bool) ([]replyDelta, []toolCall) { return nil, nil }

// newReader returns the reader of a choice of p: nil reads content only.
func (p *plan) newReader() outputReader {
	if p.tools == nil && p.reasoning == nil {
		return nil
	}
	opt := chat.Options{Format: chat.Format{Family: chat.JSON}}
	if rp := p.reasoning; rp != nil {
		opt.Format.Reasoning, opt.InReasoning, opt.ReasoningInline = rp.markers, rp.inside, rp.inline
	}
	if tp := p.tools; tp != nil {
		opt.Format.Family = tp.family
		opt.OneCall = !tp.parallel
		for _, t := range tp.tools {
			opt.Tools = append(opt.Tools, chat.Tool{Name: t.Function.Name, Parameters: t.Function.Parameters})
		}
	}
	return chatReader{chat.NewReader(opt)}
}

// chatReader is internal/chat's reader as an outputReader.
type chatReader struct{ r *chat.Reader }

func (r chatReader) Add(text string) []replyDelta { return r.r.Add(text) }

func (r chatReader) End(stopped bool) ([]replyDelta, []toolCall) {
	deltas, calls := r.r.End(stopped)
	var out []toolCall
	for _, c := range calls {
		out = append(out, toolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments), Partial: c.Partial})
	}
	return deltas, out
}

// reasoningPlan is how a chat reply's thinking is read.
type reasoningPlan struct {
	markers chat.Markers // the template's, around the thinking
	// inside says the prompt opened the reasoning: the reply begins in it
	// (DeepSeek R1's generation prompt ends with <think>).
	inside bool
	// inline keeps the thinking in the content (reasoning_format none):
	// it is still read, so that what it writes is no call.
	inline bool
}

// reasoningPlan reads reasoning_format for a chat whose prompt the
// template named made, ending with tail: nil when the reply's thinking is
// not read apart.
func (p *params) reasoningPlan(format, template, tail string) (*reasoningPlan, error) {
	inline := false
	switch format {
	case "", "auto", "deepseek":
	case "none":
		inline = true
	default:
		return nil, badRequest("reasoning_format", "reasoning_format %s: want auto (the thinking apart, as reasoning_content), deepseek (the same) or none (inline in the content)", quote.String(format))
	}
	if template != "jinja" || p.chat == nil || p.chat.format().Reasoning.Open == "" {
		return nil, nil
	}
	return &reasoningPlan{markers: p.chat.format().Reasoning, inside: p.chat.format().OpensReasoning(tail), inline: inline}, nil
}

// templateThinking is the template's enable_thinking the request asks
// for: chat_template_kwargs' enable_thinking or thinking, else the
// thinking another API's request mapped (nil: the template's default).
func (req *apiRequest) templateThinking() (*bool, error) {
	thinking := req.thinking
	for _, k := range slices.Sorted(maps.Keys(req.ChatTemplateKwargs)) {
		switch k {
		case "enable_thinking", "thinking":
			var b bool
			if err := json.Unmarshal(req.ChatTemplateKwargs[k], &b); err != nil {
				return nil, badRequest("chat_template_kwargs."+k, "chat_template_kwargs.%s must be a boolean", k)
			}
			thinking = &b
		default:
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs %s: only enable_thinking (or thinking) is passed to the template", quote.String(k))
		}
	}
	return thinking, nil
}
