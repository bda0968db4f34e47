package serve

import "strings"

// The chat-completions and completions formatters of the reply events: a
// chunk per event when streaming, a message (or text) of the gathered
// events otherwise.

type message struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"` // null beside tool calls and no text
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Refusal          *string        `json:"refusal"`
	ToolCalls        []respToolCall `json:"tool_calls,omitempty"`
}

type delta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []respToolCall `json:"tool_calls,omitempty"`
}

// respToolCall is a tool call in a message, or a part of one in a delta
// (which has its index).
type respToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function respFunction `json:"function"`
}

type respFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wholeChoice struct {
	Index        int      `json:"index"`
	Text         *string  `json:"text,omitempty"`    // completions
	Message      *message `json:"message,omitempty"` // chat
	Logprobs     any      `json:"logprobs"`
	FinishReason string   `json:"finish_reason"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Text         *string `json:"text,omitempty"`  // completions
	Delta        *delta  `json:"delta,omitempty"` // chat
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// whole is the response without streaming: choice i's reply is
// replies[i].
func (r *response) whole(choices []*choice, replies []wholeReply) body {
	out := make([]wholeChoice, len(choices))
	for i, c := range choices {
		w := replies[i]
		out[i] = wholeChoice{Index: c.index, FinishReason: w.Finish, Logprobs: r.logprobsObject(w.Logprobs, 0)}
		if !r.chat {
			out[i].Text = &w.Content
			continue
		}
		m := &message{Role: "assistant", Content: &w.Content, ReasoningContent: w.Reasoning}
		if len(w.Calls) > 0 && w.Content == "" {
			m.Content = nil
		}
		for _, call := range w.Calls {
			m.ToolCalls = append(m.ToolCalls, respToolCall{ID: call.ID, Type: "function",
				Function: respFunction{Name: call.Name, Arguments: call.Arguments}})
		}
		out[i].Message = m
	}
	object := "text_completion"
	if r.chat {
		object = "chat.completion"
	}
	b := r.body(object, out)
	u := r.usage(choices)
	b.Usage = &u
	return b
}

// chunk is a streamed chunk of choice index.
func (r *response) chunk(index int, d *delta, lp any, finish *string) body {
	object := "text_completion"
	if r.chat {
		object = "chat.completion.chunk"
	}
	return r.body(object, []chunkChoice{{Index: index, Delta: d, Logprobs: lp, FinishReason: finish}})
}

// firstChunk opens a chat choice's stream, as OpenAI's does: the role.
func (r *response) firstChunk(index int) body {
	return r.chunk(index, &delta{Role: "assistant", Content: ptr("")}, nil, nil)
}

// eventChunks are the chunks of ev: one of its text (the content and the
// reasoning) with its logprobs, then, when it streams calls, one per
// call delta and one of its finish. offset is the text offset of the
// event's first token (completions) and moves past its tokens.
func (r *response) eventChunks(ev replyEvent, offset *int) []body {
	var content, reasoning strings.Builder
	var calls []respToolCall
	for _, d := range ev.Deltas {
		switch {
		case d.Call != nil:
			tc := respToolCall{Index: ptr(d.Call.Index), ID: d.Call.ID, Function: respFunction{Name: d.Call.Name, Arguments: d.Call.Arguments}}
			if d.Call.ID != "" {
				tc.Type = "function"
			}
			calls = append(calls, tc)
		default:
			content.WriteString(d.Content)
			reasoning.WriteString(d.Reasoning)
		}
	}
	text := content.String()
	var finish *string
	if ev.Finish != "" {
		finish = &ev.Finish
	}
	lp := r.logprobsObject(ev.Logprobs, *offset)
	for _, e := range ev.Logprobs {
		*offset += len(e.Token)
	}
	if !r.chat {
		b := r.chunk(ev.Index, nil, lp, finish)
		b.Choices.([]chunkChoice)[0].Text = &text
		return []body{b}
	}
	d := &delta{ReasoningContent: reasoning.String()}
	if text != "" || finish == nil && d.ReasoningContent == "" {
		d.Content = &text
	}
	if len(calls) == 0 {
		return []body{r.chunk(ev.Index, d, lp, finish)}
	}
	// A call is streaming: the text and logprobs go first, then its
	// deltas, then the end.
	var out []body
	if text != "" || d.ReasoningContent != "" || ev.Logprobs != nil {
		out = append(out, r.chunk(ev.Index, d, lp, nil))
	}
	for _, tc := range calls {
		out = append(out, r.chunk(ev.Index, &delta{ToolCalls: []respToolCall{tc}}, nil, nil))
	}
	if finish != nil {
		out = append(out, r.chunk(ev.Index, &delta{}, nil, finish))
	}
	return out
}

// usageChunk is the last chunk with stream_options.include_usage.
func (r *response) usageChunk(choices []*choice) body {
	object := "text_completion"
	if r.chat {
		object = "chat.completion.chunk"
	}
	b := r.body(object, []chunkChoice{})
	u := r.usage(choices)
	b.Usage = &u
	return b
}
