package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/quote"
)

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

// toolFamily is the format in which a model writes its tool calls, known
// from its chat template.
type toolFamily string

const (
	familyHermes  toolFamily = "hermes"  // Hermes, Qwen 2.5/3: <tool_call>{"name":..., "arguments":...}</tool_call>
	familyLlama3  toolFamily = "llama3"  // Llama 3.x: {"name":..., "parameters":...}, maybe after <|python_tag|>
	familyMistral toolFamily = "mistral" // Mistral: [TOOL_CALLS][{"name":..., "arguments":...}]
	familyJSON    toolFamily = "json"    // any other: {"name":..., "arguments":...}
)

// familyOf tells a template's tool-call format from its text.
func familyOf(src string) toolFamily {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return familyHermes
	case strings.Contains(src, "[TOOL_CALLS]"):
		return familyMistral
	case strings.Contains(src, "<|python_tag|>"), strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, `"parameters"`):
		return familyLlama3
	}
	return familyJSON
}

// The markers before a call in the families' formats.
const (
	markHermes  = "<tool_call>"
	markHermesE = "</tool_call>"
	markMistral = "[TOOL_CALLS]"
	markArgs    = "[ARGS]"
	markPython  = "<|python_tag|>"
	// markFunction opens a call in Qwen 3 Coder's XML form, inside
	// <tool_call>.
	markFunction = "<function="
)

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolPlan is what a request's tools ask for.
type toolPlan struct {
	tools    []apiTool
	raw      []json.RawMessage // the tools as the client sent them (for the template)
	mode     string            // "auto", "required" or "function"
	name     string            // the function tool_choice names
	parallel bool              // parallel_tool_calls (default true)
	family   toolFamily
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
	if tp.family == familyLlama3 {
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
			"properties":           orderedProps{{"name", map[string]any{"const": t.Function.Name}}, {argsKey, params}},
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
	case familyHermes:
		root = `root ::= "<tool_call>\n" tool-call-object "\n</tool_call>"`
	case familyMistral:
		root = `root ::= "[" tool-call-object "]"`
	default:
		root = `root ::= tool-call-object`
	}
	return root + "\n" + src, nil
}

// jsonSpace is the grammar package's rule of the space between JSON
// tokens.
const jsonSpace = `space ::= | " " | "\n" [ \t]{0,20}`

// orderedProps is a JSON object whose keys keep their order (the
// grammar writes properties in the schema's order).
type orderedProps []kv

type kv struct {
	key string
	val any
}

func (o orderedProps) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		v, err := json.Marshal(kv.val)
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

// toolCall is a call the model made.
type toolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object's text
}

// parse reads the model's output as tool calls in any of the families'
// formats: the text outside the calls (trimmed) and the calls; no calls
// when the output is not one (a call naming a function that is not among
// the tools is not one).
func (tp *toolPlan) parse(text string) (string, []toolCall) {
	t := strings.TrimSpace(text)
	var content string
	var calls []toolCall
	ok := false
	switch {
	case strings.Contains(t, markHermes):
		content, calls, ok = tp.parseHermes(t)
	case strings.Contains(t, markMistral):
		i := strings.Index(t, markMistral)
		content = strings.TrimSpace(t[:i])
		calls, ok = tp.parseMistral(t[i:])
	case strings.Contains(t, markPython):
		i := strings.Index(t, markPython)
		content = strings.TrimSpace(t[:i])
		calls, ok = tp.callsFromJSON(t[i+len(markPython):])
	default:
		calls, ok = tp.callsFromJSON(stripFence(t))
	}
	if !ok || len(calls) == 0 {
		return text, nil
	}
	if !tp.parallel {
		calls = calls[:1]
	}
	for i := range calls {
		calls[i].ID = newCallID()
	}
	return content, calls
}

func (tp *toolPlan) parseHermes(t string) (string, []toolCall, bool) {
	var rest strings.Builder
	var calls []toolCall
	for {
		i := strings.Index(t, markHermes)
		if i < 0 {
			rest.WriteString(t)
			break
		}
		rest.WriteString(t[:i])
		t = t[i+len(markHermes):]
		body := t
		if j := strings.Index(t, markHermesE); j >= 0 {
			body, t = t[:j], t[j+len(markHermesE):]
		} else {
			t = ""
		}
		var c []toolCall
		ok := false
		if strings.HasPrefix(strings.TrimSpace(body), markFunction) {
			c, ok = tp.parseXMLCall(strings.TrimSpace(body))
		} else {
			c, ok = tp.callsFromJSON(body)
		}
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c...)
	}
	return strings.TrimSpace(rest.String()), calls, true
}

