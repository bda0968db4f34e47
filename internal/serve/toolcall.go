package serve

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"
)

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
