package chat

import "strings"

// Family is the format in which a model writes its tool calls, known from
// its chat template.
type Family string

// The families the reader knows. Every family also reads calls written
// as bare JSON at the start of the answer (an object, an array of them,
// {"tool_calls": [...]}, or one in a Markdown code fence), as models told
// of tools in their system message write them.
const (
	// Hermes is Hermes 2/3 and Qwen 2.5/3:
	// <tool_call>{"name": ..., "arguments": ...}</tool_call>, and Qwen 3
	// Coder/3.5's XML form inside it:
	// <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>,
	// and GLM's: <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value></tool_call>.
	Hermes Family = "hermes"
	// Llama3 is Llama 3.x: {"name": ..., "parameters": ...}, maybe after
	// <|python_tag|>.
	Llama3 Family = "llama3"
	// Mistral is Mistral's [TOOL_CALLS][{"name": ..., "arguments": ...}]
	// and the newer [TOOL_CALLS]NAME[ARGS]{...}.
	Mistral Family = "mistral"
	// JSON is any other template: bare JSON calls, and every family's
	// markers besides (a model the template does not name may write any).
	JSON Family = "json"
)

// The markers of the families' calls.
const (
	markHermes      = "<tool_call>"
	markHermesEnd   = "</tool_call>"
	markMistral     = "[TOOL_CALLS]"
	markArgs        = "[ARGS]"
	markPython      = "<|python_tag|>"
	markFunction    = "<function="
	markFunctionEnd = "</function>"
	markParam       = "<parameter="
	markParamEnd    = "</parameter>"
	markFence       = "```"
)

// markers are the texts that open a call in family f's answers.
func (f Family) markers() []string {
	switch f {
	case Hermes:
		return []string{markHermes}
	case Llama3:
		return []string{markPython}
	case Mistral:
		return []string{markMistral}
	}
	return []string{markHermes, markMistral, markPython}
}

// Markers are the texts around a model's reasoning.
type Markers struct {
	Open, Close string
}

// Think is the reasoning markers of Qwen 3, QwQ, DeepSeek R1 and V3.1,
// GLM and Granite.
var Think = Markers{Open: "<think>", Close: "</think>"}

// GemmaThought is Gemma 4's reasoning channel.
var GemmaThought = Markers{Open: "<|channel>thought", Close: "<channel|>"}

// Format is what a chat template tells of its model's answers: how it
// writes tool calls, and between which markers it reasons (zero Markers:
// it does not).
type Format struct {
	Family    Family
	Reasoning Markers
}

// FormatOf reads the format of a chat template's model from the template's
// source: the tool-call family from the markers it writes (a template that
// renders no tools gets JSON, the form in which the server describes
// them), the reasoning markers from those it strips or writes.
func FormatOf(src string) Format {
	var f Format
	switch {
	case !strings.Contains(src, "tools"):
		f.Family = JSON
	case strings.Contains(src, markHermes):
		f.Family = Hermes
	case strings.Contains(src, markMistral):
		f.Family = Mistral
	case strings.Contains(src, markPython), strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, `"parameters"`):
		f.Family = Llama3
	default:
		f.Family = JSON
	}
	switch {
	case strings.Contains(src, Think.Close):
		f.Reasoning = Think
	case strings.Contains(src, GemmaThought.Open) && strings.Contains(src, GemmaThought.Close):
		f.Reasoning = GemmaThought
	}
	return f
}

// OpensReasoning reports whether prompt, the rendered chat, ends inside
// the model's reasoning: its generation prompt opens the reasoning
// marker (DeepSeek R1, QwQ, Qwen 3.5, GLM, DeepSeek V3.1 thinking), so
// the answer begins with the reasoning and not with the open marker. The
// reader then starts inside the reasoning (Options.InReasoning).
func (f Format) OpensReasoning(prompt string) bool {
	if f.Reasoning.Open == "" {
		return false
	}
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), f.Reasoning.Open)
}
