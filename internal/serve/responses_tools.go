package serve

import (
	"bytes"
	"encoding/json"
	"fmt"

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