// parseXMLCall reads the XML form of Qwen 3 Coder, 3.5 and 3.6 inside a
// <tool_call>: <function=NAME><parameter=KEY>VALUE</parameter>...</function>.
// A value is JSON where it reads as JSON and its parameter is not a
// string, else the text.
func (tp *toolPlan) parseXMLCall(body string) ([]toolCall, bool) {
	rest, ok := strings.CutPrefix(body, markFunction)
	if !ok {
		return nil, false
	}
	name, rest, ok := strings.Cut(rest, ">")
	if !ok {
		return nil, false
	}
	fn := tp.tool(strings.TrimSpace(name))
	if fn == nil {
		return nil, false
	}
	var props map[string]struct {
		Type any `json:"type"`
	}
	if fn.Parameters != nil {
		var p struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		json.Unmarshal(fn.Parameters, &p)
		props = p.Properties
	}
	var args orderedProps
	for {
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "</function>") {
			break
		}
		after, ok := strings.CutPrefix(rest, "<parameter=")
		if !ok {
			return nil, false
		}
		key, after, ok := strings.Cut(after, ">")
		if !ok {
			return nil, false
		}
		value, after, ok := strings.Cut(after, "</parameter>")
		if !ok {
			return nil, false
		}
		value = strings.TrimSuffix(strings.TrimPrefix(value, "\n"), "\n")
		var v any = value
		if t, _ := props[key].Type.(string); t != "string" && json.Valid([]byte(value)) {
			v = json.RawMessage(value)
		}
		args = append(args, kv{key, v})
		rest = after
	}
	data, err := json.Marshal(args)
	if err != nil {
		return nil, false
	}
	return []toolCall{{Name: fn.Name, Arguments: string(data)}}, true
}

// parseMistral reads [TOOL_CALLS][{...}, ...] and the newer
// [TOOL_CALLS]name[ARGS]{...} (repeated for more calls).
func (tp *toolPlan) parseMistral(t string) ([]toolCall, bool) {
	var calls []toolCall
	for _, part := range strings.Split(t, markMistral)[1:] {
		part = strings.TrimSpace(part)
		if name, args, ok := strings.Cut(part, markArgs); ok {
			c, ok := tp.call(strings.TrimSpace(name), json.RawMessage(strings.TrimSpace(args)))
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
			continue
		}
		c, ok := tp.callsFromJSON(part)
		if !ok {
			return nil, false
		}
		calls = append(calls, c...)
	}
	return calls, true
}

// stripFence takes the text out of a Markdown code fence around it.
func stripFence(t string) string {
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	t = t[3 : len(t)-3]
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[") {
		t = t[i+1:]
	}
	return strings.TrimSpace(t)
}

// callsFromJSON reads s as JSON calls: objects (or arrays of them),
// separated by nothing, whitespace, ";" or ",", each a call; or an object
// with a tool_calls array.
func (tp *toolPlan) callsFromJSON(s string) ([]toolCall, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var calls []toolCall
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			rest := strings.Trim(s[min(int(dec.InputOffset()), len(s)):], " \t\r\n;,")
			return calls, len(calls) > 0 && rest == "" && err.Error() == "EOF"
		}
		c, ok := tp.callsFromValue(v)
		if !ok {
			return nil, false
		}
		calls = append(calls, c...)
		// Skip the separators between calls.
		off := int(dec.InputOffset())
		rest := strings.TrimLeft(s[off:], " \t\r\n;,")
		if rest == "" {
			return calls, len(calls) > 0
		}
		s = rest
		dec = json.NewDecoder(strings.NewReader(s))
	}
}

func (tp *toolPlan) callsFromValue(v json.RawMessage) ([]toolCall, bool) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil || len(list) == 0 {
			return nil, false
		}
		var calls []toolCall
		for _, x := range list {
			c, ok := tp.callsFromValue(x)
			if !ok {
				return nil, false
			}
			calls = append(calls, c...)
		}
		return calls, true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		return nil, false
	}
	if list, ok := obj["tool_calls"]; ok && len(obj) == 1 {
		return tp.callsFromValue(list)
	}
	if fn, ok := obj["function"]; ok && obj["name"] == nil {
		// {"type": "function", "function": {"name": ..., "arguments": ...}}
		return tp.callsFromValue(fn)
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil {
		return nil, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args = obj["parameters"]
	}
	c, ok := tp.call(name, args)
	if !ok {
		return nil, false
	}
	return []toolCall{c}, true
}

// call makes the call of function name with args, a JSON object (or a
// string holding one); not ok when the function is not among the tools.
func (tp *toolPlan) call(name string, args json.RawMessage) (toolCall, bool) {
	if tp.tool(name) == nil {
		return toolCall{}, false
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return toolCall{}, false
	}
	// The arguments as the model wrote them, as OpenAI gives them: a
	// stream sends them as they come.
	return toolCall{Name: name, Arguments: string(args)}, true
}

