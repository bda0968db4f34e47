package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/llamaloop/llamaloop/internal/chat"
	"github.com/llamaloop/llamaloop/internal/quote"
)

// A request's tools: their definitions, tool_choice, and the grammar of
// the call that tool_choice required or a function forces.

// apiTool is one of a request's tools: OpenAI has functions only.
type apiTool struct {
	Type     string       `json:"type"`
	Function *apiFunction `json:"function"`
}

type apiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// apiToolCall is a call in an assistant message of the history.
type apiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolPlan is what a request's tools ask for.
type toolPlan struct {
	tools    []apiTool
	raw      []json.RawMessage // the tools as the client sent them (for the template)
	mode     string            // "auto", "required" or "function"
	name     string            // the function tool_choice names
	parallel bool              // parallel_tool_calls (default true)
	family   chat.Family
}

// parseTools reads tools, tool_choice and parallel_tool_calls; nil when no
// tool may be called (none, or tool_choice "none").
func parseTools(req *apiRequest, lim Limits) (*toolPlan, error) {
	tp := &toolPlan{mode: "auto", parallel: true}
	lim = lim.withDefaults()
	if req.ParallelToolCalls != nil {
		tp.parallel = *req.ParallelToolCalls
	}
	if len(req.Tools) > lim.MaxTools {
		return nil, &requestError{status: http.StatusBadRequest, param: "tools", code: "too_many_tools",
			msg: fmt.Sprintf("%d tools: a request takes at most %d (llamaserve --max-tools)", len(req.Tools), lim.MaxTools)}
	}
	names := make(map[string]bool, len(req.Tools))
	schemaBytes := 0
	for i, raw := range req.Tools {
		var t apiTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
		}
		if t.Type != "function" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d]: type %s: only function tools are supported", i, quote.String(t.Type))
		}
		if t.Function == nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].function", i), "tools[%d]: function is required", i)
		}
		if !functionName.MatchString(t.Function.Name) {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d]: function name %s: must be 1 to 64 of a-z, A-Z, 0-9, _ and -", i, quote.String(t.Function.Name))
		}
		if names[t.Function.Name] {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d]: function %q is defined twice", i, t.Function.Name)
		}
		names[t.Function.Name] = true
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
			if schemaBytes += len(p); schemaBytes > lim.MaxSchemaBytes {
				return nil, schemaTooLarge(fmt.Sprintf("tools[%d].function.parameters", i), "the tools' parameters", schemaBytes, lim.MaxSchemaBytes)
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(p, &obj) != nil {
				return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "tools[%d]: parameters must be a JSON Schema object", i)
			}
		} else {
			t.Function.Parameters = nil
		}
		tp.tools = append(tp.tools, t)
		tp.raw = append(tp.raw, raw)
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	if len(choice) > 0 && string(choice) != "null" {
		var s string
		if json.Unmarshal(choice, &s) == nil {
			switch s {
			case "none", "auto", "required":
				tp.mode = s
			default:
				return nil, badRequest("tool_choice", "tool_choice %s: want none, auto, required or a function", quote.String(s))
			}
		} else {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(choice, &named); err != nil || named.Type != "function" {
				return nil, badRequest("tool_choice", `tool_choice must be none, auto, required or {"type":"function","function":{"name":...}}`)
			}
			if tp.tool(named.Function.Name) == nil {
				return nil, badRequest("tool_choice", "tool_choice names function %s, which is not among the tools", quote.String(named.Function.Name))
			}
			tp.mode, tp.name = "function", named.Function.Name
		}
	}
	if len(tp.tools) == 0 {
		if tp.mode == "required" {
			return nil, badRequest("tool_choice", `tool_choice "required" needs tools`)
		}
		return nil, nil
	}
	if tp.mode == "none" {
		return nil, nil
	}
	return tp, nil
}

// tool returns the function tool named name, or nil.
func (tp *toolPlan) tool(name string) *apiFunction {
	for _, t := range tp.tools {
		if t.Function.Name == name {
			return t.Function
		}
	}
	return nil
}

// toolsJSON is the tools as the template reads them.
func (tp *toolPlan) toolsJSON() []byte {
	data, _ := json.Marshal(tp.raw)
	return data
}

// callGBNF returns the grammar of the output that tool_choice required or
// a named function forces: one call in the family's format, whose
// arguments validate against the function's parameters; "" for auto.
func (tp *toolPlan) callGBNF(toGBNF func([]byte) (string, error)) (string, error) {
	if tp.mode != "required" && tp.mode != "function" {
		return "", nil
	}
	argsKey := "arguments"
	if tp.family == chat.Llama3 {
		argsKey = "parameters"
	}
	var branches []map[string]any
	defs := map[string]json.RawMessage{}
	for _, t := range tp.tools {
		if tp.mode == "function" && t.Function.Name != tp.name {
			continue
		}
		params := t.Function.Parameters
		if params == nil {
			params = json.RawMessage(`{"type":"object"}`)
		} else {
			// The parameters' own $defs (and definitions) move to the
			// call's root, where their "#/$defs/..." references point.
			var obj map[string]json.RawMessage
			json.Unmarshal(params, &obj)
			for _, k := range []string{"$defs", "definitions"} {
				if d, ok := obj[k]; ok {
					var m map[string]json.RawMessage
					if json.Unmarshal(d, &m) != nil {
						continue
					}
					for name, s := range m {
						key := k + "/" + name
						if old, ok := defs[key]; ok && !bytes.Equal(old, s) {
							return "", badRequest("tools", "the tools define %s differently", key)
						}
						defs[key] = s
					}
				}
			}
		}
		branches = append(branches, map[string]any{
			"type":                 "object",
			"properties":           chat.Object{{Key: "name", Value: map[string]any{"const": t.Function.Name}}, {Key: argsKey, Value: params}},
			"required":             []string{"name", argsKey},
			"additionalProperties": false,
		})
	}
	var schema map[string]any
	if len(branches) == 1 {
		schema = branches[0]
	} else {
		schema = map[string]any{"oneOf": branches}
	}
	for key, s := range defs {
		k, name, _ := strings.Cut(key, "/")
		if schema[k] == nil {
			schema[k] = map[string]json.RawMessage{}
		}
		schema[k].(map[string]json.RawMessage)[name] = s
	}
	data, err := json.Marshal(schema)
	if err != nil {
		return "", err
	}
	src, err := toGBNF(data)
	if err != nil {
		return "", badRequest("tools", "tools: the parameters cannot be enforced: %v", err)
	}
	// The call in the family's format around the JSON object (the
	// schema's root rule, renamed), its spaces single ones, as calls are
	// written (and the fewest tokens).
	src = strings.Replace(src, "root ::= ", "tool-call-object ::= ", 1)
	src = strings.Replace(src, jsonSpace, `space ::= | " "`, 1)
	var root string
	switch tp.family {
	case chat.Hermes:
		root = `root ::= "<tool_call>\n" tool-call-object "\n</tool_call>"`
	case chat.Mistral:
		root = `root ::= "[" tool-call-object "]"`
	default:
		root = `root ::= tool-call-object`
	}
	return root + "\n" + src, nil
}

// jsonSpace is the grammar package's rule of the space between JSON
// tokens.
const jsonSpace = `space ::= | " " | "\n" [ \t]{0,20}`
