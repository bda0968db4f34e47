package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Message is a message of a chat's history, onto which every API's
// messages map.
type Message struct {
	Role    string // system, user, assistant or tool
	Content string
	// Reasoning is an assistant's reasoning, which templates that think
	// read as reasoning_content (most drop it from past turns).
	Reasoning  string
	Name       string
	ToolCalls  []ToolCall // an assistant's calls
	ToolCallID string     // a tool's result: the call it answers
}

// ToolCall is a call in an assistant message of the history.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the arguments as the client sent them: a JSON
	// object's text, normally.
	Arguments string
}

// TemplateMessages writes the messages as a chat template reads them:
// OpenAI's objects, with each call's arguments as a JSON object (as
// transformers has them; the templates write them with tojson), an
// assistant's reasoning as reasoning_content, and a tool result's name,
// the function of the call it answers. Keys keep their order.
func TemplateMessages(msgs []Message) []byte {
	names := map[string]string{}
	out := make([]Object, 0, len(msgs))
	for _, m := range msgs {
		o := Object{{"role", m.Role}, {"content", m.Content}}
		if m.Reasoning != "" {
			o = append(o, Field{"reasoning_content", m.Reasoning})
		}
		if m.Name != "" {
			o = append(o, Field{"name", m.Name})
		}
		if len(m.ToolCalls) > 0 {
			var calls []Object
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
				var args any = c.Arguments
				var obj json.RawMessage
				if json.Unmarshal([]byte(c.Arguments), &obj) == nil && len(obj) > 0 && obj[0] == '{' {
					args = obj
				}
				calls = append(calls, Object{{"id", c.ID}, {"type", "function"},
					{"function", Object{{"name", c.Name}, {"arguments", args}}}})
			}
			o = append(o, Field{"tool_calls", calls})
		}
		if m.Role == "tool" {
			o = append(o, Field{"tool_call_id", m.ToolCallID})
			if m.Name == "" && names[m.ToolCallID] != "" {
				o = append(o, Field{"name", names[m.ToolCallID]})
			}
		}
		out = append(out, o)
	}
	data, _ := json.Marshal(out)
	return data
}

// Polyfill writes the messages for a template that knows no tools
// (describe: tools, the request's tool objects, are described in the
// system message, with how to call them: as JSON, which the JSON family
// reads) or no calls (rewrite: an assistant's calls are written as JSON in
// its content, a tool's result as a user message), as minja does for such
// templates.
func Polyfill(msgs []Message, tools []json.RawMessage, describe, rewrite bool) []Message {
	var out []Message
	if len(tools) > 0 && describe {
		var b strings.Builder
		b.WriteString("You can call these functions:\n")
		for _, raw := range tools {
			var compact bytes.Buffer
			json.Compact(&compact, raw)
			b.WriteString(compact.String() + "\n")
		}
		b.WriteString(`To call one, reply with only a JSON object {"name": <function name>, "arguments": <arguments object>}.`)
		if len(msgs) > 0 && msgs[0].Role == "system" {
			out = append(out, Message{Role: "system", Content: msgs[0].Content + "\n\n" + b.String()})
			msgs = msgs[1:]
		} else {
			out = append(out, Message{Role: "system", Content: b.String()})
		}
	}
	for _, m := range msgs {
		switch {
		case !rewrite:
			out = append(out, m)
		case m.Role == "tool":
			out = append(out, Message{Role: "user", Content: fmt.Sprintf("The result of call %s:\n%s", m.ToolCallID, m.Content)})
		case len(m.ToolCalls) > 0:
			var b strings.Builder
			b.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				args := c.Arguments
				if !json.Valid([]byte(args)) {
					a, _ := json.Marshal(args)
					args = string(a)
				}
				name, _ := json.Marshal(c.Name)
				fmt.Fprintf(&b, `{"name": %s, "arguments": %s}`, name, args)
			}
			out = append(out, Message{Role: m.Role, Content: b.String(), Reasoning: m.Reasoning})
		default:
			out = append(out, Message{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning})
		}
	}
	return out
}

// Object is a JSON object whose keys keep their order (as templates and
// grammars read them).
type Object []Field

// Field is one key of an Object and its value.
type Field struct {
	Key   string
	Value any
}

// MarshalJSON writes the object with its keys in their order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		v, err := json.Marshal(kv.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