// newCallID returns a new tool call id, as OpenAI's look.
func newCallID() string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return "call_" + string(b)
}

// callMarkers are the texts that may begin a tool call in the model's
// output: a stream holds back its text from one of them to the end, to
// parse it then.
var callMarkers = []string{markHermes, markMistral, markPython}

// mayBeCall reports whether text (the start of an output, spaces
// trimmed) may be a tool call: it opens with a marker, a JSON object or
// array, or a code fence, or with a part of one of them.
func mayBeCall(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	if t == "" {
		return true
	}
	if t[0] == '{' || t[0] == '[' {
		return true
	}
	for _, m := range append(slices.Clone(callMarkers), "```") {
		if strings.HasPrefix(t, m) || strings.HasPrefix(m, t) {
			return true
		}
	}
	return false
}

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

// toolStream holds back a streamed choice's text that may be a tool call,
// to parse it at the end; text that cannot be one goes on as content. A
// call whose name comes first (as every family writes it) is streamed as
// it is written: its name once known, then its arguments as they come.
type toolStream struct {
	tp      *toolPlan
	pending string // text held back
	decided bool   // the output does not open with a call: content until a marker
	calling bool   // pending opens with a call's marker
	live    []liveCall
}

// liveCall is a call streamed as it is written.
type liveCall struct {
	call toolCall
	args string // its arguments sent so far
}

// feed takes the choice's new text and returns the content to send now;
// deltas are the calls' deltas to send after it.
func (ts *toolStream) feed(text string) (content string, deltas []*delta) {
	ts.pending += text
	if !ts.calling {
		content = ts.content()
	}
	if ts.calling || !ts.decided {
		deltas = ts.advance()
	}
	return content, deltas
}

