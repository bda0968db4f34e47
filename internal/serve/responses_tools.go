package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// Tool calls on the Responses API: its function tools, tool_choice and
// function_call / function_call_output items are the chat's tools,
// tool_choice and assistant tool_calls / tool messages, and a call the
// model writes comes back as a function_call output item.

// functionCallItem is a call in a response's output (and in a later
// request's input).
type functionCallItem struct {
	Type      string `json:"type"` // function_call
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

func newItemID(prefix string) string {
	return fmt.Sprintf("%s_%016x%016x", prefix, rand.Uint64(), rand.Uint64())
}

// responsesTool is a function tool of the Responses API: the chat's
// function, flattened.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chatTools puts req's tools, tool_choice and parallel_tool_calls in the
// chat request out, in the chat's shapes.
func (req *responsesRequest) chatTools(out *apiRequest) error {
	out.ParallelToolCalls = req.ParallelCalls
	if raw := bytes.TrimSpace(req.Tools); len(raw) > 0 && string(raw) != "null" {
		var tools []responsesTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			return badRequest("tools", "tools must be an array of function tools: %v", err)
		}
		for i, t := range tools {
			if t.Type != "function" {
				return badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d]: type %s: only function tools are supported (no tool runs on this server)", i, quote.String(t.Type))
			}
			fn, err := json.Marshal(apiFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict})
			if err != nil {
				return err
			}
			out.Tools = append(out.Tools, json.RawMessage(fmt.Sprintf(`{"type":"function","function":%s}`, fn)))
		}
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if len(choice) == 0 || string(choice) == "null" {
		return nil
	}
	if _, ok := jsonString(choice); ok {
		out.ToolChoice = choice
		return nil
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(choice, &named); err != nil || named.Type != "function" {
		return badRequest("tool_choice", `tool_choice must be none, auto, required or {"type":"function","name":...}`)
	}
	fn, _ := json.Marshal(named.Name)
	out.ToolChoice = json.RawMessage(fmt.Sprintf(`{"type":"function","function":{"name":%s}}`, fn))
	return nil
}

// appendCallItem adds a function_call item (to the assistant message
// before it when that one ends the messages, as a call of the same turn)
// or a function_call_output item (a tool message) to msgs.
func appendCallItem(msgs []apiMessage, i int, it inputItem) ([]apiMessage, error) {
	param := fmt.Sprintf("input[%d]", i)
	if it.CallID == "" {
		return nil, badRequest(param+".call_id", "input[%d]: a %s item needs its call_id", i, it.Type)
	}
	if it.Type == "function_call_output" {
		text, err := inputText(it.Output)
		if err != nil {
			return nil, badRequest(param+".output", "input[%d]: output: %v", i, err)
		}
		m := textMessage("tool", text)
		m.ToolCallID = it.CallID
		return append(msgs, m), nil
	}
	call := apiToolCall{ID: it.CallID, Type: "function"}
	call.Function.Name, call.Function.Arguments = it.Name, it.Arguments
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		var calls []apiToolCall
		if raw := bytes.TrimSpace(msgs[n-1].ToolCalls); len(raw) > 0 {
			if err := json.Unmarshal(raw, &calls); err != nil {
				return nil, err
			}
		}
		data, err := json.Marshal(append(calls, call))
		if err != nil {
			return nil, err
		}
		msgs[n-1].ToolCalls = data
		return msgs, nil
	}
	data, err := json.Marshal([]apiToolCall{call})
	if err != nil {
		return nil, err
	}
	return append(msgs, apiMessage{Role: "assistant", Content: json.RawMessage(`null`), ToolCalls: data}), nil
}

// outputStream sends a response's output items as the Responses API
// streams them: a message item opened at its first text, its text deltas,
// and a function_call item per call with its arguments' deltas.
type outputStream struct {
	send   func(typ string, fields map[string]any)
	msgID  string
	output []any

	msg      *outputMessage // the message item open, nil when none
	msgIndex int
	part     outputText
	buf      strings.Builder

	calls []*functionCallItem
	at    []int      // the output index of each call
	final []toolCall // the calls as read at the end
}

// open opens the message item.
func (st *outputStream) open() {
	id := st.msgID
	if len(st.output) > 0 {
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

// call sends a chat delta of a call: the first opens its item (after the
// message, which it ends), the next ones add to its arguments.
func (st *outputStream) call(d respToolCall) {
	if d.Index == nil {
		return
	}
	i := *d.Index
	if i == len(st.calls) {
		st.closeMessage("completed")
		item := &functionCallItem{Type: "function_call", ID: newItemID("fc"), CallID: d.ID, Name: d.Function.Name, Status: "in_progress"}
		st.calls = append(st.calls, item)
		st.at = append(st.at, len(st.output))
		st.output = append(st.output, *item)
		st.send("response.output_item.added", map[string]any{"output_index": st.at[i], "item": *item})
	}
	if i >= len(st.calls) || d.Function.Arguments == "" {
		return
	}
	st.calls[i].Arguments += d.Function.Arguments
	st.send("response.function_call_arguments.delta", map[string]any{"item_id": st.calls[i].ID,
		"output_index": st.at[i], "delta": d.Function.Arguments})
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
