package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
)

// chatMessage is a message of the history.
type chatMessage struct {
	Role       string
	Content    string
	Name       string
	ToolCalls  []apiToolCall
	ToolCallID string
}

// templateMessages writes the messages as the chat template reads them:
// OpenAI's objects, with each call's arguments as a JSON object (as
// transformers has them; the templates write them with tojson) and a tool
// result's name, the function of the call it answers.
func templateMessages(msgs []chatMessage) []byte {
	names := map[string]string{}
	var out []orderedProps
	for _, m := range msgs {
		o := orderedProps{{"role", m.Role}, {"content", m.Content}}
		if m.Name != "" {
			o = append(o, kv{"name", m.Name})
		}
		if len(m.ToolCalls) > 0 {
			var calls []orderedProps
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				var args any = c.Function.Arguments
				var obj json.RawMessage
				if json.Unmarshal([]byte(c.Function.Arguments), &obj) == nil && len(obj) > 0 && obj[0] == '{' {
					args = obj
				}
				calls = append(calls, orderedProps{{"id", c.ID}, {"type", "function"},
					{"function", orderedProps{{"name", c.Function.Name}, {"arguments", args}}}})
			}
			o = append(o, kv{"tool_calls", calls})
		}
		if m.Role == "tool" {
			o = append(o, kv{"tool_call_id", m.ToolCallID})
			if m.Name == "" && names[m.ToolCallID] != "" {
				o = append(o, kv{"name", names[m.ToolCallID]})
			}
		}
		out = append(out, o)
	}
	data, _ := json.Marshal(out)
	return data
}

// polyfill writes the messages for a template that knows no tools
// (describe: the tools are described in the system message) or no calls
// (rewrite: an assistant's calls are written as JSON in its content, a
// tool's result as a user message), as minja does for such templates.
func polyfill(msgs []chatMessage, tp *toolPlan, describe, rewrite bool) []chatMessage {
	var out []chatMessage
	if tp != nil && describe {
		var b strings.Builder
		b.WriteString("You can call these functions:\n")
		for _, raw := range tp.raw {
			var compact bytes.Buffer
			json.Compact(&compact, raw)
			b.WriteString(compact.String() + "\n")
		}
		b.WriteString(`To call one, reply with only a JSON object {"name": <function name>, "arguments": <arguments object>}.`)
		if len(msgs) > 0 && msgs[0].Role == "system" {
			out = append(out, chatMessage{Role: "system", Content: msgs[0].Content + "\n\n" + b.String()})
			msgs = msgs[1:]
		} else {
			out = append(out, chatMessage{Role: "system", Content: b.String()})
		}
	}
	for _, m := range msgs {
		switch {
		case !rewrite:
			out = append(out, m)
		case m.Role == "tool":
			out = append(out, chatMessage{Role: "user", Content: fmt.Sprintf("The result of call %s:\n%s", m.ToolCallID, m.Content)})
		case len(m.ToolCalls) > 0:
			var b strings.Builder
			b.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				args := c.Function.Arguments
				if !json.Valid([]byte(args)) {
					a, _ := json.Marshal(args)
					args = string(a)
				}
				name, _ := json.Marshal(c.Function.Name)
				fmt.Fprintf(&b, `{"name": %s, "arguments": %s}`, name, args)
			}
			out = append(out, chatMessage{Role: m.Role, Content: b.String()})
		default:
			out = append(out, chatMessage{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// builtinMessages writes the messages for llama.cpp's built-in templates,
// which know neither tools nor calls.
func builtinMessages(msgs []chatMessage, tp *toolPlan) []backend.Message {
	var out []backend.Message
	for _, m := range polyfill(msgs, tp, true, true) {
		out = append(out, backend.Message{Role: m.Role, Content: m.Content})
	}
	return out
}