func (ts *toolStream) content() string {
	if !ts.decided {
		if mayBeCall(ts.pending) {
			return ""
		}
		ts.decided = true
	}
	i := -1
	for _, m := range callMarkers {
		if j := strings.Index(ts.pending, m); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	if i >= 0 {
		out := ts.pending[:i]
		ts.pending, ts.calling = ts.pending[i:], true
		return out
	}
	h := holdBack([]byte(ts.pending), callMarkers)
	out := ts.pending[:len(ts.pending)-h]
	ts.pending = ts.pending[len(ts.pending)-h:]
	return out
}

// advance streams what the held-back text now shows of its first calls.
func (ts *toolStream) advance() []*delta {
	var out []*delta
	for i, start := range callStarts(ts.pending) {
		name, args, ok := scanCall(ts.pending[start:])
		if !ok || ts.tp.tool(name) == nil || !ts.tp.parallel && i > 0 {
			break
		}
		if i == len(ts.live) {
			ts.live = append(ts.live, liveCall{call: toolCall{ID: newCallID(), Name: name}})
			out = append(out, &delta{ToolCalls: []respToolCall{{Index: ptr(i), ID: ts.live[i].call.ID, Type: "function", Function: respFunction{Name: name}}}})
		}
		lc := &ts.live[i]
		if lc.call.Name != name || !strings.HasPrefix(args, lc.args) {
			break // not the call streamed so far: the end sorts it out
		}
		if d := args[len(lc.args):]; d != "" {
			out = append(out, &delta{ToolCalls: []respToolCall{{Index: ptr(i), Function: respFunction{Arguments: d}}}})
			lc.args = args
		}
	}
	return out
}

// end returns the text held back at the choice's end, the calls it makes
// (when the choice stopped, not cut by its length) and the deltas that
// finish streaming them. A choice that streamed a call and was cut sends
// no text.
func (ts *toolStream) end(stopped bool) (string, []toolCall, []*delta) {
	rest := ts.pending
	ts.pending = ""
	var calls []toolCall
	content := rest
	if stopped && (ts.calling || !ts.decided) {
		if c, cs := ts.tp.parse(rest); len(cs) > 0 {
			content, calls = c, cs
		}
	}
	if len(calls) == 0 {
		if len(ts.live) > 0 {
			return "", nil, nil
		}
		return content, nil, nil
	}
	var deltas []*delta
	for i := range calls {
		if i < len(ts.live) {
			lc := ts.live[i]
			calls[i].ID = lc.call.ID
			if calls[i].Name == lc.call.Name && strings.HasPrefix(calls[i].Arguments, lc.args) {
				if d := calls[i].Arguments[len(lc.args):]; d != "" {
					deltas = append(deltas, &delta{ToolCalls: []respToolCall{{Index: ptr(i), Function: respFunction{Arguments: d}}}})
				}
			}
			continue
		}
		deltas = append(deltas, callDeltas(i, calls[i])...)
	}
	return content, calls, deltas
}

// callStarts are the offsets in text of the call objects that begin it:
// after each <tool_call>, after <|python_tag|>, the text itself when it
// opens with an object, or the first object of an array (after
// [TOOL_CALLS] or not).
func callStarts(text string) []int {
	var out []int
	if strings.Contains(text, markHermes) {
		for i := 0; ; {
			j := strings.Index(text[i:], markHermes)
			if j < 0 {
				return out
			}
			i += j + len(markHermes)
			k := i + len(text[i:]) - len(strings.TrimLeft(text[i:], " \t\r\n"))
			if k < len(text) && text[k] == '{' {
				out = append(out, k)
			}
		}
	}
	t := text
	off := 0
	for _, m := range []string{markPython, markMistral} {
		if i := strings.Index(t, m); i >= 0 {
			off += i + len(m)
			t = t[i+len(m):]
			break
		}
	}
	trimmed := strings.TrimLeft(t, " \t\r\n")
	off += len(t) - len(trimmed)
	if strings.HasPrefix(trimmed, "[") {
		rest := strings.TrimLeft(trimmed[1:], " \t\r\n")
		off += len(trimmed) - len(rest)
		trimmed = rest
	}
	if strings.HasPrefix(trimmed, "{") {
		out = append(out, off)
	}
	return out
}

// scanCall reads the start of a call object (s opens with "{") whose name
// comes first: {"name": "NAME", "arguments" (or "parameters"): {...
// The name, once whole, and the arguments object's text so far; not ok
// before the name and the opening of the arguments are written, or when
// the object is not of that shape.
func scanCall(s string) (name, args string, ok bool) {
	p := 1
	ws := func() {
		for p < len(s) && strings.IndexByte(" \t\r\n", s[p]) >= 0 {
			p++
		}
	}
	str := func() (string, bool) {
		if p >= len(s) || s[p] != '"' {
			return "", false
		}
		end := jsonStringEnd(s, p)
		if end < 0 {
			return "", false
		}
		var v string
		if json.Unmarshal([]byte(s[p:end]), &v) != nil {
			return "", false
		}
		p = end
		return v, true
	}
	lit := func(c byte) bool {
		ws()
		if p < len(s) && s[p] == c {
			p++
			return true
		}
		return false
	}
	ws()
	if k, ok := str(); !ok || k != "name" || !lit(':') {
		return "", "", false
	}
	ws()
	name, ok = str()
	if !ok || !lit(',') {
		return "", "", false
	}
	ws()
	if k, ok := str(); !ok || (k != "arguments" && k != "parameters") || !lit(':') {
		return "", "", false
	}
	ws()
	if p >= len(s) || s[p] != '{' {
		return "", "", false
	}
	return name, s[p : p+jsonObjectPrefix(s[p:])], true
}

// jsonStringEnd is the offset past the JSON string that opens at s[i], or
// -1 when it does not end in s.
func jsonStringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// jsonObjectPrefix is the length of the object that opens s, through its
// closing brace, or all of s while it is not closed.
func jsonObjectPrefix(s string) int {
	depth := 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '"':
			end := jsonStringEnd(s, j)
			if end < 0 {
				return len(s)
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(s)
}

// toolReader is toolStream as an outputReader.
type toolReader struct{ ts *toolStream }

func (r toolReader) Add(text string) []replyDelta {
	content, ds := r.ts.feed(text)
	return appendChatDeltas(contentDeltas(content), ds)
}

func (r toolReader) End(stopped bool) ([]replyDelta, []toolCall) {
	rest, calls, ds := r.ts.end(stopped)
	return appendChatDeltas(contentDeltas(rest), ds), calls
}

func contentDeltas(text string) []replyDelta {
	if text == "" {
		return nil
	}
	return []replyDelta{{Content: text}}
}

func appendChatDeltas(out []replyDelta, ds []*delta) []replyDelta {
	for _, d := range ds {
		for _, tc := range d.ToolCalls {
			out = append(out, replyDelta{Call: &callDelta{Index: *tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	}
	return out
}

// argumentsChunk is the most bytes of a call's arguments in one delta.
const argumentsChunk = 16

// callDeltas are the deltas that stream call i: the first names it (with
// its id and empty arguments), the next ones carry its arguments piece by
// piece, as OpenAI streams them.
func callDeltas(i int, c toolCall) []*delta {
	out := []*delta{{ToolCalls: []respToolCall{{Index: ptr(i), ID: c.ID, Type: "function", Function: respFunction{Name: c.Name}}}}}
	args := c.Arguments
	for len(args) > 0 {
		n := min(len(args), argumentsChunk)
		for n < len(args) && !utf8.RuneStart(args[n]) {
			n++ // a delta holds whole characters
		}
		out = append(out, &delta{ToolCalls: []respToolCall{{Index: ptr(i), Function: respFunction{Arguments: args[:n]}}}})
		args = args[n:]
	}
	return out
}
